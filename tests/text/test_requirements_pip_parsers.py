"""The requirements*.txt, pyproject.toml and lock file readers (cfgopt/text/requirements/) against the real parsers:
seeded generated files of the shapes users write, read by cfgopt and by pip 23.2.1's own parser
(`pip._internal.req.req_file`, `-r` / `-c` included) or `tomllib`, each requirement string parsed by `packaging`
as pip and the build backends do. cfgopt reads the same requirements (name, specifier or URL, extras), or none
where the real reader reads none (a string packaging cannot parse, a shape cfgopt does not read); never a wrong
pin, and every span covers the text it names. The named tests below each keep one disagreement these comparisons
found."""

from __future__ import annotations

import os
import random
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the `tomli` the package depends on there
    import tomli as tomllib
from packaging.specifiers import InvalidSpecifier, SpecifierSet

with warnings.catch_warnings():  # pip's and setuptools' own import warnings (pkg_resources, distutils): not ours
    warnings.simplefilter("ignore")
    import setuptools  # noqa: F401 (before pip: pip's imports would load the stdlib's distutils, which it refuses)
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import (
        COMMENT_RE,
        ParsedLine,
        RequirementsFileParser,
        break_args_options,
        get_line_parser,
    )

from requirement_reads import Read, first_failures, packaging_read, pin_read
from sampling import full

from cfgopt.environment import pins as repository_pins
from cfgopt.environment.pins import NAMES as NAMED
from cfgopt.environment.stated import EXTRAS as LLAMAFACTORY_EXTRAS
from cfgopt.environment.stated import read_packages
from cfgopt.text.requirements.files import requirement_pins
from cfgopt.text.requirements.manifests import POETRY_PACKAGES, lock_pins, poetry_dependencies, project_dependencies
from cfgopt.text.requirements.pip_encoding import decode_requirements, read_requirements
from cfgopt.text.requirements.pip_files import line_pins, requirement_lines, requirements_txt_pins
from cfgopt.text.requirements.requirement import Pin, normalise

# seeds per reader: every shape below comes up many times in the default sample; --full runs 2,000
CASES = 2000 if full() else 300


def _pip_requirement_text(line: str) -> str:
    """The requirement pip reads from one joined line: its comment cut (`(^|\\s+)#.*$`), its options split off."""
    return break_args_options(COMMENT_RE.sub("", line).strip())[0]


def _span_errors(text: str, pins: list[Pin]) -> list[str]:
    """The pins whose spans do not cover their name and their specifier (or URL) as written."""
    wrong = []
    for pin in pins:
        name, spec = text[pin.name_start : pin.name_end], text[pin.spec_start : pin.spec_end]
        if normalise(name) != pin.name or spec not in (pin.spec.removeprefix("@ ") if pin.spec else (name, "*")):
            wrong.append(f"{pin}: {name!r} {spec!r}")
    return wrong


# --------------------------------------------------------------------------- requirements*.txt: a seeded generator
NAMES = ["torch", "flash-attn", "Flash_Attn", "deepspeed", "llamafactory", "LLaMA-Factory", "Liger.Kernel", "peft"]
SPECS = ["", ">=2.4", "==2.5.1", " >= 2.4 , < 2.6", "~=0.9.5", "!=1.0", "==2.5.*", "<3,>=2", "==2.5.1+cu121"]
SPECS += [" (>=1.0)", ">=2.4,", "===2.5.1", "==2.5.1 ;", ">=2.4<2.6", "==${TORCH_VERSION}"]
MARKERS = ["", ' ; python_version >= "3.9"', ';sys_platform=="linux"', " ; extra == 'gpu'", "; os_name = 'nt'"]
EXTRAS = ["", "[autotuning]", "[torch, sentencepiece]", " [metrics]", "[]"]
URLS = ["https://example.com/pkg-1.0-py3-none-any.whl", "git+https://github.com/o/r.git@v1#egg=x"]
COMMENTS = ["", "", "", " # note", "  #x", "\t# tab", " #", "#glued", " # ends in \\"]
OPTIONS = [
    "",
    "",
    "",
    " --hash=sha256:" + "a" * 64,
    " --hash sha256:abc",
    "\t--hash=sha256:abc",
    " --config-settings=k=v",
]
OTHER_LINES = [
    "# a comment",
    "  # via transformers",
    "#torch==9.9",
    "# a comment ending in \\",
    "",
    "   ",
    "-i https://pypi.org/simple",
    "--index-url https://download.pytorch.org/whl/cu121",
    "--index-url=https://download.pytorch.org/whl/rocm6.2",
    "--extra-index-url https://download.pytorch.org/whl/cu124",
    "-f https://example.com/links",
    "--find-links=https://example.com/links",
    "--pre",
    "--prefer-binary",
    "--trusted-host example.com",
    "--only-binary :all:",
    "-e git+https://github.com/o/r.git#egg=deepspeed",
    "--editable=git+https://github.com/o/r.git#egg=peft",
    "-e .",
    "https://example.com/torch-2.5.1-cp311-none-any.whl",
    "git+https://github.com/o/r.git@v1#egg=peft",
    "./local/pkg",
]
INCLUDES = ["-r {}", "--requirement {}", "--requirement={}", "-r{}", "-r  {}"]
CONSTRAINTS = ["-c {}", "--constraint {}", "--constraint={}"]


def _requirement(r: random.Random) -> str:
    name, kind = r.choice(NAMES), r.random()
    if kind < 0.1:
        return f"{name}{r.choice(EXTRAS)} @ {r.choice(URLS)}" + r.choice(["", ' ; python_version >= "3.9"'])
    return f"{name}{r.choice(EXTRAS)}{r.choice(SPECS)}{r.choice(MARKERS)}"


def _requirement_line(r: random.Random, split: list[str]) -> str:
    """A requirement with its options and comment, maybe split by a `\\` continuation: between the requirement
    and its options, or inside the requirement (the text pip joins then goes into `split`)."""
    requirement, options, comment = _requirement(r), r.choice(OPTIONS), r.choice(COMMENTS)
    shape, end = r.random(), r.choice(["\\", " \\", "\\\\"]) + "\n" + r.choice(["", "    ", "\t"])
    before, after = end.split("\n")
    if shape < 0.15 and options:
        if not before.rstrip("\\") + after:  # joined with no blank: the option glued to the requirement
            split.append(requirement + options.lstrip(" \t"))
        return requirement + end + options.lstrip(" ") + comment
    at = r.randint(1, max(len(requirement) - 1, 1))
    if shape < 0.3 and requirement[at:][:1] not in ("", "-"):  # a word starting `-` after the join: an option
        # the whole joined line: a comment glued to a URL is part of the requirement pip reads (`#egg=x#glued`)
        split.append(requirement[:at] + before.rstrip("\\") + after + requirement[at:] + options + comment)
        return requirement[:at] + end + requirement[at:] + options + comment
    return requirement + options + comment


def _requirements_file(r: random.Random, includes: list[str], split: list[str]) -> str:
    lines = []
    for _ in range(r.randint(0, 8)):
        lines.append(_requirement_line(r, split) if r.random() < 0.65 else r.choice(OTHER_LINES))
    for include in includes:
        lines.insert(r.randint(0, len(lines)), include)
    text = "\n".join(lines) + r.choice(["\n", "", "\n\n"])
    text = text.replace("\n", r.choice(["\n"] * 6 + ["\r\n", "\r"]))
    return ("\ufeff" if r.random() < 0.08 else "") + text


def _requirements_tree(r: random.Random, root: Path, split: list[str] | None = None) -> Path:
    """requirements.txt, maybe including a base file (in a subfolder or not, including one of its own) and a
    constraints file; the main file's path. The requirements split inside by a continuation go into `split`."""
    split = [] if split is None else split
    base = r.choice(["requirements-base.txt", "reqs/requirements-base.txt"])
    more, constraints = "requirements-more.txt", "requirements-constraints.txt"
    main_includes = [r.choice(INCLUDES).format(base)] if r.random() < 0.5 else []
    main_includes += [r.choice(CONSTRAINTS).format(constraints)] if r.random() < 0.3 else []
    files = {"requirements.txt": _requirements_file(r, main_includes, split)}
    files[base] = _requirements_file(r, [r.choice(INCLUDES).format(more)] if r.random() < 0.4 else [], split)
    files[str(Path(base).parent / more)] = _requirements_file(r, [], split)
    files[constraints] = _requirements_file(r, [], split)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode())
    return root / "requirements.txt"


# --------------------------------------------------------------------------- requirements*.txt: pip's reading
with warnings.catch_warnings():  # the session reads the installed distributions: pip's pkg_resources warns
    warnings.simplefilter("ignore", DeprecationWarning)
    _SESSION = PipSession()


def _pip_reads(main: Path) -> tuple[list[Read], list[Read], list[str]] | None:
    """pip's reading of a requirements file (its includes followed): the requirements packaging parses, the
    constraints, and the files it read (None where pip raises on the file)."""
    requirements: list[Read] = []
    constraints: list[Read] = []
    parser = _RecordingParser(_SESSION, get_line_parser(None))
    try:
        for line in parser.parse(str(main), False):
            if line.is_requirement and not line.is_editable and (read := packaging_read(line.requirement)):
                (constraints if line.constraint else requirements).append(read)
    except Exception:  # noqa: BLE001 (pip's errors: the file installs nothing)
        return None
    return sorted(set(requirements)), sorted(set(constraints)), sorted(parser.files)


class _RecordingParser(RequirementsFileParser):
    """pip's parser, recording every file it reads."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.files: set[str] = set()

    def _parse_file(self, filename: str, constraint: bool) -> Iterator[ParsedLine]:
        self.files.add(os.path.realpath(filename))
        return super()._parse_file(filename, constraint)


def _cfgopt_reads(pins: list[Pin]) -> list[Read]:
    return sorted({pin_read(pin) for pin in pins})


def test_requirements_txt_pins_are_what_pip_reads(tmp_path: Path) -> None:
    """Generated requirements files with their includes: the requirements the pins and the environment read
    (`requirement_lines`, `line_pins`) are pip's (its constraints are not installed: not read), spans on each
    logical line's text; `read_packages` and `pins_in` give the first of them."""

    def check(seed: int) -> str:
        root = tmp_path / str(seed)
        main = _requirements_tree(random.Random(seed), root)
        real = _pip_reads(main)
        if real is None:
            return f"seed {seed}: pip raises"
        lines = requirement_lines(main, read_requirements(main), _read_or_empty)
        mine = _cfgopt_reads(line_pins(lines))
        spans = [error for line in lines for error in _span_errors(line, line_pins([line]))]
        repository = repository_pins._requirements(main)  # the pins' first specifier of deepspeed, llamafactory
        pinned = all(
            any((name, pin_read(Pin(name, spec, 0, 0, 0, 0))[1]) in {r[:2] for r in mine} for name in NAMED[package])
            for package, spec in repository.items()
        )
        if mine != real[0] or spans or not pinned or not _first_of_each(read_packages(main) or {}, mine):
            return f"seed {seed}: cfgopt {mine}, pip {real[0]}, spans {spans}\n{_shown(root)}"
        return ""

    assert first_failures(range(CASES), check) == []


def test_requirements_txt_linted_pins_are_what_pip_reads(tmp_path: Path) -> None:
    """Each file pip reads, linted on its own (`requirements_txt_pins`): its pins, over all the files, are pip's
    requirements and constraints, spans on the file's text."""

    def check(seed: int) -> str:
        root, split = tmp_path / str(seed), []
        real = _pip_reads(_requirements_tree(random.Random(seed), root, split))
        if real is None:
            return f"seed {seed}: pip raises"
        found: list[Pin] = []
        spans: list[str] = []
        for path in real[2]:
            text = read_requirements(path)  # the Document's text: decoded as pip decodes it, the BOM cut
            pins, _ = requirements_txt_pins(text)
            found += pins
            spans += _span_errors(text, pins)
        mine, expected = set(_cfgopt_reads(found)), set(real[0] + real[1])
        unspanned = {packaging_read(_pip_requirement_text(line)) for line in split}  # no span holds a split name
        if not (mine <= expected and expected - mine <= unspanned) or spans:
            return f"seed {seed}: cfgopt {mine}, pip {real[0]} {real[1]}, spans {spans}\n{_shown(root)}"
        return ""

    assert first_failures(range(CASES), check) == []


def _first_of_each(packages: dict[str, str], reads: list[Read]) -> bool:
    """The environment's packages are the reads' names, each with one of its specifiers (and the distributions
    LLaMA-Factory's extras name, any release)."""
    pairs = {(name, spec) for name, spec, _ in reads}
    extras = {
        dist
        for name, _, asked in reads
        if name in ("llamafactory", "llama_factory")
        for e in asked
        for dist in LLAMAFACTORY_EXTRAS.get(e, ())
    }
    named = {name for name, _ in pairs}
    read_as = {name: pin_read(Pin(name, spec, 0, 0, 0, 0))[1] for name, spec in packages.items()}
    return set(packages) == named | extras and all(
        (n, s) in pairs or (n in extras and s == "") for n, s in read_as.items()
    )


def _read_or_empty(path: Path) -> str:
    try:
        return read_requirements(path)
    except (OSError, ValueError):
        return ""


def _shown(root: Path) -> str:
    return "\n".join(f"--- {p.relative_to(root)}\n{p.read_bytes()!r}" for p in sorted(root.rglob("*.txt")))


# --------------------------------------------------------------------------- requirements*.txt: each disagreement, kept
def _txt_reads(text: str, tmp_path: Path | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the pins and the environment's reading, the linted file's reading) of a requirements file's text."""
    path = (tmp_path or Path("/nonexistent")) / "requirements.txt"
    if tmp_path is not None:
        path.write_bytes(text.encode())
    read = _read_or_empty if tmp_path is not None else (lambda _: "")
    text = decode_requirements(text.encode()).text  # as pip decodes the file: a BOM cut
    environment = [(p.name, p.spec) for p in line_pins(requirement_lines(path, text, read))]
    linted, _ = requirements_txt_pins(text)
    return environment, [(p.name, p.spec) for p in linted]


@pytest.mark.parametrize(
    "line",
    [
        "torch>=2.4<2.6",  # no comma between the clauses
        "torch==2.5.1 ;",  # a `;` with no marker
        "torch==2.5.1; os_name = 'nt'",  # `=` is no marker operator
        "torch==2.5.1\t--hash=sha256:abc",  # options start at a word after a space: a tab glues them on
        "torch==2.5.1#cuda",  # a `#` after no blank is no comment
    ],
)
def test_a_requirement_line_packaging_cannot_parse_is_no_pin(line: str) -> None:
    """pip hands the line to packaging, which raises (the install fails): no pin (it was one, some unreadable)."""
    assert _txt_reads(line + "\n") == ([], [])


def test_a_requirement_naming_an_environment_variable_is_not_read() -> None:
    """pip substitutes `${NAME}` from the node's environment (`expand_env_variables`): the version is the node's,
    not the file's, so no pin (it was the pin `==${TORCH_VERSION}`, which no specifier reads)."""
    assert _txt_reads("torch==${TORCH_VERSION}\ndeepspeed==0.15.4\n") == ([("deepspeed", "==0.15.4")],) * 2


def test_a_specifier_in_brackets_is_read() -> None:
    """PEP 508's `name (>=2.4)`, which packaging reads, is a pin (it was none), its span inside the brackets."""
    text = "torch (>=2.4,<2.6)\n"
    (pin,), _ = requirements_txt_pins(text)
    assert (pin.spec, text[pin.spec_start : pin.spec_end]) == (">=2.4,<2.6", ">=2.4,<2.6")
    assert _txt_reads(text)[0] == [("torch", ">=2.4,<2.6")]


def test_a_comment_after_a_tab_is_a_comment() -> None:
    """pip's comment starts at a `#` after any blank (`COMMENT_RE`), a tab too (the line was no pin)."""
    assert _txt_reads("torch==2.5.1\t# the CUDA build\n") == ([("torch", "==2.5.1")],) * 2


def test_a_requirement_split_by_a_continuation_is_read_as_pip_joins_it() -> None:
    """`torch\\` then `==2.5.1` is one requirement, `torch==2.5.1` (the linted file read `torch`, any release);
    a name or specifier split in two has no span, so the linted file does not read it (never a wrong pin)."""
    text = "torch\\\n==2.5.1\npeft>=0.1\\\n2\n"
    (pin,), _ = requirements_txt_pins(text)
    assert (pin.name, pin.spec, text[pin.spec_start : pin.spec_end]) == ("torch", "==2.5.1", "==2.5.1")
    assert _txt_reads(text)[0] == [("torch", "==2.5.1"), ("peft", ">=0.12")]


def test_a_comment_ending_in_a_backslash_swallows_the_next_line() -> None:
    """`torch==2.5.1 # cuda \\` continues into the next line, which becomes part of the comment: pip never reads
    `deepspeed==0.15.4` (the linted file read it)."""
    assert _txt_reads("torch==2.5.1 # cuda \\\ndeepspeed==0.15.4\n") == ([("torch", "==2.5.1")],) * 2


def test_a_comment_line_ends_a_continuation() -> None:
    """pip joins `torch\\` with the comment line after a blank, so the comment is cut: `torch` (the pins and the
    environment read `torch# note`, no requirement); every `\\` at a continued line's end is stripped."""
    assert _txt_reads("torch\\\n# note\n")[0] == [("torch", "")]
    assert _txt_reads("torch==2.5.1\\\\\n") == ([("torch", "==2.5.1")],) * 2


def test_a_bom_is_no_part_of_the_first_requirement(tmp_path: Path) -> None:
    """pip drops a UTF-8 BOM (`auto_decode`): the first line is a pin for the pins and the environment too (it was
    none there); every reader drops it when decoding (`decode_requirements`)."""
    assert _txt_reads("\ufefftorch==2.5.1\n", tmp_path) == ([("torch", "==2.5.1")],) * 2
    assert read_packages(tmp_path / "requirements.txt") == {"torch": "==2.5.1"}


def test_arbitrary_equality_takes_a_hash_sign() -> None:
    """`===` compares any text up to a blank: `deepspeed===0.15.4#x` is that pin (it was none)."""
    assert _txt_reads("deepspeed===0.15.4#x\n") == ([("deepspeed", "===0.15.4#x")],) * 2


def test_an_include_is_read_as_optparse_reads_it(tmp_path: Path) -> None:
    """`-rbase.txt` includes base.txt (it was not followed); `-r=base.txt` names the file `=base.txt` (it was
    base.txt: pip fails on the missing file); a `-r` after a requirement is that requirement's option, ignored."""
    (tmp_path / "base.txt").write_text("deepspeed==0.15.4\n")
    assert _txt_reads("-rbase.txt\n", tmp_path)[0] == [("deepspeed", "==0.15.4")]
    assert _txt_reads("--requirement=base.txt\n", tmp_path)[0] == [("deepspeed", "==0.15.4")]
    assert _txt_reads("-r=base.txt\n", tmp_path)[0] == []
    assert _txt_reads("torch -r base.txt\n", tmp_path)[0] == [("torch", "")]


# --------------------------------------------------------------------------- pyproject.toml: a seeded generator
PEP508 = [
    "torch>=2.4",
    "torch==2.5.1+cu121",
    "deepspeed>=0.15,<0.17",
    "deepspeed[autotuning] == 0.16.4",
    "llamafactory[liger-kernel]==0.9.4",
    "LLaMA-Factory>=0.9.3 ; python_version >= '3.9'",
    "flash-attn @ https://example.com/flash_attn-2.6.3-cp311-linux_x86_64.whl",
    "peft",
    "liger-kernel (>=0.5)",
    "transformers>=4.46<4.50",
    "deepspeed >= 0.15 is needed",
]
TOML_DISTRACTORS = [
    'description = "Fine-tune with deepspeed >= 0.15 and LLaMA-Factory"',
    'requires-python = ">=3.9"',
    'keywords = ["deepspeed", "llm"]',
    'classifiers = ["Programming Language :: Python :: 3"]',
    'dynamic = ["version"]',
]


def _toml_string(r: random.Random, value: str) -> str:
    """A TOML string whose value is `value`: basic, literal, multi-line, or with an escape."""
    shape = r.random()
    if shape < 0.15 and "'" not in value:
        return f"'{value}'"
    if shape < 0.22:
        return f'"""{value}"""'
    if shape < 0.27 and "'" not in value:
        return f"'''\n{value}'''"
    if shape < 0.32 and ">" in value:
        return '"' + value.replace(">", "\\u003e", 1) + '"'
    if shape < 0.35:
        return '"' + value.replace('"', '\\"') + "\\t" + '"'  # an escaped blank: packaging takes it
    return '"' + value.replace('"', '\\"') + '"'


def _toml_array(r: random.Random, values: list[str]) -> str:
    """An array of strings on one line or several, with trailing commas and comments (one holding `]`)."""
    items = [_toml_string(r, v) for v in values]
    if r.random() < 0.4:
        return "[" + ", ".join(items) + r.choice(["", ","] if items else [""]) + "]" + r.choice(["", "  # deps"])
    out = "[" + r.choice(["", "  # what the job installs"]) + "\n"
    for item in items:
        out += r.choice(["", "", '    # "torch==1.0", ]\n'])
        out += "    " + item + r.choice([",", ",", " ,", ",  # note"]) + "\n"
    return out + r.choice(["]", "  ]", '    # "deepspeed==0.1",\n]'])


def _pyproject(r: random.Random) -> str:
    """A pyproject.toml: PEP 621 dependencies and extras, dependency groups, poetry's tables, tool tables."""
    parts = []
    if r.random() < 0.8:
        project = ['name = "job"', 'version = "0.1.0"', *r.sample(TOML_DISTRACTORS, r.randint(0, 3))]
        project += [f"dependencies = {_toml_array(r, r.sample(PEP508, r.randint(0, 4)))}"] * (r.random() < 0.85)
        r.shuffle(project)
        parts.append("[project]\n" + "\n".join(project))
        if r.random() < 0.4:
            extras = [f"{k} = {_toml_array(r, r.sample(PEP508, r.randint(0, 3)))}" for k in ("gpu", "dev")]
            parts.append("[project.optional-dependencies]\n" + "\n".join(extras))
        if r.random() < 0.3:
            parts.append('[project.scripts]\nllamafactory = "llamafactory.cli:main"\ndeepspeed = "ds.launch:main"')
    if r.random() < 0.3:
        groups = _toml_array(r, r.sample(PEP508, r.randint(0, 3)))
        parts.append(f'[dependency-groups]\ntest = {groups}\nall = [{{include-group = "test"}}, "peft>=0.12"]')
    if r.random() < 0.4:
        parts.append('[tool.poetry]\nname = "job"\n[tool.poetry.dependencies]\n' + _poetry_table(r))
        if r.random() < 0.4:
            parts.append("[tool.poetry.group.dev.dependencies]\n" + _poetry_table(r))
    if r.random() < 0.3:
        parts.append('[build-system]\nrequires = ["setuptools>=61", "wheel"]\nbuild-backend = "setuptools.build_meta"')
    if r.random() < 0.3:
        parts.append('[tool.ruff]\ntarget-version = "py311"\n[tool.pytest.ini_options]\naddopts = "-x"')
    r.shuffle(parts)
    return "\n\n".join(parts) + "\n"


POETRY_VALUES = [
    '"^2.4"',
    "'2.5.1'",
    '"*"',
    '">=0.15,<0.17"',
    '{ version = "~0.16.4", extras = ["autotuning"] }',
    "{version = '^0.9.4', extras = ['liger-kernel', 'metrics']}",
    '{ git = "https://github.com/hiyouga/LLaMA-Factory.git", rev = "v0.9.4" }',
    '{ url = "https://example.com/torch-2.5.1-cp311-linux_x86_64.whl" }',
    '[{ version = "2.4", python = "<3.12" }, { version = "2.5", python = ">=3.12" }]',
]
POETRY_NAMES = ["torch", "deepspeed", "llamafactory", '"flash-attn"', "liger-kernel", "Peft"]


def _poetry_table(r: random.Random) -> str:
    lines = ['python = "^3.10"'] * (r.random() < 0.7)
    for name in r.sample(POETRY_NAMES, r.randint(1, 4)):
        if r.random() < 0.1:
            lines.append(f'{name}.version = "^2.4"')  # a dotted key: the table form written flat
        else:
            lines.append(f"{name} = {r.choice(POETRY_VALUES)}" + r.choice(["", "", "  # pinned"]))
    return "\n".join(lines)


# --------------------------------------------------------------------------- pyproject.toml: tomllib's reading
Key = tuple[str, str, tuple[str, ...]]  # (normalised name, specifier as compared, normalised extras)


def _spec_key(spec: str) -> str:
    """A specifier as compared: PEP 440's in packaging's order, poetry's (`^2.4`) or a URL as written."""
    if spec.startswith("@"):
        return spec
    if spec.strip() == "*":
        return ""  # poetry's any release
    try:
        return str(SpecifierSet(spec))
    except InvalidSpecifier:
        return spec.strip()


def _key(pin: Pin) -> Key:
    return pin.name, _spec_key(pin.spec), tuple(sorted(pin.extras))


def _pep508_keys(values: object) -> list[tuple[Key, str]]:
    """The requirement strings of a TOML array that packaging parses, each with its string."""
    found = []
    for value in values if isinstance(values, list) else []:
        read = packaging_read(value) if isinstance(value, str) else None
        if read is not None:
            found.append(((read[0], _spec_key(read[1]), read[2]), value))
    return found


def _poetry_keys(table: object) -> list[tuple[Key, str]]:
    """poetry's dependencies with a version (a string, or a table's `version`), `python` left out."""
    found = []
    for name, value in (table if isinstance(table, dict) else {}).items():
        spec = value if isinstance(value, str) else value.get("version") if isinstance(value, dict) else None
        if normalise(name) != "python" and isinstance(spec, str):
            extras = value.get("extras", []) if isinstance(value, dict) else []
            found.append(((normalise(name), _spec_key(spec), tuple(sorted(map(normalise, extras)))), spec))
    return found


def _toml_reads(data: dict) -> dict[str, list[tuple[Key, str]]]:
    """tomllib's requirements of a pyproject.toml, by where they are."""
    project, tool = data.get("project", {}), data.get("tool", {})
    poetry = tool.get("poetry", {})
    return {
        "dependencies": _pep508_keys(project.get("dependencies")),
        "optional": [k for v in project.get("optional-dependencies", {}).values() for k in _pep508_keys(v)],
        "groups": [k for v in data.get("dependency-groups", {}).values() for k in _pep508_keys(v)],
        "build": _pep508_keys(data.get("build-system", {}).get("requires")),
        "poetry": _poetry_keys(poetry.get("dependencies")),
        "poetry-groups": [k for g in poetry.get("group", {}).values() for k in _poetry_keys(g.get("dependencies"))],
    }


def _escaped_strings(text: str) -> set[str]:
    """What the file's one-line basic strings written with a backslash escape read as (tomllib decodes them)."""
    found = set()
    for literal in re.findall(r'"(?:[^"\\\n]|\\.)*\\(?:[^"\\\n]|\\.)*"', text):
        try:
            found.add(tomllib.loads(f"x = {literal}")["x"])
        except tomllib.TOMLDecodeError:
            continue
    return found


def _unread_allowed(text: str, written: str, name: str) -> bool:
    """A requirement cfgopt may leave unread: a string written with an escape (here, even where the same text is
    also written plainly in another table) or a poetry dotted key (`torch.version = ...`)."""
    keys = (line.split("=", 1)[0].strip() for line in text.splitlines())
    dotted = any(key.endswith(".version") and normalise(key[:-8].strip('"')) == name for key in keys)
    return written not in text or written in _escaped_strings(text) or dotted


def _compare(text: str, mine: set[Key], real: list[tuple[Key, str]], lenient: bool = False) -> str:
    """ "" when cfgopt's reads are among the real ones, and each real one it leaves out may be left out."""
    keys = {key for key, _ in real}
    wrong = {key for key in mine - keys if key[1] or not lenient}
    missing = [(key, w) for key, w in real if key not in mine and not _unread_allowed(text, w, key[0])]
    return f"wrong {sorted(wrong)}, missing {missing}" if wrong or missing else ""


def test_pyproject_environment_is_what_tomllib_reads(tmp_path: Path) -> None:
    """The job's environment (`project_dependencies`, `poetry_dependencies`, `read_packages`): `[project]
    dependencies` and poetry's main table as tomllib and packaging read them; never another pin."""

    def check(seed: int) -> str:
        text = _pyproject(random.Random(seed))
        reads = _toml_reads(tomllib.loads(text))
        mine = {_key(p) for p in (project_dependencies(text) or []) + (poetry_dependencies(text) or [])}
        spans = _span_errors(text, (project_dependencies(text) or []) + (poetry_dependencies(text) or []))
        problem = _compare(text, mine, reads["dependencies"] + reads["poetry"])
        path = tmp_path / "pyproject.toml"
        path.write_text(text)
        named = {(n, _spec_key(s)) for n, s in (read_packages(path) or {}).items()}
        known = {k[:2] for k, _ in reads["dependencies"] + reads["poetry"]} | {(n, "") for n, _ in named}
        if problem or spans or not named <= known:
            return f"seed {seed}: {problem} {spans} {named - known}\n{text}"
        return ""

    assert first_failures(range(CASES), check) == []


def test_pyproject_pins_and_linted_pins_are_what_tomllib_reads(tmp_path: Path) -> None:
    """The repository's pins (`pins_in`: every requirement, extras and groups too) and the linted file's pins
    (`requirement_pins`): each a requirement tomllib and packaging read there, with its span; none left out but
    what is written with an escape or as a dotted key."""

    def check(seed: int) -> str:
        text = _pyproject(random.Random(seed))
        reads = [k for found in _toml_reads(tomllib.loads(text)).values() for k in found]
        linted, _ = requirement_pins("pyproject.toml", text)
        with_spec = [(key, w) for key, w in reads if key[1] and key[0] in POETRY_PACKAGES | {key[0]}]
        mine = {(*_key(p)[:2], ()) for p in linted}
        problem = _compare(text, mine, [((k[0], k[1], ()), w) for k, w in with_spec], lenient=True)
        problem += (
            str(mine - {(k[0], k[1], ()) for k, _ in reads}) if mine - {(k[0], k[1], ()) for k, _ in reads} else ""
        )
        path = tmp_path / "pyproject.toml"
        path.write_text(text)
        specs = {(n, k[1]) for k, _ in reads for package, names in NAMED.items() if (n := package) and k[0] in names}
        pinned = {(package, _spec_key(spec)) for package, spec in repository_pins._pyproject(path).items()}
        if problem or _span_errors(text, linted) or not pinned <= specs:
            return f"seed {seed}: {problem} {_span_errors(text, linted)} {pinned - specs}\n{text}"
        return ""

    assert first_failures(range(CASES), check) == []


# --------------------------------------------------------------------------- uv.lock / poetry.lock
LOCKED = [("torch", "2.5.1+cu121"), ("deepspeed", "0.16.4"), ("LLaMA-Factory", "0.9.4"), ("liger_kernel", "0.5.2")]


def _lock_package(r: random.Random, name: str, version: str, nl: str) -> str:
    """One `[[package]]` table as uv or poetry writes it, or in a shape a person might (keys swapped, a comment,
    indented, literal strings), or one without a version (uv's editable project)."""
    shape = r.random()
    name_line, version_line = f'name = "{name}"', f'version = "{version}"'
    if shape < 0.1:
        body = [version_line, name_line]
    elif shape < 0.15:
        body = [name_line, "# pinned", version_line]
    elif shape < 0.2:
        body = [f"  {name_line}", f"  {version_line}"]
    elif shape < 0.25:
        body = [f"name = '{name}'", f"version = '{version}'"]
    elif shape < 0.3:
        body = [f"{name_line}  # the build", version_line]
    elif shape < 0.35:
        body = [name_line]  # no version (uv's editable project: its source follows)
    else:
        body = [name_line, version_line]
    if r.random() < 0.5:  # uv
        body += ['source = { registry = "https://pypi.org/simple" }', 'dependencies = [{ name = "filelock" }]']
        body += ["", "[package.metadata]", 'requires-dist = [{ name = "torch", specifier = ">=2.4" }]']
    else:  # poetry
        body += ['description = "Tensors"', "optional = false", "", "[package.dependencies]", 'filelock = "*"']
    return "[[package]]" + nl + nl.join(body) + nl


def _lock(r: random.Random) -> str:
    nl = r.choice(["\n", "\n", "\r\n"])
    head = r.choice(["version = 1" + nl + 'requires-python = ">=3.10"' + nl, "# This file is generated" + nl])
    packages = r.sample(LOCKED, r.randint(0, 4))
    tables = [_lock_package(r, name, version, nl) for name, version in packages]
    tail = r.choice(["", "[metadata]" + nl + 'lock-version = "2.0"' + nl + 'content-hash = "abc"' + nl])
    return head + nl + nl.join(tables) + nl + tail


def test_lock_pins_are_what_tomllib_reads() -> None:
    """uv.lock / poetry.lock: each pin is a `[[package]]` table's name and exact version as tomllib reads them,
    spans on their text; a table in another shape is left out, never misread."""

    def check(seed: int) -> str:
        text = _lock(random.Random(seed))
        real = {
            (normalise(p["name"]), "==" + p["version"])
            for p in tomllib.loads(text).get("package", [])
            if "version" in p
        }
        pins = lock_pins(text)
        mine = {(p.name, p.spec) for p in pins}
        written = {(n, v) for n, v in real if f'name = "{text_name(n, text)}"\nversion' in text.replace("\r\n", "\n")}
        spans = [
            p
            for p in pins
            if normalise(text[p.name_start : p.name_end]) != p.name or "==" + text[p.spec_start : p.spec_end] != p.spec
        ]
        if not mine <= real or not written <= mine or spans:
            return f"seed {seed}: cfgopt {sorted(mine)}, tomllib {sorted(real)}, spans {spans}\n{text}"
        return ""

    assert first_failures(range(CASES), check) == []


def text_name(name: str, text: str) -> str:
    """The name as written in the lock (its normalised form given)."""
    return next((n for n, _ in LOCKED if normalise(n) == name), name)


# --------------------------------------------------------------------------- pyproject.toml: each disagreement, kept
def _pyproject_reads(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the job's environment, the linted file's pins) of a pyproject.toml."""
    stated = (project_dependencies(text) or []) + (poetry_dependencies(text) or [])
    return [(p.name, p.spec) for p in stated], [(p.name, p.spec) for p in requirement_pins("pyproject.toml", text)[0]]


def test_a_pyproject_string_packaging_cannot_parse_is_no_pin() -> None:
    """A build backend parses each dependency with packaging: `transformers>=4.46<4.50` and a sentence in a
    description are no pins (they were `>=4.46<4.50`, `>= 0.15 is needed`)."""
    text = (
        '[project]\ndescription = "deepspeed >= 0.15 is needed"\n'
        'dependencies = ["transformers>=4.46<4.50", "torch>=2.4"]\n'
    )
    assert _pyproject_reads(text) == ([("torch", ">=2.4")], [("torch", ">=2.4")])


def test_a_pyproject_string_with_an_escape_is_not_read() -> None:
    """`"torch>=2.4\\t"` is `torch>=2.4` and a tab to tomllib; its text in the file is another: not read (it was
    the unreadable `>=2.4\\t`)."""
    assert _pyproject_reads('[project]\ndependencies = ["torch>=2.4\\t", "peft>=0.12"]\n')[0] == [("peft", ">=0.12")]


def test_a_pyproject_specifier_in_brackets_is_read() -> None:
    """`liger-kernel (>=0.5)`, which packaging reads, is a pin (it was none)."""
    assert (
        _pyproject_reads('[project]\ndependencies = ["liger-kernel (>=0.5)"]\n') == ([("liger_kernel", ">=0.5")],) * 2
    )


def test_a_poetry_dotted_key_is_no_package() -> None:
    """`llamafactory.version = "^0.9.4"` is the key `version` of the table `llamafactory` (TOML's dotted key): not
    read (it was the package `llamafactory_version`)."""
    text = '[tool.poetry.dependencies]\nllamafactory.version = "^0.9.4"\ndeepspeed = "^0.16"\n'
    assert _pyproject_reads(text) == ([("deepspeed", "^0.16")],) * 2


def test_a_script_named_as_a_package_is_no_pin(tmp_path: Path) -> None:
    """`[project.scripts] llamafactory = "llamafactory.cli:main"` is an entry point: the repository's pins and the
    linted file read no release from it (they read `llamafactory.cli:main`); a table of dependencies is read."""
    text = '[project.scripts]\nllamafactory = "llamafactory.cli:main"\n'
    text += '[tool.poetry.group.dev.dependencies]\ndeepspeed = "^0.16"\n'
    (tmp_path / "pyproject.toml").write_text(text)
    assert repository_pins._pyproject(tmp_path / "pyproject.toml") == {"deepspeed": "^0.16"}
    assert _pyproject_reads(text)[1] == [("deepspeed", "^0.16")]
