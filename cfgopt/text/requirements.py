r"""Requirements and versions as pip reads them: the one reader of every file and string that states a package.

Every consumer reads through here, so they agree on what a file states: the repository's pins
(`cfgopt.environment.pins`), the job's environment (`cfgopt.environment.stated`), the linted requirement files
(`cfgopt.loaders.requirement_files`), the version ranges (`cfgopt.knowledge.versions`) and `cfgopt doctor`.

- names: `normalise` (PEP 503, with `_`: `Liger-Kernel` == `liger_kernel`), `installed_distribution` (a
  `.dist-info` folder's name and version);
- requirements: one PEP 508 string (`parse_requirement`: `name[extras] spec ; marker` or `name @ url`, with its
  spans); requirements files as pip reads them (`logical_lines`: `\` continuations; `requirement_lines`: `-r`
  includes; `requirement_of`: comments and per-requirement options such as `--hash` cut; `line_pins`);
  pyproject.toml (the `[project] dependencies` array on one line or several, `project_dependencies`; poetry's
  `[tool.poetry.dependencies]`, `poetry_dependencies`; every quoted requirement, `string_pins`; poetry's
  `name = "spec"` lines anywhere, `poetry_pins`); setup.py (`string_pins`); setup.cfg (`install_requires` and
  `extras_require`, `setup_cfg_pins`); a conda environment.yml (conda match specs read as PEP 440, `conda_pin`,
  and the `- pip:` list: `conda_environment_pins`, `conda_environment_requirements`); uv.lock / poetry.lock
  (`lock_pins`); a LLaMA-Factory source tree's `VERSION` (`source_version`); every pin of a file as the
  requirement rules lint it (`requirement_pins`);
- versions: `version_key` (numeric order), `pip_version` (PEP 440's parts), `parse_spec` / `clause_admits` /
  `spec_admits` (PEP 440, and poetry's `^` / `~`), `reaches` (a lower bound at or above a release),
  `exact_version`, `final_release` / `numeric_spec` (what ENV005 compares exactly), `platform_of_build`
  (`+cu121`, `+rocm6.2`).

tests/repository/test_closed_classes.py fails on a pattern elsewhere in cfgopt/ that reads a requirement or a version.

A small parser of its own, not `packaging`: importing `packaging.requirements` made `cfgopt lint` of one config
about 10% slower, `packaging.version` with `packaging.specifiers` about 3% (paired runs, bench/results.md), and
poetry's `^` / `~` are no PEP 440. TOML is read as text, not parsed: parsing would load tomllib on every lint run
in a repository that pins DeepSpeed (tests/rules/test_signal_over_noise.py compares the two readings); setup.cfg
and environment.yml are read as text too, as configparser and conda read their lists (no YAML parse of them).
Nothing here reads a file (`-r` includes go through the caller's `read`). Every pattern is compiled at first use
(`lazy`), and no two quantifiers in one can match the same characters one after the other (`\s*(...)?\s*`
would): a 3 KB line takes milliseconds, not minutes.
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
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
# The specifier keeps its trailing blanks, stripped by `parse_requirement`.
_REQUIREMENT = lazy(rf"^\s*({_NAME})\s*(?:\[([^\]]*)\]\s*)?((?:[<>=!~^][^;#@]*)?)(?:;.*)?$")
_DIRECT = lazy(rf"^\s*({_NAME})\s*(?:\[([^\]]*)\]\s*)?@\s*(\S+)")


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


def _extras(text: str | None) -> tuple[str, ...]:
    return tuple(normalise(e.strip()) for e in (text or "").split(",") if e.strip())


def parse_requirement(text: str, offset: int = 0) -> Pin | None:
    """A PEP 508 requirement (`name[extra] spec ; marker` or `name @ url`) starting at `offset` in a file; None
    when the text is none (a specifier starts with an operator)."""
    direct = _DIRECT.match(text)
    if direct is not None:
        name, url = direct.group(1), direct.group(3)
        name_at, spec_at = direct.start(1) + offset, direct.start(3) + offset
        extras = _extras(direct.group(2))
        return Pin(normalise(name), "@ " + url, name_at, name_at + len(name), spec_at, spec_at + len(url), extras)
    match = _REQUIREMENT.match(text)
    if match is None:
        return None
    name, spec = match.group(1), match.group(3).strip().rstrip(",")
    name_at = match.start(1) + offset
    spec_at = match.start(3) + offset if spec else name_at
    spec_end = spec_at + len(spec) if spec else name_at + len(name)
    return Pin(normalise(name), spec, name_at, name_at + len(name), spec_at, spec_end, _extras(match.group(2)))


# --------------------------------------------------------------------------- requirements files (pip)
_LINE_OPTIONS = lazy(r"\s-")  # a requirement's own options (`--hash=...`, `--config-settings`) follow it
# pip's `-r FILE` / `--requirement FILE` (src/pip/_internal/req/req_file.py): the included file's requirements
# are the including file's, its path relative to the including file's folder; nesting is bounded here.
_INCLUDE = lazy(r"^\s*(?:-r|--requirement)(?:\s*=\s*|\s+)(\S+)")
_COMMENT_LINE = lazy(r"(^|\s+)#")
_INDEX_OPTION = lazy(r"^\s*(?:-i|--index-url|--extra-index-url|-f|--find-links)(?:\s+|=)(\S+)")
MAX_INCLUDES = 16
NOT_REQUIREMENTS = ("#", "-", "git+", "http")  # how a requirements file's lines that name no package start


def requirement_of(line: str) -> str:
    """A requirements file's logical line without its comment and its per-requirement options (pip's
    `break_args_options`: the options start at the first word that starts with `-`)."""
    line = line.split(" #", 1)[0]
    option = _LINE_OPTIONS.search(line)
    return (line[: option.start()] if option else line).strip()


def logical_lines(text: str) -> list[str]:
    """The lines pip reads (`join_lines`): a line ending in `\\` is joined with the next, except a comment."""
    out: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if line.endswith("\\") and not _COMMENT_LINE.match(line):
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


def line_pins(lines: list[str]) -> list[Pin]:
    """The requirements of a requirements file's logical lines (`logical_lines`, `requirement_lines`), in order;
    the spans are of each line."""
    pins: list[Pin] = []
    for line in lines:
        body = requirement_of(line)
        if body and not body.startswith(NOT_REQUIREMENTS) and (pin := parse_requirement(body)) is not None:
            pins.append(pin)
    return pins


def _requirement_txt_pins(text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """A requirements file's pins with their spans in the file, line by line, and the index URLs it names."""
    pins: list[Pin] = []
    indexes: list[tuple[str, int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        _read_requirement_line(line, offset, pins, indexes)
        offset += len(line)
    return pins, indexes


def _read_requirement_line(line: str, offset: int, pins: list[Pin], indexes: list[tuple[str, int, int]]) -> None:
    """One line of a requirements file, starting at `offset` in its file: its pin into `pins`, or the index URL
    of an index option into `indexes`."""
    body = line.split(" #", 1)[0].rstrip("\r\n").removesuffix("\\")  # a continuation's `\\` is no pin's
    cut = _LINE_OPTIONS.search(body)
    body = body[: cut.start()] if cut and not body.lstrip().startswith("-") else body  # `pin --hash=...`
    option = _INDEX_OPTION.match(body)
    if option is not None:
        indexes.append((option.group(1), offset + option.start(1), offset + option.end(1)))
    elif body.strip() and not body.lstrip().startswith(NOT_REQUIREMENTS):
        pin = parse_requirement(body, offset)
        if pin is not None:
            pins.append(pin)


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
# the same strings, or the `]` that closes an array (read in comment-blanked text)
_ARRAY_TOKENS = lazy(f"{_BASIC_STRINGS}|{_TOML_LITERAL}|\\]", re.MULTILINE)
_TABLE = lazy(r"^[ \t]*\[([^\]\n]*)\][ \t]*$", re.MULTILINE)
_DEPENDENCIES = lazy(r"^[ \t]*dependencies[ \t]*=[ \t]*\[", re.MULTILINE)
_POETRY = lazy(
    rf"""^[ \t]*["']?({_NAME})["']?[ \t]*=[ \t]*"""
    r"""(?:"([^"\n]*)"|'([^'\n]*)'|\{[^}\n]*?\bversion[ \t]*=[ \t]*["']([^"'\n]*)["'])""",
    re.MULTILINE,
)
_POETRY_EXTRAS = lazy(r"\bextras[ \t]*=[ \t]*\[([^\]\n]*)\]")
_QUOTED_WORDS = lazy(r"""["']([^"'\n]*)["']""")
_LOCKED = lazy(r'^name[ \t]*=[ \t]*"([^"\n]+)"[ \t]*\r?\nversion[ \t]*=[ \t]*"([^"\n]+)"', re.MULTILINE)
_SOURCE_VERSION = lazy(r"""^VERSION\s*=\s*["']([0-9][^"']*)["']""", re.MULTILINE)
_URL = lazy(r"""https?://[^\s"'\]},]+""")


def blank_comments(text: str, syntax: str = "toml") -> str:
    """The text with every comment blanked, offsets kept (a pin commented out, on its own line or after code,
    is not a pin); a `#` inside a string is no comment. `syntax`: "python" (setup.py) or "toml"."""
    return _TOKENS[syntax].sub(lambda m: " " * len(m.group()) if m.group().startswith("#") else m.group(), text)


def _string(m: re.Match[str]) -> tuple[str, int] | None:
    """A string literal's text and where it starts (None: the token is no string, or a string never closed)."""
    token = m.group()
    if token[:1] not in ('"', "'"):
        return None
    quote = 3 if token[:3] in ('"""', "'''") else 1
    if len(token) < 2 * quote or not token.endswith(token[:quote]):
        return None
    return token[quote:-quote], m.start() + quote


def string_pins(text: str, syntax: str = "toml") -> list[Pin]:
    """Every string of a pyproject.toml or setup.py (`syntax` "toml" / "python"; comments left out) that reads as a
    requirement, bare names included, with its spans, in order."""
    pins: list[Pin] = []
    for m in _TOKENS[syntax].finditer(blank_comments(text, syntax)):
        found = _string(m)
        if found is not None and (pin := parse_requirement(*found)) is not None:
            pins.append(pin)
    return pins


def project_dependencies(text: str) -> list[Pin] | None:
    """pyproject.toml's `[project] dependencies` (PEP 621: what `pip install .` installs), on one line or several,
    with their spans; None when the file declares none."""
    text = blank_comments(text)
    tables = list(_TABLE.finditer(text))
    project = next((i for i, table in enumerate(tables) if table.group(1).strip() == "project"), None)
    if project is None:
        return None
    end = tables[project + 1].start() if project + 1 < len(tables) else len(text)
    key = _DEPENDENCIES.search(text, tables[project].end(), end)
    if key is None:
        return None
    pins: list[Pin] = []
    for m in _ARRAY_TOKENS.finditer(text, key.end()):
        if m.group() == "]":
            break
        found = _string(m)
        if found is not None and (pin := parse_requirement(*found)) is not None:
            pins.append(pin)
    return pins


def poetry_dependencies(text: str) -> list[Pin] | None:
    """pyproject.toml's `[tool.poetry.dependencies]` (what `poetry install` installs without a group; `python` is
    no package), with their spans and extras; None when the file has no such table. Poetry's `2.5.1` is `==2.5.1`
    for `exact_version`; its `^` / `~` are read by `parse_spec`."""
    text = blank_comments(text)
    tables = list(_TABLE.finditer(text))
    index = next((i for i, t in enumerate(tables) if t.group(1).strip() == "tool.poetry.dependencies"), None)
    if index is None:
        return None
    end = tables[index + 1].start() if index + 1 < len(tables) else len(text)
    pins: list[Pin] = []
    for m in _POETRY.finditer(text, tables[index].end(), end):
        group = next(i for i in (2, 3, 4) if m.group(i) is not None)
        name = normalise(m.group(1))
        if name != "python":
            line_end = text.find("\n", m.start())
            listed = _POETRY_EXTRAS.search(text[m.start() : line_end if line_end >= 0 else None])
            extras = _extras(",".join(_QUOTED_WORDS.findall(listed.group(1)))) if listed else ()
            spec = "" if m.group(group).strip() == "*" else m.group(group).strip()
            pins.append(Pin(name, spec, m.start(1), m.end(1), m.start(group), m.end(group), extras))
    return pins


def poetry_pins(text: str, names: frozenset[str], syntax: str = "toml") -> list[Pin]:
    """poetry's `name = "spec"` / `name = { version = "spec" }` lines for the packages `names` (normalised: any
    TOML string has that shape), in order; comments left out."""
    pins: list[Pin] = []
    for m in _POETRY.finditer(blank_comments(text, syntax)):
        group = next(i for i in (2, 3, 4) if m.group(i) is not None)
        name = normalise(m.group(1))
        if name in names:
            pins.append(Pin(name, m.group(group).strip(), m.start(1), m.end(1), m.start(group), m.end(group)))
    return pins


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


# --------------------------------------------------------------------------- setup.cfg (setuptools)
# setuptools reads setup.cfg with configparser (setuptools 84.2 dist.py `_parse_config_files`: `ConfigParser()`
# with `optionxform = str`, the file opened as text, so `\r\n` and `\r` end lines as `\n` does): a line whose
# text starts with `#` or `;` is a comment, even inside a value; a line indented deeper than its option's
# continues the value; a section header is `[name]` (case-sensitive), an option `key = value` (or `:`);
# `[DEFAULT]`'s options belong to every section. The parser is strict, and setuptools reads every option with
# `%` interpolation (`%%`, `%(key)s`), so the file is refused (`pip install .` fails, and nothing is a pin here)
# on a text line before the first section, a line that is no section, option or continuation, a key given twice
# in a section, a section given twice, or a `%` that interpolation cannot read. An [options] key's `-` and
# capitals read as `_` and lower case (a deprecation warning), the last spelling winning; `python_requires` must
# be a version specifier (config/setupcfg.py parses it, `SpecifierSet`).
# Its requirement lists (config/setupcfg.py `_parse_requirements_list`): a value of several lines holds one
# requirement a line, a value of one line is split at `;` (and refused when its second part starts with a marker
# variable and is no requirement: `torch; python_version>"3.9"`); a `file:` value names files to read (not
# followed here); `_reqs.parse` cuts a ` #` comment, joins a line ending in `\` with the next (not read here) and
# parses each item with `packaging`: an item it cannot parse (`setup_requires = ...` indented into the list) is
# no pin here (setuptools refuses the build on it). A value that interpolation rewrites is not read here (its
# text is not the file's).
_LINE_BREAK = lazy(r"\r\n|\r|\n")
_INI_SECTION = lazy(r"\[(.+)\]")  # configparser's SECTCRE, matched at the start of the stripped line
_INI_OPTION = lazy(r"([^=:]*)[=:]\s*")  # OPTCRE: the key runs to the first `=` or `:`
_INI_DEFAULT = "DEFAULT"
_INTERPOLATION = lazy(r"%(?:%|\(([^)]+)\)s)?")  # BasicInterpolation: `%%`, `%(key)s`, else an error
_MAX_INTERPOLATION_DEPTH = 10  # configparser's MAX_INTERPOLATION_DEPTH
# markers' variables (packaging's marker_env(); setupcfg.py `_warn_accidental_env_marker_misconfig`)
_MARKER_VARIABLES = (
    "implementation_name",
    "implementation_version",
    "os_name",
    "platform_machine",
    "platform_release",
    "platform_system",
    "platform_version",
    "python_full_version",
    "platform_python_implementation",
    "python_version",
    "sys_platform",
)


class _IniOption(NamedTuple):
    section: str
    key: str
    lines: list[tuple[str, int]]  # the value's lines that hold text, each with its offset in the file
    inline: bool  # the key's line holds text (the value starts with it)
    one_line: bool  # no continuation line (configparser's value holds no newline)

    @property
    def value(self) -> str:
        return "\n".join(text for text, _ in self.lines)


class _IniRefused(Exception):
    """configparser or setuptools refuses the file: it states no pins."""


def _physical_lines(text: str) -> list[tuple[str, int]]:
    """The lines as a file opened as text reads them (`\\r\\n`, `\\r`, `\\n`), each with its offset."""
    lines: list[tuple[str, int]] = []
    start = 0
    for m in _LINE_BREAK.finditer(text):
        lines.append((text[start : m.start()], start))
        start = m.end()
    if start < len(text):
        lines.append((text[start:], start))
    return lines


def _ini_options(text: str) -> tuple[list[str], list[_IniOption]]:
    """The sections and every option of an INI file as configparser (strict) reads them, blank and comment lines
    dropped; `_IniRefused` where configparser raises."""
    sections: list[str] = []
    options: list[_IniOption] = []
    added: set[tuple[str, ...]] = set()
    section: str | None = None
    current: _IniOption | None = None  # the option being read
    indent = 0
    for line, offset in _physical_lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue  # a blank or comment line neither ends nor continues a value
        level = len(line) - len(line.lstrip())
        if current is not None and level > indent:
            current.lines.append((stripped, offset + level))
            options[-1] = current = current._replace(one_line=False)
            continue
        indent, current = level, None
        header = _INI_SECTION.match(stripped)
        if header is not None:
            section = header.group(1)
            if (section,) in added and section != _INI_DEFAULT:
                raise _IniRefused(f"section [{section}] twice")
            added.add((section,))
            sections.append(section)
            continue
        option = _INI_OPTION.match(stripped)
        if section is None or option is None or not option.group(1).strip():
            raise _IniRefused(f"not a section, an option or a continuation: {stripped!r}")
        key = option.group(1).rstrip()
        if (section, key) in added:
            raise _IniRefused(f"[{section}] {key} twice")
        added.add((section, key))
        value = stripped[option.end() :]
        current = _IniOption(section, key, [(value, offset + level + option.end())] if value else [], bool(value), True)
        options.append(current)
    return sections, options


def _interpolated(value: str, scope: dict[str, str], depth: int = 1) -> str:
    """A value as configparser's BasicInterpolation gives it (`%%` -> `%`, `%(key)s` -> the key's value in the
    section or [DEFAULT]); `_IniRefused` where it raises."""
    if depth > _MAX_INTERPOLATION_DEPTH:
        raise _IniRefused("interpolation too deep")
    out: list[str] = []
    start = 0
    for m in _INTERPOLATION.finditer(value):
        out.append(value[start : m.start()])
        start = m.end()
        if m.group() == "%%":
            out.append("%")
        elif m.group(1) is None or m.group(1) not in scope:
            raise _IniRefused(f"'%' that interpolation cannot read: {value!r}")
        else:
            referenced = scope[m.group(1)]
            out.append(_interpolated(referenced, scope, depth + 1) if "%" in referenced else referenced)
    return "".join(out) + value[start:]


def _setuptools_options(names: list[str], options: list[_IniOption]) -> dict[str, dict[str, _IniOption]]:
    """Each section's options as setuptools takes them (`parser.options(section)`: the section's, then
    [DEFAULT]'s; every value read through interpolation; [options] keys in `_` and lower case, last wins)."""
    defaults = {o.key: o for o in options if o.section == _INI_DEFAULT}
    sections: dict[str, dict[str, _IniOption]] = {name: {} for name in names if name != _INI_DEFAULT}
    for option in options:
        if option.section != _INI_DEFAULT:
            sections.setdefault(option.section, {})[option.key] = option
    taken: dict[str, dict[str, _IniOption]] = {}
    for name, own in sections.items():
        scope = dict(own)
        for key, option in defaults.items():
            scope.setdefault(key, option)
        values = {key: o.value for key, o in scope.items()}
        for key, option in scope.items():
            if "%" in option.value:
                _interpolated(option.value, values)
            if name == "options":
                key = key.replace("-", "_").lower()  # dist.py `_enforce_underscore`, `_enforce_option_lowercase`
            taken.setdefault(name, {})[key] = option
    return taken


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


def _is_marker(text: str) -> bool:
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
_PEP508_HEAD = lazy(rf"[ \t]*({_NAME})[ \t]*(?:\[([^\]]*)\][ \t]*)?")
_IDENTIFIER = lazy(rf"{_NAME}")


def _identifier(text: str) -> bool:
    """PEP 508's name: letters and digits first and last, `-_.` between."""
    return _IDENTIFIER.fullmatch(text) is not None and text[-1].isalnum()


def _is_specifier(text: str) -> bool:
    """A version specifier list packaging accepts (`>= 2.4 , < 2.6`, `==2.5.*`, a trailing `,`)."""
    clauses = text.split(",")
    if len(clauses) > 1 and not clauses[-1].strip():
        clauses.pop()  # packaging takes a trailing comma
    return not text.strip() or all(_SPEC_CLAUSE.fullmatch(c.strip()) for c in clauses)


def _pep508_requirement(text: str, offset: int) -> Pin | None:
    """A requirement packaging parses (setuptools' `_reqs.parse`), with its spans; None where it raises.
    `name (>=1.0)` is read too; the marker is checked, not kept."""
    head = _PEP508_HEAD.match(text)
    extras = head.group(2) if head else None
    if head is None or not _identifier(head.group(1)):
        return None
    if extras is not None and extras.strip() and not all(_identifier(e.strip()) for e in extras.split(",")):
        return None
    rest, at = text[head.end() :], head.end()
    if rest.startswith("@"):
        url = rest[1:].lstrip(" \t").split(None, 1)
        if not url or (len(url) > 1 and not (url[1].startswith(";") and _is_marker(url[1][1:].strip()))):
            return None
        found = parse_requirement(text, offset)
        return found if found is not None and found.spec == "@ " + url[0] else None
    spec, semicolon, marker = rest.partition(";")
    if semicolon and not _is_marker(marker.strip()):
        return None
    if spec.lstrip().startswith("("):
        inner, close, after = spec.lstrip()[1:].partition(")")
        if not close or after.strip():
            return None
        at += len(spec) - len(spec.lstrip()) + 1
        spec = inner
    if ")" in spec or "(" in spec or not _is_specifier(spec):
        return None
    written = spec.strip().rstrip(",").rstrip()
    name_at, name_end = offset + head.start(1), offset + head.end(1)
    spec_at = offset + at + len(spec) - len(spec.lstrip()) if written else name_at
    spec_end = spec_at + len(written) if written else name_end
    return Pin(normalise(head.group(1)), written, name_at, name_end, spec_at, spec_end, _extras(extras))


def _setup_cfg_list(option: _IniOption, label: str) -> list[Pin]:
    """The requirements of one setup.cfg list value (`_parse_requirements_list`, then `_reqs.parse`), with their
    spans; `_IniRefused` where setuptools raises on it."""
    items = option.lines
    if not items or (option.inline and items[0][0].startswith("file:")):
        return []  # files named here are not followed
    if "%" in option.value:
        return []  # interpolation rewrites the text: not read
    if option.one_line:
        text, at = items[0]
        items, cursor = [], 0
        for chunk in text.split(";"):
            items.append((chunk, at + cursor))
            cursor += len(chunk) + 1
        parts = [chunk.strip() for chunk, _ in items if chunk.strip()]
        if len(parts) == 2 and parts[1].startswith(_MARKER_VARIABLES) and not _pep508_requirement(parts[1], 0):
            raise _IniRefused(f"{label}: `;` splits a requirement from its marker: {text!r}")
    pins: list[Pin] = []
    joined = False  # the item before ended in `\`: `_reqs.parse` joins the two (not read here)
    for item, at in items:
        body = item.strip()
        if not body or body.startswith("#"):
            continue
        body = item.partition(" #")[0].rstrip()
        if body.endswith("\\") or joined:
            joined = body.endswith("\\")
            continue
        if (pin := _pep508_requirement(body, at)) is not None:
            pins.append(pin)
    return pins


def setup_cfg_pins(text: str, extras: bool = True) -> list[Pin]:
    """setup.cfg's `[options] install_requires` (what `pip install .` installs) and, with `extras`, every list of
    `[options.extras_require]`, bare names included, with their spans, in order; none where configparser or
    setuptools refuses the file."""
    pins: list[Pin] = []
    try:
        sections = _setuptools_options(*_ini_options(text))
        python = sections.get("options", {}).get("python_requires")
        if python is not None and not _is_specifier(python.value.replace("%%", "%")):
            raise _IniRefused("python_requires is no version specifier")  # setupcfg.py parses it: SpecifierSet
        install = sections.get("options", {}).get("install_requires")
        pins += _setup_cfg_list(install, "install_requires") if install is not None else []
        for key, option in sections.get("options.extras_require", {}).items():
            extra = _setup_cfg_list(option, f"extras_require[{key}]")  # read even when not kept: it may refuse
            pins += extra if extras else []
    except _IniRefused:
        return []
    return sorted(pins, key=lambda p: p.name_start)


# --------------------------------------------------------------------------- conda environment.yml
# `conda env create` reads environment.yml's `dependencies:`: conda match specs, and a `- pip:` list that conda
# writes, one item a line, into a requirements file in the environment file's folder and hands to `pip install -U
# -r` (conda/env/installers/pip.py `_pip_install_via_requirements`): pip's lines, `-r` includes relative to that
# folder; pip runs after conda, so its pin of a package is the one that stays.
# A match spec (conda/models/match_spec.py `_parse_spec_str`; docs.conda.io/projects/conda/en/latest/user-guide/
# concepts/pkg-specs.html "Package match specifications"): `channel::name version build`, `#` starts a comment.
# `numpy=1.11` is fuzzy, conda's `1.11*` (1.11, 1.11.0, 1.11.18; not 1.110): PEP 440's `==1.11.*`; `numpy==1.11`
# and `numpy 1.11` are exact (1.11, 1.11.0); `numpy=1.11=build` names a build, and the version is exact; `*` is
# any; `,` is and; `>=1.*` is `>=1` (conda drops the `.*`); `|` (or) has no PEP 440 form and, as a
# `[version=...]` bracket, is read as unknown ("", as a bare name).
CONDA_ENVIRONMENT_FILES = ("environment.yml", "environment.yaml")
CONDA_NAMES = {"pytorch": "torch"}  # a conda package's name -> the distribution pip knows it as
_NOT_PACKAGES = frozenset({"python", "pip"})  # the interpreter and the installer, which every environment has
_CONDA_DEPENDENCIES = lazy(r"^dependencies[ \t]*:[ \t]*(?:#[^\r\n]*)?\r?$", re.MULTILINE)
_CONDA_PIP_KEY = lazy(r"""(["']?)pip\1[ \t]*:""")
_CONDA_SPEC = lazy(r"([^ \t=<>!~]+)([ \t=<>!~].*)?")  # match_spec.py step 6: the name, then version and build
_CONDA_BUILD_EQUALS = lazy(r"(?<=[^<>=!~,|])=")  # `1.2=build`: an `=` that ends a version, not an operator
_CONDA_NAME = lazy(_NAME)
_CONDA_OPERATORS = ("==", "!=", "<=", ">=", "~=", "<", ">", "=")
_OPERATOR_CHARS = "<>=!~,|"


def _yaml_item(line: str, offset: int) -> tuple[str, int] | None:
    """A block sequence item's scalar (`- x`, `- "x"  # comment`) and where it starts; None for no item."""
    body = line.lstrip(" ")
    if not (body == "-" or body.startswith(("- ", "-\t"))):
        return None
    value = body[1:].lstrip(" \t")
    at = offset + len(line) - len(value)
    close = value.find(value[0], 1) if value[:1] in ('"', "'") else -1
    if close > 0 and not value[close + 1 :].split(" #", 1)[0].strip():  # a quoted scalar (a quoted key is no item)
        return value[1:close], at + 1
    return value.split(" #", 1)[0].rstrip(), at


def _yaml_mapping(text: str, item: tuple[str, int]) -> bool:
    """Is a block sequence item of `text` a mapping (`- pip: [a, b]`), not a string? Its unquoted text holds a
    `: ` or ends in `:` (a match spec never does: a channel's is `::name`)."""
    value, at = item
    quoted = text[at - 1 : at] in ("'", '"')
    return not quoted and (value.endswith(":") or ": " in value or ":\t" in value)


def conda_environment_items(text: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """environment.yml's `dependencies:` block list: the conda match specs and the `- pip:` list's lines, each as
    (text, offset in the file), in order. Not read: a flow list (`[a, b]`), a mapping item other than `pip:`, an
    item continued on the next lines (a plain scalar YAML folds: its text is not one line's), a file that has the
    key twice (PyYAML keeps the last, conda's ruamel.yaml refuses the file)."""
    key = _CONDA_DEPENDENCIES.search(text)
    if key is None or _CONDA_DEPENDENCIES.search(text, key.end()) is not None:
        return [], []
    conda: list[tuple[str, int]] = []
    pip: list[tuple[str, int]] = []
    offset = key.end() + 1
    indent = -1  # the items' indentation (YAML lets it be the key's own)
    in_pip = False
    last: list[tuple[str, int]] | None = None  # the list the last item went to, while a line may continue it
    for raw in text[offset:].split("\n"):
        line, here = raw.rstrip("\r"), offset
        offset += len(raw) + 1
        if not line.strip() or line.lstrip(" ").startswith("#"):
            continue
        level = len(line) - len(line.lstrip(" "))
        item = _yaml_item(line, here)
        if (indent < 0 and item is None) or level < indent or (level == indent and item is None):
            break  # no block list, or the next key
        indent = level if indent < 0 else indent
        if item is None and last:
            last.pop()  # a deeper line that is no item continues the scalar before it
        if item is None or not item[0]:
            last = None
            continue
        last = None
        if level == indent:
            in_pip = _CONDA_PIP_KEY.fullmatch(item[0]) is not None
            if not in_pip and not _yaml_mapping(text, item):
                conda.append(item)
                last = conda
        elif in_pip:
            pip.append(item)
            last = pip
    return conda, pip


def _conda_version(version: str) -> str:
    """A conda version spec (`1.11*`, `>=2.4,<2.6`, `2.5.1`) in PEP 440's words (`==1.11.*`, ...); "" for any,
    and for what PEP 440 cannot state (`|`) or is not read."""
    if not version or "|" in version or version == "*":
        return ""
    clauses: list[str] = []
    for clause in version.split(","):
        op = next((o for o in _CONDA_OPERATORS if clause.startswith(o)), "")
        bound = clause[len(op) :]
        wild = bound.endswith("*") or op == "="  # `=1.2` inside a spec: conda's startswith
        bound = bound.rstrip("*").rstrip(".")
        if op in ("", "=", "=="):
            clauses.append("==" + bound + (".*" if wild else ""))
        elif op == "!=":
            clauses.append("!=" + bound + (".*" if wild else ""))
        else:
            clauses.append(op + bound)  # an order: conda ignores a trailing `.*`
    spec = ",".join(clauses)
    try:
        parse_spec(spec)
    except ValueError:
        return ""
    return spec


def _conda_version_of(rest: str) -> str:
    """The conda version spec in a match spec's text after the name (match_spec.py `_parse_version_plus_build`,
    then its `=1.2` -> `1.2*`): `=1.2` -> `1.2*`, `=1.2=b` and `=1.2 b` -> `1.2`, `>=1 , <2 b` -> `>=1,<2`."""
    words: list[str] = []
    for word in rest.split():
        if words and words[-1][-1] not in _OPERATOR_CHARS and word[0] not in _OPERATOR_CHARS:
            break  # the build string
        words.append(word)
    joined = "".join(words)
    cut = _CONDA_BUILD_EQUALS.search(joined)
    version = joined[: cut.start()] if cut else joined
    build = cut is not None or len(words) < len(rest.split())
    tail = version[1:]
    if version.startswith("=") and not tail.startswith("=") and not any(c in tail for c in "=,|"):
        return tail if build or tail.endswith("*") else tail + "*"
    return version


def conda_pin(spec: str, offset: int = 0) -> Pin | None:
    """A conda match spec (`conda-forge::pytorch=2.5`, `numpy >=1.8,<2`) as a pin: the distribution as pip names
    it (`pytorch` -> torch), the version in PEP 440's words (`==2.5.*`), the spans of the text as written; None
    for no package (a URL or a package file, `python`, `pip`)."""
    text = spec.split("#", 1)[0].rstrip()
    if text.endswith((".tar.bz2", ".conda")):
        return None
    bracket = text.find("[")
    unread = bracket >= 0  # `name[version=...]`: the brackets override the version; not read
    text = text[:bracket] if unread else text
    body = text.rsplit(":", 2)[-1]  # `channel::name`, `channel/subdir::name`
    at = offset + len(text) - len(body)
    match = _CONDA_SPEC.fullmatch(body)
    if match is None or _CONDA_NAME.fullmatch(match.group(1)) is None:
        return None
    name = normalise(match.group(1))
    name = CONDA_NAMES.get(name, name)
    if name in _NOT_PACKAGES:
        return None
    rest = match.group(2) or ""
    version = "" if unread else _conda_version(_conda_version_of(rest))
    name_at, name_end = at + match.start(1), at + match.end(1)
    spec_at = name_end + len(rest) - len(rest.lstrip())
    spec_end = name_end + len(rest.rstrip())
    spec_at, spec_end = (spec_at, spec_end) if version else (name_at, name_end)
    return Pin(name, version, name_at, name_end, spec_at, spec_end)


def conda_environment_pins(text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """Every pin of an environment.yml with its span in the file (the conda specs and the `- pip:` list's
    requirements, in order) and the package index URLs its pip lines name."""
    conda, pip = conda_environment_items(text)
    pins = [pin for item in conda if (pin := conda_pin(*item)) is not None]
    indexes: list[tuple[str, int, int]] = []
    for line, at in pip:
        _read_requirement_line(line, at, pins, indexes)
    return sorted(pins, key=lambda p: p.name_start), indexes


def conda_environment_requirements(path: Path, text: str, read: Callable[[Path], str]) -> list[Pin]:
    """What an environment.yml installs: its pip lines' requirements first (the files their `-r` lines include
    too: pip installs after conda), then its conda specs; the pip pins' spans are of their lines."""
    conda, pip = conda_environment_items(text)
    pip_pins = line_pins(requirement_lines(path, "\n".join(line for line, _ in pip), read))
    return pip_pins + [pin for item in conda if (pin := conda_pin(*item)) is not None]


# --------------------------------------------------------------------------- requirement files as linted files
# The requirement rules (cfgopt/rules/env*) lint the same files `cfgopt.environment.pins` reads, for every package
# they name and with the position of each pin; `cfgopt.loaders.requirement_files` builds a Source from these.
REQUIREMENT_FILES = ("uv.lock", "poetry.lock", "pyproject.toml", "setup.py", "setup.cfg", *CONDA_ENVIRONMENT_FILES)
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


def is_requirement_file(name: str) -> bool:
    """A file that states requirements (the pins, the environment and the requirement rules read it), by name."""
    return name in REQUIREMENT_FILES or (name.startswith("requirements") and name.endswith(".txt"))


def _manifest_pins(text: str, syntax: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """pyproject.toml / setup.py: quoted requirements with a specifier or a URL, poetry lines; index URLs."""
    pins = [pin for pin in string_pins(text, syntax) if pin.spec]
    pins += poetry_pins(text, POETRY_PACKAGES, syntax)
    indexes = [(m.group(0), m.start(), m.end()) for m in _URL.finditer(blank_comments(text, syntax))]
    return sorted(pins, key=lambda p: p.name_start), indexes


def requirement_pins(file_name: str, text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """Every pin of a requirement file (any package) with its span, and the package index URLs it names."""
    if file_name in ("uv.lock", "poetry.lock"):
        return lock_pins(text), []
    if file_name in ("pyproject.toml", "setup.py"):
        return _manifest_pins(text, "python" if file_name == "setup.py" else "toml")
    if file_name == "setup.cfg":
        return setup_cfg_pins(text), []
    if file_name in CONDA_ENVIRONMENT_FILES:
        return conda_environment_pins(text)
    return _requirement_txt_pins(text)


# --------------------------------------------------------------------------- versions
_DIGITS = lazy(r"[0-9]*", re.ASCII)


def version_key(version: str) -> tuple[int, ...]:
    """`"0.16.4"` -> `(0, 16, 4)`: numeric order, so 0.9.10 sorts after 0.9.5 (non-digits end a part)."""
    return tuple(integer(_DIGITS.match(part).group()) or 0 for part in version.split("."))  # type: ignore[union-attr]


# A version as pip reports it (PEP 440): the release, then pre-release, post-release, development and local parts.
_PEP440 = lazy(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(?:[-_.]?(?P<post>post|rev|r)[-_.]?\d*|-\d+)?"
    r"(?:[-_.]?(?P<dev>dev)[-_.]?\d*)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$",
    re.IGNORECASE,
)


class PipVersion(NamedTuple):
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
