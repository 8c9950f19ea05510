r"""requirements*.txt as pip 23.2.1 reads it (src/pip/_internal/req/req_file.py): `\` continuations
(`logical_lines`), `-r` includes through the caller's reader (`requirement_lines`), comments and per-requirement
options cut (`requirement_of`), the pins (`line_pins`, `requirements_txt_pins` with their spans in the file) and the
package indexes it names.

pip reads a file in these steps, and so does this module: the bytes are decoded (`auto_decode`: a byte order mark, a
coding comment, else UTF-8; `pip_encoding`, the callers' reads), the mark dropped; the text is split with
`str.splitlines`; a line ending in `\` joins the next, its `\`s at both ends stripped, unless it is a comment
line (`#` first after blanks), and a comment line ends a join (`join_lines`); a `#` at the start or after a blank
starts a comment (`COMMENT_RE`); the line is stripped; `${NAME}` is the node's environment variable
(`expand_env_variables`: a requirement naming one is not read here, its text is the node's); the words up to the
first one starting with `-` (words split at spaces) are the requirement (`break_args_options`), the rest are
options; a line of options only is an option line (`-r` / `--requirement` includes a file, the first one only;
`-c` / `--constraint` names constraints, which install nothing and are not followed; the index options). The
requirement is parsed as packaging parses it (`pep508_requirement`): a path, a URL, an editable (`-e`) or text
packaging refuses is no pin.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record
from cfgopt.text.requirements.requirement import (
    NAME,
    Pin,
    is_marker,
    legacy_operators,
    normalise,
    pep508_requirement,
)

_COMMENT = lazy(r"(?:^|\s)#")  # pip's COMMENT_RE `(^|\s+)#.*$`, without its quadratic `\s+` (the line is stripped)
_ENVIRONMENT_VARIABLE = lazy(r"\$\{[A-Z0-9_]+\}")  # pip's ENV_VAR_RE
_WORD = lazy(r"\S+")
# options that take a value (pip's SUPPORTED_OPTIONS and SUPPORTED_OPTIONS_REQ), short and long
_VALUE_OPTIONS = frozenset(
    [
        *("-r", "-c", "-e", "-i", "-f", "--requirement", "--constraint", "--editable", "--index-url"),
        *("--extra-index-url", "--find-links", "--no-binary", "--only-binary", "--trusted-host", "--use-feature"),
        *("--global-option", "--hash", "--config-settings"),
    ]
)
_INDEX_OPTIONS = frozenset(["-i", "--index-url", "--extra-index-url", "-f", "--find-links"])
MAX_INCLUDES = 16
# What pip takes for a path, a URL or an archive before it parses a requirement (req/constructors.py
# `parse_req_from_line`: `_looks_like_path`, `is_url`, `is_archive_file`): whether it installs is the node's to say.
_ARCHIVES = (
    ".whl",
    ".zip",
    ".tar.gz",
    ".tgz",
    ".tar",
    ".tar.bz2",
    ".tbz",
    ".tar.xz",
    ".txz",
    ".tlz",
    ".tar.lz",
    ".tar.lzma",
)
_SCHEME = lazy(r"[A-Za-z][A-Za-z0-9+.-]*:")
_NAME = lazy(NAME)
_TRAILING_UNDERSCORE = lazy(r"_(?!\w)")  # packaging 22+'s IDENTIFIER `\b[a-zA-Z0-9][a-zA-Z0-9._-]*\b` ends there


class _Segment(Record):
    """A piece of a logical line: where it starts in the line and in the file (-1: no text of the file)."""

    at: int
    file_at: int


class _LogicalLine(Record):
    text: str
    segments: tuple[_Segment, ...]

    def in_file(self, start: int, end: int) -> int:
        """The file offset of the line's text[start:end] when it is one piece of the file; -1 otherwise."""
        for i, segment in enumerate(self.segments):
            limit = self.segments[i + 1].at if i + 1 < len(self.segments) else len(self.text)
            if segment.at <= start < limit:
                return segment.file_at + start - segment.at if end <= limit and segment.file_at >= 0 else -1
        return -1


def _is_comment_line(line: str) -> bool:
    return line.lstrip().startswith("#")  # COMMENT_RE.match: `#` first, or after blanks


def _joined_lines(text: str) -> list[_LogicalLine]:
    """The lines pip reads (`join_lines`), each with where its pieces are in the file."""
    out: list[_LogicalLine] = []
    parts: list[str] = []
    segments: list[_Segment] = []
    offset = 0
    for raw in text.splitlines(keepends=True):
        line = raw.splitlines()[0]
        at, file_at = sum(map(len, parts)), offset
        offset += len(raw)
        if line.endswith("\\") and not _is_comment_line(line):
            stripped = line.strip("\\")
            parts.append(stripped)
            segments.append(_Segment(at, file_at + len(line) - len(line.lstrip("\\"))))
            continue
        if _is_comment_line(line) and parts:  # pip prefixes a comment line with " ": it ends the join
            parts.append(" ")
            segments.append(_Segment(at, -1))
            at += 1
        parts.append(line)
        segments.append(_Segment(at, file_at))
        out.append(_LogicalLine("".join(parts), tuple(segments)))
        parts, segments = [], []
    if parts:
        out.append(_LogicalLine("".join(parts), tuple(segments)))
    return out


def logical_lines(text: str) -> list[str]:
    """The lines pip reads (`join_lines`): a line ending in `\\` is joined with the next, except a comment."""
    return [line.text for line in _joined_lines(text)]


def _without_comment(line: str) -> str:
    comment = _COMMENT.search(line)
    return line[: comment.start()] if comment is not None else line


def _split_line(line: str) -> tuple[str, int, str]:
    """A logical line as pip splits it: the requirement text (`""` on an option line), where it starts in the line,
    and the options after it; comment cut, blanks stripped (`ignore_comments`, `break_args_options`)."""
    body = _without_comment(line).rstrip()
    start = len(body) - len(body.lstrip())
    body = body[start:]
    if body.startswith("-"):
        return "", start, body
    cut = body.find(" -")
    return (body, start, "") if cut < 0 else (body[:cut], start, body[cut + 1 :])


def requirement_of(line: str) -> str:
    """A requirements file's logical line without its comment and its per-requirement options (pip's
    `break_args_options`: the options start at the first word, split at spaces, that starts with `-`)."""
    return _split_line(line)[0].strip()


def _options(text: str, at: int) -> list[tuple[str, str, int]]:
    """An option line's options with their values and where each value starts (`at`: where `text` starts), as
    optparse reads them (`-rFILE`, `-r FILE`, `--requirement=FILE`, `--requirement FILE`); none where a value is
    quoted (shlex would unquote it: not read here)."""
    if "'" in text or '"' in text:
        return []
    words = [(m.group(), at + m.start()) for m in _WORD.finditer(text)]
    found: list[tuple[str, str, int]] = []
    i = 0
    while i < len(words):
        word, start = words[i]
        name, equals, value = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
        value_at = start + len(name) + len(equals)
        if name in _VALUE_OPTIONS and not equals and not value and i + 1 < len(words):
            i += 1
            value, value_at = words[i]
        found.append((name, value, value_at))
        i += 1
    return found


def _pin_of(requirement: str, at: int) -> Pin | None:
    """The pin of a requirement line's text starting at `at` (None: no pin, or one naming an environment variable,
    which pip substitutes on the node)."""
    if not requirement or _ENVIRONMENT_VARIABLE.search(requirement):
        return None
    return pep508_requirement(requirement, at)


def _include_of(line: str) -> str | None:
    """The file a line's `-r` includes (pip follows the first `-r` of an option line), None for none."""
    requirement, start, options = _split_line(line)
    if requirement:
        return None
    include = next((v for name, v, _ in _options(options, start) if name in ("-r", "--requirement")), None)
    return include if include and not _ENVIRONMENT_VARIABLE.search(include) else None


def requirement_lines(path: Path, text: str, read: Callable[[Path], str]) -> list[str]:
    """The logical lines of a requirements file, followed by those of the files its `-r` lines include
    (`read(path)` gives a file's text as pip decodes it, `pip_encoding.read_requirements`, "" when it cannot be read
    or decoded; pip joins the path to the including file's folder); each file once, at most MAX_INCLUDES."""
    seen = {os.path.realpath(path)}
    lines: list[str] = []
    queue = [(path, text)]
    while queue:
        current, body = queue.pop(0)
        for line in logical_lines(body):
            lines.append(line)
            include = _include_of(line)
            if include is None or "://" in include or len(seen) > MAX_INCLUDES:
                continue
            target = current.parent / include
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
        requirement, start, _ = _split_line(line)
        if (pin := _pin_of(requirement, start)) is not None:
            pins.append(pin)
    return pins


def requirements_txt_pins(text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """A requirements file's pins with their spans in the file, and the index URLs it names; a pin whose name or
    specifier is split by a `\\` continuation is not read (no span holds it)."""
    pins: list[Pin] = []
    indexes: list[tuple[str, int, int]] = []
    for line in _joined_lines(text):
        found: list[tuple[str, int, int]] = []
        for pin in _line_pins(line.text, found):
            name_at = line.in_file(pin.name_start, pin.name_end)
            spec_at = line.in_file(pin.spec_start, pin.spec_end)
            if name_at >= 0 and spec_at >= 0:
                pins.append(_moved(pin, name_at, spec_at))
        for url, start, end in found:
            if (url_at := line.in_file(start, end)) >= 0:
                indexes.append((url, url_at, url_at + len(url)))
    return pins, indexes


def _moved(pin: Pin, name_at: int, spec_at: int) -> Pin:
    return pin._replace(
        name_start=name_at,
        name_end=name_at + pin.name_end - pin.name_start,
        spec_start=spec_at,
        spec_end=spec_at + pin.spec_end - pin.spec_start,
    )


def _line_pins(line: str, indexes: list[tuple[str, int, int]]) -> list[Pin]:
    """One logical line's pin (spans in the line) into the list returned, its index URLs into `indexes`."""
    requirement, start, options = _split_line(line)
    if requirement:
        pin = _pin_of(requirement, start)
        return [pin] if pin is not None else []
    indexes += [(value, at, at + len(value)) for name, value, at in _options(options, start) if name in _INDEX_OPTIONS]
    return []


def read_requirement_line(line: str, offset: int, pins: list[Pin], indexes: list[tuple[str, int, int]]) -> None:
    """One line of a requirements file (no continuation), starting at `offset` in its file: its pin into `pins`,
    the index URLs of its index options into `indexes`."""
    found: list[tuple[str, int, int]] = []
    pins += [_moved(pin, pin.name_start + offset, pin.spec_start + offset) for pin in _line_pins(line, found)]
    indexes += [(url, at + offset, end + offset) for url, at, end in found]


class RefusedRequirement(Record):
    """A requirement line pip stops on: its text as pip reads it, where it starts in the file, the name it starts
    with (normalised; "" for none), `marker`: what pip stops on is the marker after `;` (`InvalidMarker`), else
    the requirement before it (`Invalid requirement`), and `legacy`: pip before 24.1 parses that requirement (a
    legacy `==`) and then finds no release equal to it."""

    text: str
    start: int
    name: str
    marker: bool = False
    legacy: bool = False


def _read_as_path_or_url(requirement: str) -> bool:
    """pip reads it as a path, a URL or an archive file, not as a requirement string (`parse_req_from_line`)."""
    name = requirement.split(";", 1)[0].strip()
    if name.endswith("]") and "[" in name:
        name = name[: name.rindex("[")]  # `_strip_extras`: `./pkg.whl[extra]`
    looks_like_path = "/" in name or "\\" in name or name.startswith(".")
    return looks_like_path or _SCHEME.match(name) is not None or name.lower().endswith(_ARCHIVES)


def _stops_on(requirement: str) -> tuple[bool, bool] | None:
    """Whether pip stops on a requirement as `parse_req_from_line` reads it, the marker split off at the first `;`
    and parsed alone (an empty one is none): (on the marker, legacy) as `RefusedRequirement` says, None where
    some pip reads it: packaging 22+ (`pep508_requirement`), or packaging 21.3's legacy specifiers other than `==`,
    which may match a release, or a name or extra ending in `_`, which packaging 22+'s tokenizer takes."""
    before, semicolon, marker = requirement.partition(";")
    if semicolon and marker.strip() and not is_marker(marker.strip()):
        return True, False
    if pep508_requirement(before) is not None or _TRAILING_UNDERSCORE.search(before):
        return None
    operators = legacy_operators(before)
    if operators and any(op != "==" for op in operators):
        return None  # `name>=latest`: pip before 24.1 may install a release for it
    return False, bool(operators)


def refused_requirement(text: str) -> RefusedRequirement | None:
    """The first requirement of a requirements file that every pip stops on (`_stops_on`), None where there is
    none. A path, URL or archive (the node's to resolve) and a line naming a `${VARIABLE}` are not judged."""
    for line in _joined_lines(text):
        requirement, start, _ = _split_line(line.text)
        if not requirement or _ENVIRONMENT_VARIABLE.search(requirement) or _read_as_path_or_url(requirement):
            continue
        stops = _stops_on(requirement)
        if stops is None:
            continue
        at = line.in_file(start, start + 1)
        name = _NAME.match(requirement)
        return RefusedRequirement(
            requirement,
            at if at >= 0 else line.segments[0].file_at,
            normalise(name.group()) if name else "",
            *stops,
        )
    return None
