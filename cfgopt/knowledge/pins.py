"""The LLaMA-Factory / DeepSpeed releases a repository states for itself: its dependency pins.

A config lives in a repository that says which releases it runs with: `requirements*.txt`, `pyproject.toml`
(PEP 621 dependencies and optional dependencies, dependency groups, poetry), `uv.lock` / `poetry.lock`
(exact), `setup.py` (quoted requirement strings), or, in a LLaMA-Factory fork, the fork's own source tree
(`src/llamafactory/extras/env.py` `VERSION`). `find_pins` walks up from the config's folder to the
repository root (the folder holding `.git`, else the filesystem root); per package the closest folder that
states it wins, and inside one folder a lock file (what really installs) beats a manifest. Every file is
read as text, TOML included (no parser is loaded on the lint path; see `_POETRY`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from cfgopt.knowledge.versions import VersionRange
from cfgopt.text.patterns import lazy
from cfgopt.text.user_files import read_text_bounded

# distribution names as pip normalises them (LLaMA-Factory was published as `llmtuner` before 0.6)
NAMES = {"deepspeed": ("deepspeed",), "llamafactory": ("llamafactory", "llama_factory")}
# No two quantifiers in these patterns can match the same characters one after the other (`\s*(...)?\s*`
# would): a 3 KB line then takes milliseconds, not minutes (the old requirement pattern backtracked cubically).
# The specifier keeps its trailing blanks, stripped by the readers.
_REQUIREMENT = lazy(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\]\s*)?((?:[<>=!~^][^;#@]*)?)(?:;.*)?$")
_QUOTED = lazy(r"""["']([A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\]\s*)?[<>=!~][^"']*)["']""")
_LF_VERSION = lazy(r"""^VERSION\s*=\s*["']([0-9][^"']*)["']""", re.MULTILINE)
_LF_SOURCE = ("src", "llamafactory", "extras", "env.py")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _package_of(name: str) -> str | None:
    norm = _normalise(name)
    return next((pkg for pkg, names in NAMES.items() if norm in names), None)


def _read(path: Path) -> str:
    """The file's text, or "" when it is missing, unreadable, not a regular file (a FIFO would block, a link
    to /dev/zero read forever) or larger than a dependency manifest can be."""
    try:
        return read_text_bounded(path)
    except OSError:
        return ""


_LINE_OPTIONS = lazy(r"\s-")  # a requirement's own options (`--hash=...`, `--config-settings`) follow it


def requirement_of(line: str) -> str:
    """A requirements file's logical line without its comment and its per-requirement options (pip's
    `break_args_options`: the options start at the first word that starts with `-`)."""
    line = line.split(" #", 1)[0]
    option = _LINE_OPTIONS.search(line)
    return (line[: option.start()] if option else line).strip()


def _from_requirement_lines(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        line = requirement_of(line)
        if not line or line.startswith(("#", "-", "git+", "http")):
            continue
        match = _REQUIREMENT.match(line)
        if match is None:
            continue
        package = _package_of(match.group(1))
        if package is not None and package not in out:
            out[package] = match.group(2).strip().rstrip(",")
    return out


def _requirements(path: Path) -> dict[str, str]:
    return _from_requirement_lines(requirement_lines(path, _read(path), _read))


# pip's `-r FILE` / `--requirement FILE` (src/pip/_internal/req/req_file.py): the included file's requirements
# are the including file's, its path relative to the including file's folder; nesting is bounded here.
_INCLUDE = lazy(r"^\s*(?:-r|--requirement)(?:\s*=\s*|\s+)(\S+)")
MAX_INCLUDES = 16


def logical_lines(text: str) -> list[str]:
    """The lines pip reads (`join_lines`): a line ending in `\\` is joined with the next, except a comment."""
    out: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if line.endswith("\\") and not re.match(r"(^|\s+)#", line):
            pending.append(line[:-1])
            continue
        out.append("".join(pending) + line)
        pending = []
    if pending:
        out.append("".join(pending))
    return out


def requirement_lines(path: Path, text: str, read: Callable[[Path], str]) -> list[str]:
    """The logical lines of a requirements file, followed by those of the files its `-r` lines include
    (`read(path)` gives a file's text, "" when it cannot be read); each file once, at most MAX_INCLUDES."""
    seen = {os.path.realpath(path)}
    lines: list[str] = []
    queue = [(path, text)]
    while queue:
        current, body = queue.pop(0)
        for line in logical_lines(body):
            lines.append(line)
            include = _INCLUDE.match(line)
            if include is None or "://" in include.group(1) or len(seen) > MAX_INCLUDES:
                continue
            target = current.parent / os.path.expanduser(include.group(1))
            key = os.path.realpath(target)
            if key not in seen:
                seen.add(key)
                queue.append((target, read(target)))
    return lines


# TOML files are read as text, not parsed: every pin in them is a quoted PEP 508 string (PEP 621 and optional
# dependencies, dependency groups), a poetry `name = "spec"` / `name = { version = "spec" }` line, or a lock
# file's `name` line followed by its `version`; parsing TOML would load tomllib on every lint run in a
# repository that pins DeepSpeed (tests/rules/test_signal_over_noise.py compares the two readings).
_POETRY = lazy(
    r"""^[ \t]*["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?[ \t]*=[ \t]*"""
    r"""(?:"([^"\n]*)"|'([^'\n]*)'|\{[^}\n]*?\bversion[ \t]*=[ \t]*["']([^"'\n]*)["'])""",
    re.MULTILINE,
)
_LOCKED = lazy(r'^name[ \t]*=[ \t]*"([^"\n]+)"[ \t]*\r?\nversion[ \t]*=[ \t]*"([^"\n]+)"', re.MULTILINE)


# A string or a comment of setup.py (Python) or a TOML file, in one linear pass: each alternative consumes what
# it matches without overlap, and none can fail (a string runs to its line's or the text's end, a lone backslash
# included), so no start is scanned twice. Basic strings take backslash escapes; TOML's '...' literal strings do not.
_BASIC_STRINGS = r'"""(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:"""|\Z)|"(?:[^"\\\n]|\\[\s\S]?)*(?:"|$)'
_PYTHON_SINGLE = r"'''(?:[^'\\]|\\[\s\S]?|'(?!''))*(?:'''|\Z)|'(?:[^'\\\n]|\\[\s\S]?)*(?:'|$)"
_TOML_LITERAL = r"'''[\s\S]*?(?:'''|\Z)|'[^'\n]*(?:'|$)"
_TOKENS = {
    "python": lazy(f"{_BASIC_STRINGS}|{_PYTHON_SINGLE}|#[^\\n]*", re.MULTILINE),
    "toml": lazy(f"{_BASIC_STRINGS}|{_TOML_LITERAL}|#[^\\n]*", re.MULTILINE),
}


def _blank_comments(text: str, syntax: str = "toml") -> str:
    """The text with every comment blanked, offsets kept (a pin commented out, on its own line or after code,
    is not a pin); a `#` inside a string is no comment. `syntax`: "python" (setup.py) or "toml"."""
    return _TOKENS[syntax].sub(lambda m: " " * len(m.group()) if m.group().startswith("#") else m.group(), text)


def _names_a_package(text: str) -> bool:
    return any(n in _normalise(text) for names in NAMES.values() for n in names)


def _pyproject(path: Path) -> dict[str, str]:
    text = _read(path)
    if not _names_a_package(text):
        return {}
    text = _blank_comments(text)
    out = _from_requirement_lines(_QUOTED.findall(text))
    for match in _POETRY.finditer(text):
        package = _package_of(match.group(1))
        spec = next((g for g in match.groups()[1:] if g is not None), None)
        if package is not None and spec is not None and package not in out:
            out[package] = "" if spec.strip() == "*" else spec.strip()
    return out


def _lock(path: Path) -> dict[str, str]:
    """uv.lock / poetry.lock: `[[package]]` tables, `name` then the exact `version` that installs."""
    text = _read(path)
    if not _names_a_package(text):
        return {}
    out: dict[str, str] = {}
    for name, version in _LOCKED.findall(text):
        package = _package_of(name)
        if package is not None and package not in out:
            out[package] = "==" + version
    return out


def _setup_py(path: Path) -> dict[str, str]:
    return _from_requirement_lines(_QUOTED.findall(_blank_comments(_read(path), "python")))


def _llamafactory_source(folder: Path) -> dict[str, str]:
    """A LLaMA-Factory checkout or fork: its configs run with the LLaMA-Factory in the same tree."""
    match = _LF_VERSION.search(_read(folder.joinpath(*_LF_SOURCE)))
    return {"llamafactory": "==" + match.group(1)} if match else {}


# closest first inside one folder: what installs (locks), then what is declared
_READERS = (
    ("uv.lock", _lock),
    ("poetry.lock", _lock),
    ("pyproject.toml", _pyproject),
    ("setup.py", _setup_py),
)


def pins_in(folder: Path) -> dict[str, VersionRange]:
    """The pins one folder states, per package."""
    out: dict[str, VersionRange] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    found: list[tuple[str, dict[str, str]]] = []
    for name, reader in _READERS:
        if name in names:
            found.append((name, reader(folder / name)))
    found += [(n, _requirements(folder / n)) for n in names if n.startswith("requirements") and n.endswith(".txt")]
    if "src" in names:
        found.append(("src/llamafactory/extras/env.py", _llamafactory_source(folder)))
    for name, specs in found:
        for package, spec in specs.items():
            if package not in out:
                out[package] = VersionRange(package, spec, _shown(folder / name))
    return out


def _shown(path: Path) -> str:
    """The file as a message shows it: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def find_pins(folder: Path, cache: dict[str, dict[str, VersionRange]] | None = None) -> dict[str, VersionRange]:
    """The closest pins per package at or above `folder`, up to the repository root (the folder with `.git`)."""
    known = {} if cache is None else cache
    current = os.path.realpath(folder)
    visited: list[str] = []
    out: dict[str, VersionRange] = {}
    while True:
        if current in known:
            for package, rng in known[current].items():
                out.setdefault(package, rng)
            break
        visited.append(current)
        for package, rng in pins_in(Path(current)).items():
            out.setdefault(package, rng)
        parent = os.path.dirname(current)
        if parent == current or os.path.exists(os.path.join(current, ".git")) or len(out) == len(NAMES):
            break
        current = parent
    # every folder on the way sees the same pins (nothing closer stated another)
    for seen in visited:
        known.setdefault(seen, dict(out))
    return out


# --------------------------------------------------------------------------- requirement files as linted files
# The requirement rules (cfgopt/rules/env*) lint the same files `pins_in` reads, for every package they name and
# with the position of each pin; `cfgopt.loaders.requirement_files` builds a Source from these.
REQUIREMENT_FILES = ("uv.lock", "poetry.lock", "pyproject.toml", "setup.py")
_DIRECT = lazy(r"""^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\]\s*)?@\s*(\S+)""")
_QUOTED_DIRECT = lazy(r"""["']([A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\]\s*)?@\s*[^"'\s]+)["']""")
_INDEX_OPTION = lazy(r"^\s*(?:-i|--index-url|--extra-index-url|-f|--find-links)(?:\s+|=)(\S+)")
_URL = lazy(r"""https?://[^\s"'\]},]+""")


class Pin(NamedTuple):
    """One requirement as written: the name (normalised), its specifier or `@ url`, and their spans."""

    name: str
    spec: str
    name_start: int
    name_end: int
    spec_start: int
    spec_end: int


def is_requirement_file(name: str) -> bool:
    """A file `pins_in` reads for pins (and the requirement rules lint)."""
    return name in REQUIREMENT_FILES or (name.startswith("requirements") and name.endswith(".txt"))


def _pin_from(text: str, offset: int) -> Pin | None:
    """A PEP 508 requirement (`name[extra] spec ; marker` or `name @ url`) starting at `offset` in a file."""
    direct = _DIRECT.match(text)
    if direct is not None:
        name_at, spec_at = direct.start(1) + offset, direct.start(2) + offset
        url = direct.group(2)
        return Pin(
            _normalise(direct.group(1)),
            "@ " + url,
            name_at,
            name_at + len(direct.group(1)),
            spec_at,
            spec_at + len(url),
        )
    match = _REQUIREMENT.match(text)
    if match is None:
        return None
    spec = match.group(2).strip().rstrip(",")
    name_at = match.start(1) + offset
    spec_at = match.start(2) + offset if spec else name_at
    spec_end = spec_at + len(spec) if spec else name_at + len(match.group(1))
    return Pin(_normalise(match.group(1)), spec, name_at, name_at + len(match.group(1)), spec_at, spec_end)


def _requirement_txt_pins(text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    pins: list[Pin] = []
    indexes: list[tuple[str, int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.split(" #", 1)[0].rstrip("\r\n").removesuffix("\\")  # a continuation's `\\` is no pin's
        cut = _LINE_OPTIONS.search(body)
        body = body[: cut.start()] if cut and not body.lstrip().startswith("-") else body  # `pin --hash=...`
        option = _INDEX_OPTION.match(body)
        if option is not None:
            indexes.append((option.group(1), offset + option.start(1), offset + option.end(1)))
        elif body.strip() and not body.lstrip().startswith(("#", "-", "git+", "http")):
            pin = _pin_from(body, offset)
            if pin is not None:
                pins.append(pin)
        offset += len(line)
    return pins, indexes


def _manifest_pins(text: str, syntax: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """pyproject.toml / setup.py: quoted requirement strings and poetry `name = "spec"` lines; index URLs."""
    text = _blank_comments(text, syntax)
    pins = [
        pin
        for regex in (_QUOTED, _QUOTED_DIRECT)
        for m in regex.finditer(text)
        if (pin := _pin_from(m.group(1), m.start(1))) is not None
    ]
    for m in _POETRY.finditer(text):
        group = next(i for i in (2, 3, 4) if m.group(i) is not None)
        name = _normalise(m.group(1))
        if name in POETRY_PACKAGES:
            start = m.start(group)
            pins.append(Pin(name, m.group(group).strip(), m.start(1), m.end(1), start, m.end(group)))
    indexes = [(m.group(0), m.start(), m.end()) for m in _URL.finditer(text)]
    return sorted(pins, key=lambda p: p.name_start), indexes


def _lock_pins(text: str) -> list[Pin]:
    pins = []
    for m in re.finditer(_LOCKED.pattern, text, re.MULTILINE):
        pins.append(Pin(_normalise(m.group(1)), "==" + m.group(2), m.start(1), m.end(1), m.start(2), m.end(2)))
    return pins


# poetry's `name = "spec"` lines are any TOML string; only these names are taken as pins from them
POETRY_PACKAGES = frozenset(
    _normalise(n)
    for n in [
        "torch",
        "torchvision",
        "torchaudio",
        "flash-attn",
        "bitsandbytes",
        "deepspeed",
        "transformers",
        "datasets",
        "accelerate",
        "peft",
        "trl",
        "llamafactory",
        "liger-kernel",
        "unsloth",
    ]
)


def requirement_pins(file_name: str, text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """Every pin of a requirement file (any package) with its span, and the package index URLs it names."""
    if file_name in ("uv.lock", "poetry.lock"):
        return _lock_pins(text), []
    if file_name in ("pyproject.toml", "setup.py"):
        return _manifest_pins(text, "python" if file_name == "setup.py" else "toml")
    return _requirement_txt_pins(text)


# --------------------------------------------------------------------------- what releases require of each other
# scripts/sync_requirement_metadata.py writes it from PyPI's metadata; read here, never fetched at lint time.
METADATA_FILE = Path(__file__).resolve().parent / "schemas" / "requirement-metadata.json"


@functools.cache
def requirement_metadata() -> tuple[str, dict[str, dict[str, dict[str, str]]]]:
    """(the platform the snapshot assumes, package -> version -> {required package: specifier})."""
    import json

    data = json.loads(METADATA_FILE.read_text(encoding="utf-8"))
    return data["assumed"], data["packages"]


def requires(package: str, version: str) -> dict[str, str] | None:
    """What a release requires of other packages (normalised names), or None where the snapshot lacks it."""
    return requirement_metadata()[1].get(_normalise(package), {}).get(version)
