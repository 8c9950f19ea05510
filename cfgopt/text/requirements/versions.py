"""Versions and specifiers as pip compares them: `version_key` (numeric order), `pip_version` (PEP 440's parts),
`parse_spec` / `clause_admits` / `spec_admits` (PEP 440, and poetry's `^` / `~`), `reaches` / `stays_below`,
`exact_version`, `final_release` / `numeric_spec` (what ENV005 compares exactly), `platform_of_build` (`+cu121`,
`+rocm6.2`)."""

from __future__ import annotations

import re

from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record
from cfgopt.text.user_text import integer, is_integer

# --------------------------------------------------------------------------- versions
_DIGITS = "0123456789"


def _leading_digits(part: str) -> str:
    """The ASCII digits a text starts with ("" for none)."""
    return part[: len(part) - len(part.lstrip(_DIGITS))]


def _plain_release(text: str) -> bool:
    """ASCII digits in dot-separated parts (`2.5.1`), nothing else: the release every pattern here reads as one."""
    return all(is_integer(part) for part in text.split("."))  # ASCII digits (a longer part: asked of the pattern)


def version_key(version: str) -> tuple[int, ...]:
    """`"0.16.4"` -> `(0, 16, 4)`: numeric order, so 0.9.10 sorts after 0.9.5 (non-digits end a part)."""
    return tuple(integer(_leading_digits(part)) or 0 for part in version.split("."))


# A version as pip reports it (PEP 440): the release, then pre-release, post-release, development and local parts.
_PEP440 = lazy(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(?:[-_.]?(?P<post>post|rev|r)[-_.]?\d*|-\d+)?"
    r"(?:[-_.]?(?P<dev>dev)[-_.]?\d*)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$",
    re.IGNORECASE,
)


class PipVersion(Record):
    """A version as pip reports it, in parts: the release (`0.9.6`) and which of the other parts it has."""

    release: str
    pre: bool  # `rc1`, `a0`, `beta`
    post: bool  # `.post1`, `-1`
    dev: bool  # `.dev0`
    local: bool  # `+cu121`

    @property
    def is_release(self) -> bool:
        return not (self.pre or self.post or self.dev or self.local)


def pip_version(value: str) -> PipVersion | None:
    """`0.9.6.dev0` -> PipVersion("0.9.6", dev=True, ...); None when the value is no PEP 440 version."""
    match = _PEP440.match(value)
    if match is None:
        return None
    pre, post, dev, local = (match.group(part) is not None for part in ("pre", "post", "dev", "local"))
    return PipVersion(match.group("release"), pre, post, dev, local)


_CLAUSE = lazy(r"^(===|==|!=|~=|>=|<=|>|<|\^|~)?\s*v?([0-9][0-9A-Za-z.*+!-]*)$")
_CLAUSE_OPERATORS = ("===", "==", "!=", "~=", ">=", "<=", ">", "<", "^", "~")  # `_CLAUSE`'s, in its order
_PAD = 4


def _padded(version: str) -> tuple[int, ...]:
    key = tuple(version_key(version.rstrip(".*")))
    return (key + (0,) * _PAD)[:_PAD]


def clause_admits(op: str, bound: str, version: str) -> bool:
    """Does one clause of a specifier (`parse_spec`) admit `version`? Releases compared as numbers, 4 parts."""
    v, w = _padded(version), _padded(bound)
    wild = bound.endswith(".*")
    width = len(version_key(bound.rstrip(".*")))
    if op in ("==", "===", ""):
        return v[:width] == w[:width] if wild else v == w
    if op == "!=":
        return v[:width] != w[:width] if wild else v != w
    if op == ">=":
        return v >= w
    if op == "<=":
        return v <= w
    if op == ">":
        return v > w
    if op == "<":
        return v < w
    if op == "~=":  # PEP 440: >= bound, same release up to the last part but one
        return v >= w and v[: max(width - 1, 1)] == w[: max(width - 1, 1)]
    if op == "~":  # poetry: ~0.16.4 = >=0.16.4,<0.17
        return v >= w and v[: min(width, 2)] == w[: min(width, 2)]
    if op == "^":  # poetry: first non-zero part fixed (^0.16.4 = >=0.16.4,<0.17)
        lead = next((i for i, part in enumerate(w[:width]) if part), width - 1)
        return v >= w and v[: lead + 1] == w[: lead + 1]
    return False


def parse_spec(spec: str) -> list[tuple[str, str]]:
    """`">=0.16,<0.20"` -> [(">=", "0.16"), ("<", "0.20")]; `"*"` / `""` -> [] (any); ValueError if unreadable."""
    clauses: list[tuple[str, str]] = []
    for raw in spec.replace(" ", "").split(","):
        if raw in ("", "*"):
            continue
        op = next((o for o in _CLAUSE_OPERATORS if raw.startswith(o)), "")
        if _plain_release(raw[len(op) :]):  # `==0.9.5`: as `_CLAUSE` reads it, without compiling it
            clauses.append((op or "==", raw[len(op) :]))
            continue
        match = _CLAUSE.match(raw)
        if match is None:
            raise ValueError(f"not a version specifier: {raw!r}")
        clauses.append((match.group(1) or "==", match.group(2)))
    return clauses


def spec_admits(spec: str, version: str) -> bool:
    """Does a specifier (`>=0.16,<0.20`, poetry's `^0.16`) admit `version`? ValueError if it cannot be read."""
    return all(clause_admits(op, bound, version) for op, bound in parse_spec(spec))


def reaches(spec: str, floor: tuple[int, ...]) -> bool:
    """Does every version a specifier admits reach `floor`, as far as its clauses say: an exact pin or a lower
    bound (`==`, `>=`, `~=`, `>`) at or above it; False where unknown or unreadable."""
    try:
        clauses = parse_spec(spec)
    except ValueError:
        return False
    lower = (bound for op, bound in clauses if op in ("==", "===", ">=", "~=", ">"))
    return any(version_key(bound.rstrip(".*"))[: len(floor)] >= floor for bound in lower)


def stays_below(spec: str, ceiling: tuple[int, ...]) -> bool:
    """Does every version a specifier admits stay below `ceiling`, as far as its clauses say: an exact pin below it
    or an upper bound at or under it (`<4.53`, `<=4.52.4`, `~=4.52.0`, `==4.52.*`); False where unknown or
    unreadable (`reaches`' counterpart)."""
    try:
        clauses = parse_spec(spec)
    except ValueError:
        return False
    return any(_clause_below(op, bound, ceiling) for op, bound in clauses)


def _clause_below(op: str, bound: str, ceiling: tuple[int, ...]) -> bool:
    top = (ceiling + (0,) * _PAD)[:_PAD]
    wild = bound.endswith(".*")
    parts = version_key(bound.rstrip(".*"))
    if op in ("<", "<=", "==", "===") and not wild:
        return _padded(bound) <= top if op == "<" else _padded(bound) < top
    if (op in ("==", "===") and wild) or (op == "~=" and len(parts) > 1):
        cut = parts if wild else parts[:-1]  # 4.52.* and ~=4.52.0: below 4.53; ~=4.52: below 5
        return _padded(".".join(map(str, (*cut[:-1], cut[-1] + 1)))) <= top
    return False


# an exact pin of a final release, and a clause on plain release numbers: what is compared exactly (ENV005)
_FINAL_PIN = lazy(r"==\s*(\d+(?:\.\d+)*)")
_NUMERIC_CLAUSE = lazy(r"(?:===?|!=|<=|>=|<|>|~=)\s*\d+(?:\.\d+)*(?:\.\*)?")


def final_release(spec: str) -> str | None:
    """`==2.5.1` -> "2.5.1": an exact pin of a final release (no local, post, pre or dev part); None otherwise."""
    match = _FINAL_PIN.fullmatch(spec)
    return match.group(1) if match else None


def numeric_spec(spec: str) -> bool:
    """Is every clause of a specifier an operator on plain release numbers (`>=2.4,<2.6`, `==2.5.*`)?"""
    return all(_NUMERIC_CLAUSE.fullmatch(clause.strip()) for clause in spec.split(","))


_LOCAL = lazy(r"\+(cu\d+|rocm[\d.]+)", re.IGNORECASE, needs=("+",))
_EXACT = lazy(r"^(?:===?)?\s*v?(\d+(?:\.\d+)*)(?:\.post\d+)?(?:\+[\w.]+)?$")
# PyTorch's wheel indexes (https://pytorch.org/get-started/locally/): /whl/cu121, /whl/rocm6.2, /whl/nightly/...
_INDEX = lazy(r"download\.pytorch\.org/whl/(?:nightly/|test/)?(cu\d+|rocm[\d.]+)", re.IGNORECASE, needs=("/",))


def platform_of_build(text: str) -> str:
    """ "cuda" / "rocm" for a local version (`+cu121`, `+rocm6.2`) or a PyTorch index URL, else ""."""
    found = _LOCAL.search(text) or _INDEX.search(text)
    if found is None:
        return ""
    return "rocm" if found.group(1).lower().startswith("rocm") else "cuda"


def exact_version(spec: str) -> str | None:
    """`==2.5.1+cu121` / `2.5.1` (poetry) / a lock's `==4.46.0` -> the public version; None for a range."""
    spec = spec.strip()
    unpinned = spec[3:] if spec.startswith("===") else spec[2:] if spec.startswith("==") else spec
    if not spec or _plain_release(unpinned):  # nothing stated, or `==2.5.1`: as `_EXACT` reads them
        return unpinned or None
    match = _EXACT.match(spec)
    return match.group(1) if match else None
