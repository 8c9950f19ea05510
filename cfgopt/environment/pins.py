"""The LLaMA-Factory / DeepSpeed releases a repository states for itself: its dependency pins.

A config lives in a repository that says which releases it runs with: `requirements*.txt`, `pyproject.toml`
(PEP 621 dependencies and optional dependencies, dependency groups, poetry), `uv.lock` / `poetry.lock`
(exact), `setup.py` (quoted requirement strings), `setup.cfg` (`install_requires`, `extras_require`), a conda
`environment.yml` (conda specs and its `- pip:` list), or, in a LLaMA-Factory fork, the fork's own source tree
(`src/llamafactory/extras/env.py` `VERSION`). `find_pins` walks up from the config's folder to the
repository root (the folder holding `.git`, else the filesystem root); per package the closest folder that
states it wins, and inside one folder a lock file (what really installs) beats a manifest. Every file is
read as text, TOML included, by `cfgopt.text.requirements` (no parser is loaded on the lint path); a file pip reads
(requirements*.txt, the `-r` includes, a conda `- pip:` list's includes) is decoded as pip decodes it, and one pip
cannot decode states no pins.
"""

from __future__ import annotations

import os
from pathlib import Path

from cfgopt.knowledge.versions import VersionRange
from cfgopt.text.real_paths import realpath
from cfgopt.text.requirements.files import is_requirements_txt
from cfgopt.text.requirements.manifests import lock_pins, poetry_pins, source_version, string_pins
from cfgopt.text.requirements.requirement import Pin, normalise
from cfgopt.text.user_files import read_text_bounded

# distribution names as pip normalises them (LLaMA-Factory was published as `llmtuner` before 0.6)
NAMES = {"deepspeed": ("deepspeed",), "llamafactory": ("llamafactory", "llama_factory")}
_NAMED = frozenset(name for names in NAMES.values() for name in names)
_LF_SOURCE = ("src", "llamafactory", "extras", "env.py")


def _package_of(name: str) -> str | None:
    norm = normalise(name)
    return next((pkg for pkg, names in NAMES.items() if norm in names), None)


def _read(path: Path) -> str:
    """The file's text, or "" when it is missing, unreadable, not a regular file (a FIFO would block, a link
    to /dev/zero read forever) or larger than a dependency manifest can be."""
    try:
        return read_text_bounded(path)
    except OSError:
        return ""


def _read_requirements(path: Path) -> str:
    """A file pip reads as a requirements file, as pip decodes it (a byte order mark, a coding comment, else
    UTF-8), or "" when it cannot be read or decoded (pip fails on it: it states no pins)."""
    from cfgopt.text.requirements.pip_encoding import read_requirements  # each format's reader loads with its file

    try:
        return read_requirements(path)
    except (OSError, ValueError):
        return ""


def _first_specs(pins: list[Pin]) -> dict[str, str]:
    """Per package of NAMES, the specifier of its first pin (a bare name: "", any release)."""
    out: dict[str, str] = {}
    for pin in pins:
        package = _package_of(pin.name)
        if package is not None and package not in out:
            out[package] = pin.spec
    return out


def _requirements(path: Path) -> dict[str, str]:
    from cfgopt.text.requirements.pip_files import line_pins, requirement_lines  # loaded with a requirements file

    found = line_pins(requirement_lines(path, _read_requirements(path), _read_requirements))
    return _first_specs([pin for pin in found if not pin.spec.startswith("@")])  # `name @ url`: no release


def _stated(pins: list[Pin]) -> list[Pin]:
    """A manifest's quoted strings that pin a release (an operator; a bare name or a URL there pins none)."""
    return [pin for pin in pins if pin.spec and not pin.spec.startswith("@")]


def _names_a_package(text: str) -> bool:
    return any(n in normalise(text) for n in _NAMED)


def _pyproject(path: Path) -> dict[str, str]:
    text = _read(path)
    if not _names_a_package(text):
        return {}
    out = _first_specs(_stated(string_pins(text, naming=_NAMED)))
    for package, spec in _first_specs(poetry_pins(text, _NAMED)).items():
        out.setdefault(package, "" if spec == "*" else spec)
    return out


def _lock(path: Path) -> dict[str, str]:
    """uv.lock / poetry.lock: the exact version that installs."""
    text = _read(path)
    return _first_specs(lock_pins(text)) if _names_a_package(text) else {}


def _setup_py(path: Path) -> dict[str, str]:
    return _first_specs(_stated(string_pins(_read(path), "python", _NAMED)))


def _setup_cfg(path: Path) -> dict[str, str]:
    """`install_requires` and `extras_require`: requirement lists, so a bare name states a package (any release)."""
    from cfgopt.text.requirements.setup_cfg import setup_cfg_pins  # each format's reader loads with its file

    found = setup_cfg_pins(_read(path))
    return _first_specs([pin for pin in found if not pin.spec.startswith("@")])


def _conda_environment(path: Path) -> dict[str, str]:
    """environment.yml: its `- pip:` lines (with their `-r` includes) before its conda specs, as pip installs last."""
    from cfgopt.text.requirements.conda import conda_environment_requirements

    found = conda_environment_requirements(path, _read(path), _read_requirements)
    return _first_specs([pin for pin in found if not pin.spec.startswith("@")])


def _llamafactory_source(folder: Path) -> dict[str, str]:
    """A LLaMA-Factory checkout or fork: its configs run with the LLaMA-Factory in the same tree."""
    version = source_version(_read(folder.joinpath(*_LF_SOURCE)))
    return {"llamafactory": "==" + version} if version else {}


# closest first inside one folder: what installs (locks), then what is declared
_READERS = (
    ("uv.lock", _lock),
    ("poetry.lock", _lock),
    ("pyproject.toml", _pyproject),
    ("setup.py", _setup_py),
    ("setup.cfg", _setup_cfg),
    ("environment.yml", _conda_environment),
    ("environment.yaml", _conda_environment),
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
    found += [(n, _requirements(folder / n)) for n in names if is_requirements_txt(n)]
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
    current = realpath(folder)
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
