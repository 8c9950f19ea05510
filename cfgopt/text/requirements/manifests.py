"""pyproject.toml (PEP 621's `[project] dependencies`, poetry's tables), setup.py, uv.lock / poetry.lock and a
LLaMA-Factory source tree's `VERSION`, read as text: every quoted requirement with its span (`string_pins`),
poetry's `name = "spec"` lines (`poetry_pins`), the locked versions (`lock_pins`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import accumulate, takewhile

from cfgopt.text.patterns import lazy
from cfgopt.text.requirements.requirement import NAME, Pin, extras_of, normalise, pep508_requirement

# --------------------------------------------------------------------------- pyproject.toml, setup.py, locks
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
# the same strings, or the `]` that closes an array (read in comment-blanked text); `_array_strings` reads with
# `_TOKENS["toml"]` what it would find, and compiles this one only past a `#` there
_ARRAY_TOKENS = lazy(f"{_BASIC_STRINGS}|{_TOML_LITERAL}|\\]", re.MULTILINE)
# a key: TOML's bare key has no `.` (`torch.version = ...` is a dotted key, not read), a quoted one may
_POETRY = lazy(
    rf"""^[ \t]*(?:"({NAME})"|'({NAME})'|([A-Za-z0-9_-]+))[ \t]*=[ \t]*"""
    r"""(?:"([^"\n]*)"|'([^'\n]*)'|\{[^}\n]*?\bversion[ \t]*=[ \t]*["']([^"'\n]*)["'])""",
    re.MULTILINE,
)
_POETRY_EXTRAS = lazy(r"\bextras[ \t]*=[ \t]*\[([^\]\n]*)\]")
_QUOTED_WORDS = lazy(r"""["']([^"'\n]*)["']""")
_LOCKED = lazy(r'^name[ \t]*=[ \t]*"([^"\n]+)"[ \t]*\r?\nversion[ \t]*=[ \t]*"([^"\n]+)"', re.MULTILINE)
_SOURCE_VERSION = lazy(r"""^VERSION\s*=\s*["']([0-9][^"']*)["']""", re.MULTILINE)
INDEX_URL = lazy(r"""https?://[^\s"'\]},]+""")


_last_blanked: tuple[str, str, str] = ("", "", "")  # (syntax, text, blanked): the readers of one file ask in turn


def blank_comments(text: str, syntax: str = "toml") -> str:
    """The text with every comment blanked, offsets kept (a pin commented out, on its own line or after code,
    is not a pin); a `#` inside a string is no comment. `syntax`: "python" (setup.py) or "toml". The last answer
    is kept: a pyproject.toml's pins, poetry lines and indexes each ask it of the same text."""
    global _last_blanked
    if _last_blanked[0] == syntax and _last_blanked[1] == text:
        return _last_blanked[2]
    blanked = _TOKENS[syntax].sub(lambda m: " " * len(m.group()) if m.group().startswith("#") else m.group(), text)
    _last_blanked = (syntax, text, blanked)
    return blanked


def _string(m: re.Match[str]) -> tuple[str, int] | None:
    """A string literal's text and where it starts (None: the token is no string, a string never closed, or one
    holding a backslash, whose escapes make its value another text than the file's). A multi-line string's
    newline right after its opening quotes is no part of it (TOML trims it)."""
    token = m.group()
    if token[:1] not in ('"', "'"):
        return None
    quote = 3 if token[:3] in ('"""', "'''") else 1
    if len(token) < 2 * quote or not token.endswith(token[:quote]) or "\\" in token:
        return None
    trim = len(token) - len(token[quote:].removeprefix("\r").removeprefix("\n")) - quote if quote == 3 else 0
    return token[quote + trim : -quote], m.start() + quote + trim


def string_pins(text: str, syntax: str = "toml", naming: frozenset[str] = frozenset()) -> list[Pin]:
    """Every string of a pyproject.toml or setup.py (`syntax` "toml" / "python"; comments left out) that reads as a
    requirement, bare names included, with its spans, in order. `naming` (normalised names): only the requirements
    of these packages (the others' strings are not parsed: `_may_name`)."""
    pins: list[Pin] = []
    for m in _TOKENS[syntax].finditer(blank_comments(text, syntax)):
        found = _string(m)
        if found is None or (naming and not _may_name(found[0], naming)):
            continue
        if (pin := pep508_requirement(*found)) is not None and (not naming or pin.name in naming):
            pins.append(pin)
    return pins


def _may_name(text: str, names: frozenset[str]) -> bool:
    """Can a requirement of one of `names` (normalised) be read from `text`? Not where the normalised text holds
    none of them: a name is ASCII and starts and ends with a letter or digit, so its normalised form is part of the
    normalised text it is read from."""
    flat = normalise(text)
    return any(name in flat for name in names)


# --------------------------------------------------------------------------- TOML lines, read with str methods
# A TOML file is read line by line (`\n` ends a line, as `^` and `$` of a MULTILINE pattern; a `\r` before it is
# part of the line) where a pattern would only test a line's shape: every lint in a repository whose pyproject.toml
# names DeepSpeed or LLaMA-Factory reads it (tests/text/test_requirements_shortcuts.py holds each to the pattern).


def _lines(text: str) -> list[tuple[int, str]]:
    """Each line with the offset it starts at."""
    lines = text.split("\n")
    return list(zip(accumulate((len(line) + 1 for line in lines), initial=0), lines, strict=False))


def _tables(text: str) -> list[tuple[int, int, str]]:
    """Each table header, `^[ \\t]*\\[([^]\\n]*)\\][ \\t]*$` (MULTILINE): (where its line starts, where it ends,
    the text between its brackets). `[[package]]` and a header with a `\\r` or text after it are none."""
    found = []
    for start, line in _lines(text):
        body = line.lstrip(" \t")
        close = body.find("]")
        if body.startswith("[") and close > 0 and not body[close + 1 :].strip(" \t"):
            found.append((start, start + len(line), body[1:close]))
    return found


def _dependencies_key(text: str, start: int, end: int) -> int | None:
    """Where a `dependencies = [` line between `start` and `end` ends (after its `[`), as
    `^[ \\t]*dependencies[ \\t]*=[ \\t]*\\[` (MULTILINE) searched there finds it; None where there is none."""
    for at, line in _lines(text):
        if at < start or at >= end:
            continue  # `^` at a line's start inside the searched part
        after = line.lstrip(" \t")
        if not after.startswith("dependencies"):
            continue
        after = after[len("dependencies") :].lstrip(" \t")
        if after.startswith("="):
            after = after[1:].lstrip(" \t")
            key_end = at + len(line) - len(after) + 1
            if after.startswith("[") and key_end <= end:
                return key_end
    return None


def _array_strings(text: str, at: int) -> Iterator[re.Match[str]]:
    """The strings of an array from `at` to its closing `]`, as `_ARRAY_TOKENS.finditer` reads them in a comment-
    blanked text: the string scanner `_TOKENS["toml"]` finds the same strings (the same alternatives, in the same
    order), and a `]` before the next one closes the array. A `#` it finds (a key found inside a multi-line string)
    hands the rest to `_ARRAY_TOKENS` itself, which passes it by."""
    while True:
        m = _TOKENS["toml"].search(text, at)
        if text.find("]", at, m.start() if m else len(text)) >= 0 or m is None:
            return
        if m.group().startswith("#"):
            yield from takewhile(lambda t: t.group() != "]", _ARRAY_TOKENS.finditer(text, m.start()))
            return
        yield m
        at = m.end()


def project_dependencies(text: str) -> list[Pin] | None:
    """pyproject.toml's `[project] dependencies` (PEP 621: what `pip install .` installs), on one line or several,
    with their spans; None when the file declares none."""
    text = blank_comments(text)
    tables = _tables(text)
    project = next((i for i, table in enumerate(tables) if table[2].strip() == "project"), None)
    if project is None:
        return None
    end = tables[project + 1][0] if project + 1 < len(tables) else len(text)
    key_end = _dependencies_key(text, tables[project][1], end)
    if key_end is None:
        return None
    pins: list[Pin] = []
    for m in _array_strings(text, key_end):
        found = _string(m)
        if found is not None and (pin := pep508_requirement(*found)) is not None:
            pins.append(pin)
    return pins


def _poetry_groups(m: re.Match[str]) -> tuple[int, int]:
    """The groups of a `_POETRY` match that hold the package's name and its specifier."""
    return next(i for i in (1, 2, 3) if m.group(i) is not None), next(i for i in (4, 5, 6) if m.group(i) is not None)


def poetry_dependencies(text: str) -> list[Pin] | None:
    """pyproject.toml's `[tool.poetry.dependencies]` (what `poetry install` installs without a group; `python` is
    no package), with their spans and extras; None when the file has no such table. Poetry's `2.5.1` is `==2.5.1`
    for `exact_version`; its `^` / `~` are read by `parse_spec`."""
    text = blank_comments(text)
    tables = _tables(text)
    index = next((i for i, t in enumerate(tables) if t[2].strip() == "tool.poetry.dependencies"), None)
    if index is None:
        return None
    end = tables[index + 1][0] if index + 1 < len(tables) else len(text)
    pins: list[Pin] = []
    for m in _POETRY.finditer(text, tables[index][1], end):
        key, group = _poetry_groups(m)
        name = normalise(m.group(key))
        if name != "python":
            line_end = text.find("\n", m.start())
            listed = _POETRY_EXTRAS.search(text[m.start() : line_end if line_end >= 0 else None])
            extras = extras_of(",".join(_QUOTED_WORDS.findall(listed.group(1)))) if listed else ()
            spec = "" if m.group(group).strip() == "*" else m.group(group).strip()
            pins.append(Pin(name, spec, m.start(key), m.end(key), m.start(group), m.end(group), extras))
    return pins


def poetry_pins(text: str, names: frozenset[str], syntax: str = "toml") -> list[Pin]:
    """poetry's `name = "spec"` / `name = { version = "spec" }` lines for the packages `names` (normalised: any
    TOML string has that shape), in order; comments left out. In a TOML file only a table of dependencies is
    read (`[tool.poetry.dependencies]`, its groups', `[tool.pixi.pypi-dependencies]`): `[project.scripts]`'s
    `deepspeed = "ds.launch:main"` is no pin."""
    text = blank_comments(text, syntax)
    tables = _tables(text) if syntax == "toml" else []
    pins: list[Pin] = []
    for m in _poetry_lines(text, names):
        key, group = _poetry_groups(m)
        name = normalise(m.group(key))
        table = next((t[2].strip() for t in reversed(tables) if t[0] < m.start()), None)
        if name in names and (syntax != "toml" or (table or "").endswith("dependencies")):
            pins.append(Pin(name, m.group(group).strip(), m.start(key), m.end(key), m.start(group), m.end(group)))
    return pins


_BARE_KEY = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"  # `_POETRY`'s bare key


def _line_key(line: str) -> str:
    """The one key `_POETRY` can read at a line's start: a quoted key's text, else the run of bare-key characters."""
    body = line.lstrip(" \t")
    if body[:1] in ('"', "'"):
        return body[1:].split(body[0], 1)[0]
    return body[: len(body) - len(body.lstrip(_BARE_KEY))]


def _poetry_lines(text: str, names: frozenset[str]) -> Iterator[re.Match[str]]:
    """`_POETRY.finditer(text)`'s matches whose key is one of `names` (normalised): each match is one line's start,
    and only a line whose key is among them is asked of the pattern (compiled only for such a line)."""
    for at, line in _lines(text):
        if normalise(_line_key(line)) in names and (m := _POETRY.match(text, at)) is not None:
            yield m


def lock_pins(text: str) -> list[Pin]:
    """uv.lock / poetry.lock: `[[package]]` tables, `name` then the exact `version` that installs (`==version`)."""
    return [
        Pin(normalise(m.group(1)), "==" + m.group(2), m.start(1), m.end(1), m.start(2), m.end(2))
        for m in _LOCKED.finditer(text)
    ]


def source_version(text: str) -> str | None:
    """The release a LLaMA-Factory source tree states (`VERSION = "0.9.5"` in src/llamafactory/extras/env.py)."""
    match = _SOURCE_VERSION.search(text)
    return match.group(1) if match else None


# poetry's `name = "spec"` lines are any TOML string; only these names are taken as pins from them
POETRY_PACKAGES = frozenset(
    normalise(n)
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


def manifest_pins(text: str, syntax: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """pyproject.toml / setup.py: quoted requirements with a specifier or a URL, poetry lines; index URLs."""
    pins = [pin for pin in string_pins(text, syntax) if pin.spec]
    pins += poetry_pins(text, POETRY_PACKAGES, syntax)
    indexes = [(m.group(0), m.start(), m.end()) for m in INDEX_URL.finditer(blank_comments(text, syntax))]
    return sorted(pins, key=lambda p: p.name_start), indexes
