"""Requirement files as linted files: the packages a job's environment installs, each pin with its span.

The files are those `cfgopt.environment.pins` reads for the LLaMA-Factory / DeepSpeed releases (requirements*.txt,
pyproject.toml, uv.lock, poetry.lock, setup.py, setup.cfg, a conda environment.yml), read by the one reader
(`cfgopt.text.requirements`; a conda spec's version in PEP 440's words, `pytorch=2.5` as torch `==2.5.*`); here every
pin is kept, so the requirement rules (ENV0xx) can judge the builds (a CUDA torch on a ROCm target), the versions
the selected LLaMA-Factory release accepts, and bitsandbytes on ROCm. The root is a mapping from the normalised
package name to the specifier as written (`==2.5.1+cu121`, `@ https://...whl`, `""` for a bare name); the package
indexes the file names (pip's `--index-url` / `--extra-index-url` / `--find-links`, any URL in a TOML manifest)
are in `command["indexes"]`.

A requirements*.txt with a line pip stops on (`refused_requirement`: `llamafactory==`, `torch=2.5.1`) does not parse
as its consumer reads it: the Source carries the error (CFG001, exit 2) and no pins, since pip installs nothing.
"""

from __future__ import annotations

from cfgopt.text.document import Document
from cfgopt.text.requirements.files import is_requirements_txt, requirement_pins
from cfgopt.text.requirements.pip_files import RefusedRequirement, refused_requirement
from cfgopt.text.source import Entry, Kind, Node, ParseError, Source

# A file is linted only when it names one of these (a pyproject.toml of an unrelated project is not ours).
JUDGED = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "flash_attn",
        "bitsandbytes",
        "deepspeed",
        "llamafactory",
        "transformers",
        "datasets",
        "accelerate",
        "peft",
        "trl",
    }
)


# pip's operators (packaging's `Specifier._operators`): a line with `=` and none of them gets pip's hint
_OPERATORS = ("~=", "==", "!=", "<=", ">=", "<", ">", "===")


def load_requirements(doc: Document, named: bool = False) -> Source | None:
    """The pins of one requirement file as a Source, or None when it names none of the packages judged (`named`:
    given on the command line, so judged whatever it names, as long as it states a requirement). A requirements
    file pip stops on is a Source with its error when it is named or names a package judged, on that line or
    another: pip installs nothing from it."""
    found, indexes = requirement_pins(doc.path.name, doc.text)
    refused = refused_requirement(doc.text) if is_requirements_txt(doc.path.name) else None
    ours = named or any(pin.name in JUDGED for pin in found)
    if refused is not None and (ours or refused.name in JUDGED):
        return Source(document=doc, kind=Kind.REQUIREMENTS, error=ParseError(_refused_message(refused), refused.start))
    if not found or not ours:
        return None
    entries = [
        Entry(pin.name, pin.name_start, pin.name_end, Node(pin.spec, pin.spec_start, pin.spec_end), (pin.name,))
        for pin in found
    ]
    root = Node({pin.name: pin.spec for pin in found}, 0, len(doc.text), entries=entries)
    source = Source(document=doc, kind=Kind.REQUIREMENTS, root=root)
    source.command = {"indexes": indexes}
    return source


def _refused_message(refused: RefusedRequirement) -> str:
    """CFG001's message for a line pip stops on, with pip's own hint where it gives one (`=` for `==`)."""
    text = refused.text
    if refused.marker:
        return (
            f"invalid requirement `{text}`: its environment marker after `;` is none packaging parses (PEP 508: "
            '`python_version >= "3.9"`, joined by `and` / `or`), so pip stops with `InvalidMarker` and installs '
            "nothing from this file"
        )
    hint = (
        "; pip's hint: `=` is not a valid operator, did you mean `==`?"
        if "=" in text and not any(op in text for op in _OPERATORS)
        else ""
    )
    before = " (before pip 24.1: `No matching distribution found`)" if refused.legacy else ""
    return (
        f"invalid requirement `{text}` (PEP 508: `name[extras] specifiers ; marker`): pip stops with `Invalid "
        f"requirement`{before} and installs nothing from this file{hint}"
    )
