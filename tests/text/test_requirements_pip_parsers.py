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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import setuptools  # noqa: F401 (before pip: pip's imports would load the stdlib's distutils, which setuptools refuses)
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pip._internal.network.session import PipSession
from pip._internal.req.req_file import ParsedLine, RequirementsFileParser, get_line_parser

from cfgopt.environment import pins as repository_pins
from cfgopt.environment.pins import NAMES as NAMED
from cfgopt.environment.stated import EXTRAS as LLAMAFACTORY_EXTRAS
from cfgopt.environment.stated import read_packages
from cfgopt.text.requirements.pip_files import line_pins, requirement_lines, requirements_txt_pins
from cfgopt.text.requirements.requirement import Pin, normalise

CASES = 300  # seeds per reader: every shape below comes up many times, in a few seconds
Read = tuple[str, str, tuple[str, ...]]  # (normalised name, specifier or `@ url`, normalised extras)


def _requirement_read(req: Requirement) -> Read:
    spec = "@ " + req.url if req.url else str(req.specifier)
    return normalise(req.name), spec, tuple(sorted(normalise(e) for e in req.extras))


def _packaging_read(text: str) -> Read | None:
    try:
        return _requirement_read(Requirement(text))
    except InvalidRequirement:
        return None


def _pin_read(pin: Pin) -> Read:
    try:
        spec = pin.spec if pin.spec.startswith("@") else str(SpecifierSet(pin.spec))
    except InvalidSpecifier:
        spec = "unreadable: " + pin.spec
    return pin.name, spec, tuple(sorted(pin.extras))


def _span_errors(text: str, pins: list[Pin]) -> list[str]:
    """The pins whose spans do not cover their name and their specifier (or URL) as written."""
    wrong = []
    for pin in pins:
        name, spec = text[pin.name_start : pin.name_end], text[pin.spec_start : pin.spec_end]
        if normalise(name) != pin.name or spec != (pin.spec.removeprefix("@ ") if pin.spec else name):
            wrong.append(f"{pin}: {name!r} {spec!r}")
    return wrong


def _first_failures(seeds: range, check: Callable[[int], str]) -> list[str]:
    failures = [message for seed in seeds if (message := check(seed))]
    return failures[:3]


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
        split.append(requirement[:at] + before.rstrip("\\") + after + requirement[at:])
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
_SESSION = PipSession()


def _pip_reads(main: Path) -> tuple[list[Read], list[Read], list[str]] | None:
    """pip's reading of a requirements file (its includes followed): the requirements packaging parses, the
    constraints, and the files it read (None where pip raises on the file)."""
    requirements: list[Read] = []
    constraints: list[Read] = []
    parser = _RecordingParser(_SESSION, get_line_parser(None))
    try:
        for line in parser.parse(str(main), False):
            if line.is_requirement and not line.is_editable and (read := _packaging_read(line.requirement)):
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
    return sorted({_pin_read(pin) for pin in pins})


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
        text = main.read_text(encoding="utf-8", errors="replace")
        lines = requirement_lines(main, text, _read_or_empty)
        mine = _cfgopt_reads(line_pins(lines))
        spans = [error for line in lines for error in _span_errors(line, line_pins([line]))]
        repository = repository_pins._requirements(main)  # the pins' first specifier of deepspeed, llamafactory
        pinned = all(
            any((name, _pin_read(Pin(name, spec, 0, 0, 0, 0))[1]) in {r[:2] for r in mine} for name in NAMED[package])
            for package, spec in repository.items()
        )
        if mine != real[0] or spans or not pinned or not _first_of_each(read_packages(main) or {}, mine):
            return f"seed {seed}: cfgopt {mine}, pip {real[0]}, spans {spans}\n{_shown(root)}"
        return ""

    assert _first_failures(range(CASES), check) == []


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
            text = Path(path).read_bytes().decode().removeprefix("\ufeff")  # the Document's text: BOM cut
            pins, _ = requirements_txt_pins(text)
            found += pins
            spans += _span_errors(text, pins)
        mine, expected = set(_cfgopt_reads(found)), set(real[0] + real[1])
        unspanned = {_packaging_read(text) for text in split}  # no span holds a name or specifier split in two
        if not (mine <= expected and expected - mine <= unspanned) or spans:
            return f"seed {seed}: cfgopt {mine}, pip {real[0]} {real[1]}, spans {spans}\n{_shown(root)}"
        return ""

    assert _first_failures(range(CASES), check) == []


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
    read_as = {name: _pin_read(Pin(name, spec, 0, 0, 0, 0))[1] for name, spec in packages.items()}
    return set(packages) == named | extras and all(
        (n, s) in pairs or (n in extras and s == "") for n, s in read_as.items()
    )


def _read_or_empty(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
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
    environment = [(p.name, p.spec) for p in line_pins(requirement_lines(path, text, read))]
    linted, _ = requirements_txt_pins(text.removeprefix("\ufeff"))
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
    none there; the linted Document drops the BOM itself)."""
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
