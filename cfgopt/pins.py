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

import os
import re
from pathlib import Path

from cfgopt.user_files import read_text_bounded
from cfgopt.versions import VersionRange

# distribution names as pip normalises them (LLaMA-Factory was published as `llmtuner` before 0.6)
NAMES = {"deepspeed": ("deepspeed",), "llamafactory": ("llamafactory", "llama_factory")}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*((?:[<>=!~^][^;#@]*)?)\s*(?:;.*)?$")
_QUOTED = re.compile(r"""["']([A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*[<>=!~][^"']*)["']""")
_LF_VERSION = re.compile(r"""^VERSION\s*=\s*["']([0-9][^"']*)["']""", re.MULTILINE)
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


def _from_requirement_lines(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        line = line.split(" #", 1)[0].strip()
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
    return _from_requirement_lines(_read(path).splitlines())


# TOML files are read as text, not parsed: every pin in them is a quoted PEP 508 string (PEP 621 and optional
# dependencies, dependency groups), a poetry `name = "spec"` / `name = { version = "spec" }` line, or a lock
# file's `name` line followed by its `version`; parsing TOML would load tomllib on every lint run in a
# repository that pins DeepSpeed (tests/test_signal.py compares the two readings).
_POETRY = re.compile(
    r"""^[ \t]*["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?[ \t]*=[ \t]*"""
    r"""(?:"([^"\n]*)"|'([^'\n]*)'|\{[^}\n]*?\bversion[ \t]*=[ \t]*["']([^"'\n]*)["'])""",
    re.MULTILINE,
)
_LOCKED = re.compile(r'^name[ \t]*=[ \t]*"([^"\n]+)"[ \t]*\r?\nversion[ \t]*=[ \t]*"([^"\n]+)"', re.MULTILINE)


def _uncommented(text: str) -> str:
    """TOML text without its comment lines (a pin commented out is not a pin)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _names_a_package(text: str) -> bool:
    return any(n in _normalise(text) for names in NAMES.values() for n in names)


def _pyproject(path: Path) -> dict[str, str]:
    text = _read(path)
    if not _names_a_package(text):
        return {}
    text = _uncommented(text)
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
    return _from_requirement_lines(_QUOTED.findall(_read(path)))


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
