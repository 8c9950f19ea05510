"""A package's name as pip compares it (`normalise`, PEP 503 with `_`), an installed `.dist-info` folder's name
and version (`installed_distribution`), and one requirement string with its spans (`parse_requirement`: PEP 508's
`name[extras] spec ; marker` or `name @ url`), the `Pin` every reader of cfgopt.text.requirements returns."""

from __future__ import annotations

from typing import NamedTuple

from cfgopt.text.patterns import lazy

# --------------------------------------------------------------------------- names
_SEPARATORS = lazy(r"[-_.]+")


def normalise(name: str) -> str:
    """A distribution or import name as pip compares them: `Liger-Kernel` == `liger_kernel` == `liger.kernel`."""
    return _SEPARATORS.sub("_", name).lower()


def installed_distribution(folder_name: str) -> tuple[str, str] | None:
    """The distribution an installed `.dist-info` / `.egg-info` folder names, as `importlib.metadata` reads it:
    (normalised name, the version in the name, "" where it has none; an egg's `-py3.11` tag cut); None for any
    other folder. `torch-2.5.1+rocm6.2.dist-info` -> ("torch", "2.5.1+rocm6.2")."""
    stem, dot, suffix = folder_name.rpartition(".")
    if not dot or suffix not in ("dist-info", "egg-info"):
        return None
    name, _, version = stem.partition("-")
    return normalise(name), version.split("-py")[0]


# --------------------------------------------------------------------------- one requirement
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
# The specifier keeps its trailing blanks, stripped by `parse_requirement`.
_REQUIREMENT = lazy(rf"^\s*({NAME})\s*(?:\[([^\]]*)\]\s*)?((?:[<>=!~^][^;#@]*)?)(?:;.*)?$")
_DIRECT = lazy(rf"^\s*({NAME})\s*(?:\[([^\]]*)\]\s*)?@\s*(\S+)")


class Pin(NamedTuple):
    """One requirement as written: the name (normalised), its specifier or `@ url` ("" for a bare name), their
    spans, and the extras it asks for (normalised)."""

    name: str
    spec: str
    name_start: int
    name_end: int
    spec_start: int
    spec_end: int
    extras: tuple[str, ...] = ()


def extras_of(text: str | None) -> tuple[str, ...]:
    return tuple(normalise(e.strip()) for e in (text or "").split(",") if e.strip())


def parse_requirement(text: str, offset: int = 0) -> Pin | None:
    """A PEP 508 requirement (`name[extra] spec ; marker` or `name @ url`) starting at `offset` in a file; None
    when the text is none (a specifier starts with an operator)."""
    direct = _DIRECT.match(text)
    if direct is not None:
        name, url = direct.group(1), direct.group(3)
        name_at, spec_at = direct.start(1) + offset, direct.start(3) + offset
        extras = extras_of(direct.group(2))
        return Pin(normalise(name), "@ " + url, name_at, name_at + len(name), spec_at, spec_at + len(url), extras)
    match = _REQUIREMENT.match(text)
    if match is None:
        return None
    name, spec = match.group(1), match.group(3).strip().rstrip(",")
    name_at = match.start(1) + offset
    spec_at = match.start(3) + offset if spec else name_at
    spec_end = spec_at + len(spec) if spec else name_at + len(name)
    return Pin(normalise(name), spec, name_at, name_at + len(name), spec_at, spec_end, extras_of(match.group(2)))
