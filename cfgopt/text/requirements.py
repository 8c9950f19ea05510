"""Requirements and versions as pip reads them: the one reader of every file and string that states a package.

Moved here from `cfgopt.knowledge.pins`, `cfgopt.knowledge.versions`, `cfgopt.knowledge.schema` and
`cfgopt.knowledge.requirement_pins`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from cfgopt.text.patterns import lazy
from cfgopt.text.user_text import integer


# --------------------------------------------------------------------------- names
def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


# --------------------------------------------------------------------------- requirements
# No two quantifiers in these patterns can match the same characters one after the other (`\s*(...)?\s*`
# would): a 3 KB line then takes milliseconds, not minutes (the old requirement pattern backtracked cubically).
# The specifier keeps its trailing blanks, stripped by the readers.
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\]\s*)?((?:[<>=!~^][^;#@]*)?)(?:;.*)?$")
_QUOTED = re.compile(r"""["']([A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\]\s*)?[<>=!~][^"']*)["']""")
_LF_VERSION = re.compile(r"""^VERSION\s*=\s*["']([0-9][^"']*)["']""", re.MULTILINE)


_LINE_OPTIONS = re.compile(r"\s-")  # a requirement's own options (`--hash=...`, `--config-settings`) follow it


def requirement_of(line: str) -> str:
    """A requirements file's logical line without its comment and its per-requirement options (pip's
    `break_args_options`: the options start at the first word that starts with `-`)."""
    line = line.split(" #", 1)[0]
    option = _LINE_OPTIONS.search(line)
    return (line[: option.start()] if option else line).strip()


# pip's `-r FILE` / `--requirement FILE` (src/pip/_internal/req/req_file.py): the included file's requirements
# are the including file's, its path relative to the including file's folder; nesting is bounded here.
_INCLUDE = re.compile(r"^\s*(?:-r|--requirement)(?:\s*=\s*|\s+)(\S+)")
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
# repository that pins DeepSpeed (tests/test_signal.py compares the two readings).
_POETRY = re.compile(
    r"""^[ \t]*["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?[ \t]*=[ \t]*"""
    r"""(?:"([^"\n]*)"|'([^'\n]*)'|\{[^}\n]*?\bversion[ \t]*=[ \t]*["']([^"'\n]*)["'])""",
    re.MULTILINE,
)
_LOCKED = re.compile(r'^name[ \t]*=[ \t]*"([^"\n]+)"[ \t]*\r?\nversion[ \t]*=[ \t]*"([^"\n]+)"', re.MULTILINE)


# A string or a comment of setup.py (Python) or a TOML file, in one linear pass: each alternative consumes what
# it matches without overlap, and none can fail (a string runs to its line's or the text's end, a lone backslash
# included), so no start is scanned twice. Basic strings take backslash escapes; TOML's '...' literal strings do not.
_BASIC_STRINGS = r'"""(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:"""|\Z)|"(?:[^"\\\n]|\\[\s\S]?)*(?:"|$)'
_PYTHON_SINGLE = r"'''(?:[^'\\]|\\[\s\S]?|'(?!''))*(?:'''|\Z)|'(?:[^'\\\n]|\\[\s\S]?)*(?:'|$)"
_TOML_LITERAL = r"'''[\s\S]*?(?:'''|\Z)|'[^'\n]*(?:'|$)"
_TOKENS = {
    "python": re.compile(f"{_BASIC_STRINGS}|{_PYTHON_SINGLE}|#[^\\n]*", re.MULTILINE),
    "toml": re.compile(f"{_BASIC_STRINGS}|{_TOML_LITERAL}|#[^\\n]*", re.MULTILINE),
}


def _blank_comments(text: str, syntax: str = "toml") -> str:
    """The text with every comment blanked, offsets kept (a pin commented out, on its own line or after code,
    is not a pin); a `#` inside a string is no comment. `syntax`: "python" (setup.py) or "toml"."""
    return _TOKENS[syntax].sub(lambda m: " " * len(m.group()) if m.group().startswith("#") else m.group(), text)


# --------------------------------------------------------------------------- requirement files as linted files
# The requirement rules (cfgopt/rules/env*) lint the same files `pins_in` reads, for every package they name and
# with the position of each pin; `cfgopt.loaders.requirement_files` builds a Source from these.
REQUIREMENT_FILES = ("uv.lock", "poetry.lock", "pyproject.toml", "setup.py")
_DIRECT = re.compile(r"""^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\]\s*)?@\s*(\S+)""")
_QUOTED_DIRECT = re.compile(r"""["']([A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\]\s*)?@\s*[^"'\s]+)["']""")
_INDEX_OPTION = re.compile(r"^\s*(?:-i|--index-url|--extra-index-url|-f|--find-links)(?:\s+|=)(\S+)")
_URL = re.compile(r"""https?://[^\s"'\]},]+""")


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


# --------------------------------------------------------------------------- versions
def version_key(version: str) -> tuple[int, ...]:
    """`"0.16.4"` -> `(0, 16, 4)`: numeric order, so 0.9.10 sorts after 0.9.5 (non-digits end a part)."""
    out: list[int] = []
    for part in version.split("."):
        digits = re.match(r"[0-9]*", part, re.ASCII).group()  # type: ignore[union-attr]
        out.append(integer(digits) or 0)
    return tuple(out)


# A version as pip reports it (PEP 440): the release, then pre-release, post-release, development and local parts.
_PEP440 = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(?:[-_.]?(?P<post>post|rev|r)[-_.]?\d*|-\d+)?"
    r"(?:[-_.]?(?P<dev>dev)[-_.]?\d*)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$",
    re.IGNORECASE,
)


_CLAUSE = re.compile(r"^(===|==|!=|~=|>=|<=|>|<|\^|~)?\s*v?([0-9][0-9A-Za-z.*+!-]*)$")
_PAD = 4


def _padded(version: str) -> tuple[int, ...]:
    key = tuple(version_key(version.rstrip(".*")))
    return (key + (0,) * _PAD)[:_PAD]


def _clause_admits(op: str, bound: str, version: str) -> bool:
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
        match = _CLAUSE.match(raw)
        if match is None:
            raise ValueError(f"not a version specifier: {raw!r}")
        clauses.append((match.group(1) or "==", match.group(2)))
    return clauses


_LOCAL = lazy(r"\+(cu\d+|rocm[\d.]+)", re.IGNORECASE)
_EXACT = lazy(r"^(?:===?)?\s*v?(\d+(?:\.\d+)*)(?:\.post\d+)?(?:\+[\w.]+)?$")
# PyTorch's wheel indexes (https://pytorch.org/get-started/locally/): /whl/cu121, /whl/rocm6.2, /whl/nightly/...
_INDEX = lazy(r"download\.pytorch\.org/whl/(?:nightly/|test/)?(cu\d+|rocm[\d.]+)", re.IGNORECASE)


def platform_of_build(text: str) -> str:
    """ "cuda" / "rocm" for a local version (`+cu121`, `+rocm6.2`) or a PyTorch index URL, else ""."""
    found = _LOCAL.search(text) or _INDEX.search(text)
    if found is None:
        return ""
    return "rocm" if found.group(1).lower().startswith("rocm") else "cuda"


def exact_version(spec: str) -> str | None:
    """`==2.5.1+cu121` / `2.5.1` (poetry) / a lock's `==4.46.0` -> the public version; None for a range."""
    match = _EXACT.match(spec.strip())
    return match.group(1) if match else None
