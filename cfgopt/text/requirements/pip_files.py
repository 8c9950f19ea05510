r"""requirements*.txt as pip reads it: `\` continuations (`logical_lines`), `-r` includes through the caller's
reader (`requirement_lines`), comments and per-requirement options cut (`requirement_of`), the pins (`line_pins`)
and the package indexes it names."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cfgopt.text.patterns import lazy
from cfgopt.text.requirements.requirement import Pin, parse_requirement

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


def requirements_txt_pins(text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """A requirements file's pins with their spans in the file, line by line, and the index URLs it names."""
    pins: list[Pin] = []
    indexes: list[tuple[str, int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        read_requirement_line(line, offset, pins, indexes)
        offset += len(line)
    return pins, indexes


def read_requirement_line(line: str, offset: int, pins: list[Pin], indexes: list[tuple[str, int, int]]) -> None:
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
