"""Requirement files as linted files: the packages a job's environment installs, each pin with its span.

The files are those `cfgopt.environment.pins` reads for the LLaMA-Factory / DeepSpeed releases (requirements*.txt,
pyproject.toml, uv.lock, poetry.lock, setup.py, setup.cfg, a conda environment.yml), read by the one reader
(`cfgopt.text.requirements`; a conda spec's version in PEP 440's words, `pytorch=2.5` as torch `==2.5.*`); here every
pin is kept, so the requirement rules (ENV0xx) can judge the builds (a CUDA torch on a ROCm target), the versions
the selected LLaMA-Factory release accepts, and bitsandbytes on ROCm. The root is a mapping from the normalised
package name to the specifier as written (`==2.5.1+cu121`, `@ https://...whl`, `""` for a bare name); the package
indexes the file names (pip's `--index-url` / `--extra-index-url` / `--find-links`, any URL in a TOML manifest)
are in `command["indexes"]`.
"""

from __future__ import annotations

from cfgopt.text.document import Document
from cfgopt.text.requirements.files import requirement_pins
from cfgopt.text.source import Entry, Kind, Node, Source

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


def load_requirements(doc: Document) -> Source | None:
    """The pins of one requirement file as a Source, or None when it names none of the packages judged."""
    found, indexes = requirement_pins(doc.path.name, doc.text)
    if not any(pin.name in JUDGED for pin in found):
        return None
    entries = [
        Entry(pin.name, pin.name_start, pin.name_end, Node(pin.spec, pin.spec_start, pin.spec_end), (pin.name,))
        for pin in found
    ]
    root = Node({pin.name: pin.spec for pin in found}, 0, len(doc.text), entries=entries)
    source = Source(document=doc, kind=Kind.REQUIREMENTS, root=root)
    source.command = {"indexes": indexes}
    return source
