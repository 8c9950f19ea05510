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
from pathlib import Path

from cfgopt.knowledge.versions import VersionRange
from cfgopt.text.requirements import (
    _LF_VERSION,
    _LOCKED,
    _POETRY,
    _QUOTED,
    _REQUIREMENT,
    _blank_comments,
    _normalise,
    requirement_lines,
    requirement_of,
)
from cfgopt.text.requirements import POETRY_PACKAGES as POETRY_PACKAGES
from cfgopt.text.requirements import REQUIREMENT_FILES as REQUIREMENT_FILES
from cfgopt.text.requirements import Pin as Pin
from cfgopt.text.requirements import is_requirement_file as is_requirement_file
from cfgopt.text.requirements import logical_lines as logical_lines
from cfgopt.text.requirements import requirement_pins as requirement_pins
from cfgopt.text.user_files import read_text_bounded

# distribution names as pip normalises them (LLaMA-Factory was published as `llmtuner` before 0.6)
NAMES = {"deepspeed": ("deepspeed",), "llamafactory": ("llamafactory", "llama_factory")}
_LF_SOURCE = ("src", "llamafactory", "extras", "env.py")


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
