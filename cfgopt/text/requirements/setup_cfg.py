"""setup.cfg as setuptools 84.2 reads it: `[options] install_requires` and `[options.extras_require]`
(`setup_cfg_pins`), through configparser's rules, with each pin's span."""

from __future__ import annotations

from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record
from cfgopt.text.requirements.requirement import Pin, is_specifier, pep508_requirement

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


class _IniOption(Record):
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
        if len(parts) == 2 and parts[1].startswith(_MARKER_VARIABLES) and not pep508_requirement(parts[1], 0):
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
        if (pin := pep508_requirement(body, at)) is not None:
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
        if python is not None and not is_specifier(python.value.replace("%%", "%")):
            raise _IniRefused("python_requires is no version specifier")  # setupcfg.py parses it: SpecifierSet
        install = sections.get("options", {}).get("install_requires")
        pins += _setup_cfg_list(install, "install_requires") if install is not None else []
        for key, option in sections.get("options.extras_require", {}).items():
            extra = _setup_cfg_list(option, f"extras_require[{key}]")  # read even when not kept: it may refuse
            pins += extra if extras else []
    except _IniRefused:
        return []
    return sorted(pins, key=lambda p: p.name_start)
