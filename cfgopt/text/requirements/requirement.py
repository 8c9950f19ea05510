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
from cfgopt.text.user_text import is_integer

# --------------------------------------------------------------------------- names
_SEPARATORS_AS_UNDERSCORE = str.maketrans("-.", "__")


def normalise(name: str) -> str:
    """A distribution or import name as pip compares them: `Liger-Kernel` == `liger_kernel` == `liger.kernel`
    (PEP 503's `re.sub(r"[-_.]+", "_", name)`, with `_` for its `-`: each run of `-_.` is one `_`)."""
    flat = name.translate(_SEPARATORS_AS_UNDERSCORE)
    while "__" in flat:
        flat = flat.replace("__", "_")
    return flat.lower()


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
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"  # NAME's `[A-Za-z0-9._-]`


def _blanks_from(text: str, at: int) -> int:
    """The end of the run of spaces and tabs at `at`."""
    return len(text) - len(text[at:].lstrip(" \t"))


def _pep508_head(text: str) -> tuple[int, int, str | None, int] | None:
    """A requirement's head as packaging's grammar starts it, `[ \\t]*(NAME)[ \\t]*(?:\\[([^]]*)\\][ \\t]*)?` matched at
    the text's start: (the name's start and end, the text between the extras' brackets or None, the head's end).
    str methods, no pattern: every string of a pyproject.toml passes here (tests/text/test_requirements_shortcuts.py
    holds it to the pattern)."""
    start = _blanks_from(text, 0)
    run = len(text) - start - len(text[start:].lstrip(_NAME_CHARS))
    if not run or not text[start].isalnum():
        return None
    name_end = start + run
    at = _blanks_from(text, name_end)
    close = text.find("]", at + 1) if text.startswith("[", at) else -1
    if close < 0:
        return start, name_end, None, at
    return start, name_end, text[at + 1 : close], _blanks_from(text, close + 1)


def _identifier(text: str) -> bool:
    """PEP 508's name: letters and digits first and last, `-_.` between (`NAME` in full, its last character
    alphanumeric)."""
    return text[:1].isalnum() and text[-1:].isalnum() and not text.strip(_NAME_CHARS)


_OPERATORS = ("==", "!=", "<=", ">=", "~=", "<", ">")
_ASCII_BLANKS = " \t\n\r\f\v"  # `\s` under re.ASCII


def _plain_clause(clause: str) -> bool:
    """Is a clause an operator and a plain release (`>=2.4`, `< 3`, `~=0.9.5`)? Each such clause is one that
    `_SPEC_CLAUSE` takes (its release part without epoch, `v`, suffixes or local part), so the pattern is compiled
    only for the others: a pre-release, a `.*`, a sentence that is no specifier."""
    op = next(o for o in (*_OPERATORS, "") if clause.startswith(o))
    parts = clause[len(op) :].lstrip(_ASCII_BLANKS).split(".")
    released = all(is_integer(part) for part in parts)  # ASCII digits (a longer part: asked of the pattern)
    return bool(op) and released and (op != "~=" or len(parts) > 1)


def _clause(clause: str) -> bool:
    """`_SPEC_CLAUSE.fullmatch(clause)`, without the pattern where the answer shows: every clause it takes starts
    with an operator's `<>=!~`, and a plain release is one it takes."""
    if not clause or clause[0] not in "<>=!~":
        return False
    return _plain_clause(clause) or _SPEC_CLAUSE.fullmatch(clause) is not None


def is_specifier(text: str) -> bool:
    """A version specifier list packaging accepts (`>= 2.4 , < 2.6`, `==2.5.*`, a trailing `,`)."""
    clauses = text.split(",")
    if len(clauses) > 1 and not clauses[-1].strip():
        clauses.pop()  # packaging takes a trailing comma
    return not text.strip() or all(_clause(c.strip()) for c in clauses)


def pep508_requirement(text: str, offset: int = 0) -> Pin | None:
    """A requirement as packaging parses it (setuptools' `_reqs.parse`, pip's requirement lines, a build backend's
    PEP 621 strings), with its spans; None where packaging raises (the real tool fails on it, or it is no
    requirement: a sentence, a path). `name (>=1.0)` is read too; the marker is checked, not kept."""
    head = _pep508_head(text)
    if head is None or not _identifier(text[head[0] : head[1]]):
        return None
    name_start, name_end, extras, head_end = head
    if extras is not None and extras.strip() and not all(_identifier(e.strip()) for e in extras.split(",")):
        return None
    rest, at = text[head_end:], head_end
    if rest.startswith("@"):
        url = rest[1:].lstrip(" \t").split(None, 1)
        if not url or (len(url) > 1 and not (url[1].startswith(";") and is_marker(url[1][1:].strip()))):
            return None
        found = parse_requirement(text, offset)
        return found if found is not None and found.spec == "@ " + url[0] else None
    spec, semicolon, marker = rest.partition(";")
    if spec.lstrip().startswith("("):
        inner, close, after = spec.lstrip()[1:].partition(")")
        if not close or after.strip():
            return None
        at += len(spec) - len(spec.lstrip()) + 1
        spec = inner
    if ")" in spec or "(" in spec or not is_specifier(spec):
        return None
    # the marker after the specifier: a sentence with a `;` (a description) is no specifier, and its marker is
    # never tokenised
    if semicolon and not is_marker(marker.strip()):
        return None
    written = spec.strip().rstrip(",").rstrip()
    name = text[name_start:name_end]
    name_at, name_end = offset + name_start, offset + name_end
    spec_at = offset + at + len(spec) - len(spec.lstrip()) if written else name_at
    spec_end = spec_at + len(written) if written else name_end
    return Pin(normalise(name), written, name_at, name_end, spec_at, spec_end, extras_of(extras))


# --------------------------------------------------------------------------- as pip before 24.1 parses it
# packaging 21.3, vendored by pip up to 24.0, reads a clause its PEP 440 grammar refuses as a LegacySpecifier
# (specifiers.py `LegacySpecifier._regex_str`): one of these operators, then any version without `,;)` or blanks.
_LEGACY_CLAUSE = lazy(r"\s*(==|!=|<=|>=|<|>)\s*[^,;\s)]*\s*")


def legacy_operators(text: str) -> tuple[str, ...] | None:
    """A requirement packaging 22+ refuses (`pep508_requirement` None; pip 24.1 and later stop with `Invalid
    requirement`) as packaging 21.3 reads it (pip before 24.1): the operators of the clauses it takes as legacy
    specifiers (`name==` -> `("==",)`, `name>=latest` -> `(">=",)`), or None where 21.3 refuses it too. A legacy
    `==` equals no PEP 440 release, so that pip finds none to install; another operator may match one."""
    head = _pep508_head(text)
    if head is None or not _identifier(text[head[0] : head[1]]):
        return None
    extras = head[2]
    if extras is not None and extras.strip() and not all(_identifier(e.strip()) for e in extras.split(",")):
        return None
    spec, semicolon, marker = text[head[3] :].partition(";")
    if spec.lstrip().startswith("@") or (semicolon and not is_marker(marker.strip())):
        return None
    spec = spec.strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    operators: list[str] = []
    for clause in spec.split(","):
        if _clause(clause.strip()):
            continue
        legacy = _LEGACY_CLAUSE.fullmatch(clause)
        if legacy is None:
            return None
        operators.append(legacy.group(1))
    return tuple(operators) or None
