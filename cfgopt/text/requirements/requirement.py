"""A package's name as pip compares it (`normalise`, PEP 503 with `_`), an installed `.dist-info` folder's name
and version (`installed_distribution`), and one requirement string with its spans, the `Pin` every reader of
cfgopt.text.requirements returns: read leniently (`parse_requirement`: PEP 508's `name[extras] spec ; marker` or
`name @ url`) or exactly as packaging parses it (`pep508_requirement`, with `is_specifier`: what pip, setuptools
and the build backends accept; tests/text/test_requirements_real_parsers.py and test_requirements_pip_parsers.py
compare them)."""

from __future__ import annotations

import re

from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record

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


class Pin(Record):
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


# --------------------------------------------------------------------------- as packaging parses it
_MARKER_VALUES = frozenset(
    [
        "python_version",
        "python_full_version",
        "os_name",
        "sys_platform",
        "platform_release",
        "platform_system",
        "platform_version",
        "platform_machine",
        "platform_python_implementation",
        "python_implementation",
        "implementation_name",
        "implementation_version",
        "extra",
        "extras",
        "dependency_groups",
    ]
)  # packaging's marker variables (`os.name` as `os_name`)
_MARKER_OPS = frozenset({"===", "==", "~=", "!=", "<=", ">=", "<", ">", "in", "not in"})
_MARKER_TOKEN = lazy(r"""[ \t]+|\(|\)|'[^']*'|"[^"]*"|===|==|~=|!=|<=|>=|<|>|\bnot[ \t]+in\b|[A-Za-z_][A-Za-z0-9_.]*""")


def _marker_value(token: str) -> bool:
    return token[:1] in ("'", '"') or token.replace(".", "_") in _MARKER_VALUES


def _marker_item(tokens: list[str], at: int) -> int:
    """The end of one marker item (`value op value`) or bracketed marker at `tokens[at]`; -1 where none."""
    if at < len(tokens) and tokens[at] == "(":
        end = _marker_end(tokens, at + 1)
        return end + 1 if 0 <= end < len(tokens) and tokens[end] == ")" else -1
    if at + 2 >= len(tokens):
        return -1
    op = " ".join(tokens[at + 1].split())
    if _marker_value(tokens[at]) and op in _MARKER_OPS and _marker_value(tokens[at + 2]):
        return at + 3
    return -1


def _marker_end(tokens: list[str], at: int) -> int:
    """The end of `item (and|or item)*` from `tokens[at]`; -1 where the marker is none."""
    at = _marker_item(tokens, at)
    while 0 <= at < len(tokens) and tokens[at] in ("and", "or"):
        at = _marker_item(tokens, at + 1)
    return at


def is_marker(text: str) -> bool:
    """PEP 508's environment marker as packaging parses it: quoted strings and its variables compared, joined by
    `and` / `or`, in brackets or not."""
    tokens: list[str] = []
    start = 0
    for m in _MARKER_TOKEN.finditer(text):
        if m.start() != start:
            return False
        start = m.end()
        if not m.group().isspace():
            tokens.append(m.group())
    return start == len(text) and bool(tokens) and _marker_end(tokens, 0) == len(tokens)


# One clause of a version specifier as packaging reads it (specifiers.py `Specifier._specifier_regex_str`): `===`
# anything; `==` / `!=` a version with a `.*` or a local part; `~=` two release parts at least; the orders no local.
_V_RELEASE = r"v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*"
_V_SUFFIXES = (
    r"(?:[-_.]?(?:alpha|beta|preview|pre|a|b|c|rc)[-_.]?[0-9]*)?"
    r"(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?(?:[-_.]?dev[-_.]?[0-9]*)?"
)
_SPEC_CLAUSE = lazy(
    rf"===\s*[^\s;)]+|(?:==|!=)\s*{_V_RELEASE}(?:\.\*|{_V_SUFFIXES}(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?)"
    rf"|~=\s*v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)+{_V_SUFFIXES}|(?:<=|>=|<|>)\s*{_V_RELEASE}{_V_SUFFIXES}",
    re.IGNORECASE | re.ASCII,
)
_PEP508_HEAD = lazy(rf"[ \t]*({NAME})[ \t]*(?:\[([^\]]*)\][ \t]*)?")
_IDENTIFIER = lazy(rf"{NAME}")


def _identifier(text: str) -> bool:
    """PEP 508's name: letters and digits first and last, `-_.` between."""
    return _IDENTIFIER.fullmatch(text) is not None and text[-1].isalnum()


def is_specifier(text: str) -> bool:
    """A version specifier list packaging accepts (`>= 2.4 , < 2.6`, `==2.5.*`, a trailing `,`)."""
    clauses = text.split(",")
    if len(clauses) > 1 and not clauses[-1].strip():
        clauses.pop()  # packaging takes a trailing comma
    return not text.strip() or all(_SPEC_CLAUSE.fullmatch(c.strip()) for c in clauses)


def pep508_requirement(text: str, offset: int = 0) -> Pin | None:
    """A requirement as packaging parses it (setuptools' `_reqs.parse`, pip's requirement lines, a build backend's
    PEP 621 strings), with its spans; None where packaging raises (the real tool fails on it, or it is no
    requirement: a sentence, a path). `name (>=1.0)` is read too; the marker is checked, not kept."""
    head = _PEP508_HEAD.match(text)
    extras = head.group(2) if head else None
    if head is None or not _identifier(head.group(1)):
        return None
    if extras is not None and extras.strip() and not all(_identifier(e.strip()) for e in extras.split(",")):
        return None
    rest, at = text[head.end() :], head.end()
    if rest.startswith("@"):
        url = rest[1:].lstrip(" \t").split(None, 1)
        if not url or (len(url) > 1 and not (url[1].startswith(";") and is_marker(url[1][1:].strip()))):
            return None
        found = parse_requirement(text, offset)
        return found if found is not None and found.spec == "@ " + url[0] else None
    spec, semicolon, marker = rest.partition(";")
    if semicolon and not is_marker(marker.strip()):
        return None
    if spec.lstrip().startswith("("):
        inner, close, after = spec.lstrip()[1:].partition(")")
        if not close or after.strip():
            return None
        at += len(spec) - len(spec.lstrip()) + 1
        spec = inner
    if ")" in spec or "(" in spec or not is_specifier(spec):
        return None
    written = spec.strip().rstrip(",").rstrip()
    name_at, name_end = offset + head.start(1), offset + head.end(1)
    spec_at = offset + at + len(spec) - len(spec.lstrip()) if written else name_at
    spec_end = spec_at + len(written) if written else name_end
    return Pin(normalise(head.group(1)), written, name_at, name_end, spec_at, spec_end, extras_of(extras))


# --------------------------------------------------------------------------- as pip before 24.1 parses it
# packaging 21.3, vendored by pip up to 24.0, reads a clause its PEP 440 grammar refuses as a LegacySpecifier
# (specifiers.py `LegacySpecifier._regex_str`): one of these operators, then any version without `,;)` or blanks.
_LEGACY_CLAUSE = lazy(r"\s*(==|!=|<=|>=|<|>)\s*[^,;\s)]*\s*")


def legacy_operators(text: str) -> tuple[str, ...] | None:
    """A requirement packaging 22+ refuses (`pep508_requirement` None; pip 24.1 and later stop with `Invalid
    requirement`) as packaging 21.3 reads it (pip before 24.1): the operators of the clauses it takes as legacy
    specifiers (`name==` -> `("==",)`, `name>=latest` -> `(">=",)`), or None where 21.3 refuses it too. A legacy
    `==` equals no PEP 440 release, so that pip finds none to install; another operator may match one."""
    head = _PEP508_HEAD.match(text)
    if head is None or not _identifier(head.group(1)):
        return None
    extras = head.group(2)
    if extras is not None and extras.strip() and not all(_identifier(e.strip()) for e in extras.split(",")):
        return None
    spec, semicolon, marker = text[head.end() :].partition(";")
    if spec.lstrip().startswith("@") or (semicolon and not is_marker(marker.strip())):
        return None
    spec = spec.strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    operators: list[str] = []
    for clause in spec.split(","):
        if _SPEC_CLAUSE.fullmatch(clause.strip()):
            continue
        legacy = _LEGACY_CLAUSE.fullmatch(clause)
        if legacy is None:
            return None
        operators.append(legacy.group(1))
    return tuple(operators) or None
