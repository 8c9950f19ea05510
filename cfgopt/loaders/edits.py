"""Span edits that keep the rest of the file byte-identical: comments, quoting, order, number spelling,
line endings. Each helper returns `Edit`s in the syntax of the source (YAML, JSON or a command line);
a helper returns None where it cannot edit without re-serialising (e.g. a YAML flow mapping), and the
rule then offers no fix rather than a damaging one.
"""

from __future__ import annotations

import json

from cfgopt.text.diagnostics import Edit
from cfgopt.text.source import Entry, Kind, Node, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_PLAIN_FIRST = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_./"
_PLAIN_REST = _PLAIN_FIRST + "0123456789+-"


def _plain_safe(text: str) -> bool:
    """Can `text` be written as a plain scalar: `^[A-Za-z_./][A-Za-z0-9_./+-]*$` (str methods; `$` also takes one
    `\n` at the end, as the pattern did)?"""
    body = text[:-1] if text.endswith("\n") else text
    return body[:1] != "" and body[0] in _PLAIN_FIRST and not body.strip(_PLAIN_REST)


_YAML11_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def render_value(source: Source, value: Any, like: Node | None = None) -> str:
    """Text for a scalar in this source's syntax, in the style of the value it replaces."""
    if source.kind == Kind.DEEPSPEED:
        return json.dumps(value)
    if source.kind == Kind.LF_CLI:
        import shlex  # command lines only

        return shlex.quote(str(value))  # a value with a blank or a `$` stays one literal word
    scalar = _yaml_scalar(value)
    if scalar is not None:
        return scalar
    text = str(value)
    quote = like.style if like is not None and like.style in ("'", '"') else ""
    if not quote and (not _plain_safe(text) or text.lower() in _YAML11_SPECIAL):
        quote = '"'
    if quote == "'":
        return "'" + text.replace("'", "''") + "'"
    if quote == '"':
        return json.dumps(text)
    return text


def _yaml_scalar(value: Any) -> str | None:
    """A boolean, null or number as YAML writes it; None for any other value (a string: its quoting depends)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return None


def render_key(source: Source, key: str) -> str:
    if source.kind == Kind.DEEPSPEED:
        return json.dumps(key)
    if source.kind == Kind.LF_CLI:
        return f"--{key}"
    return key


def replace_value(source: Source, entry: Entry, value: Any) -> list[Edit] | None:
    node = entry.node
    if node.entries is not None or node.items is not None:
        return None
    arg = entry.argument
    if source.kind == Kind.LF_CLI and arg is not None:
        if not arg.editable:
            return None  # the value is a variable's: writing a literal would drop it
        if arg.inline:  # the text after the `=`, as written: a quote open there is closed first
            if arg.value_at < 0:
                return None
            text = dotlist_value(value) if arg.dotlist else str(value)
            return [Edit(arg.value_at, arg.end, arg.quote + shell_word("=" + text))]
    if source.kind == Kind.LF_CLI and node.start == entry.key_start:
        # a bare flag (`--do_train`): append the value as a new token
        return [Edit(entry.key_end, entry.key_end, f" {render_value(source, value)}")]
    return [Edit(node.start, node.end, render_value(source, value, node))]


def rename_key(source: Source, entry: Entry, new_key: str) -> list[Edit]:
    arg = entry.argument
    if source.kind == Kind.LF_CLI and arg is not None:
        # the text before the value, as written (quotes and escapes included; a quote open at the `=` reopened):
        # offsets inside a quoted or escaped word are not the decoded word's
        key = shell_word(new_key if arg.dotlist else f"--{new_key}")
        if not arg.inline:
            return [Edit(arg.start, arg.end, key)]
        return [Edit(arg.start, arg.value_at, key + arg.quote)] if arg.value_at >= 0 else []
    return [Edit(entry.key_start, entry.key_end, render_key(source, new_key))]


def dotlist_value(value: Any) -> str:
    """A value as `key=value` after a YAML writes it: YAML text OmegaConf's `from_cli` reads back as `value`."""
    scalar = _yaml_scalar(value)
    if scalar is not None:
        return scalar
    import yaml  # the YAML loaders import it already

    from cfgopt.loaders.yaml_loader import OmegaConfParityLoader

    text = str(value)
    try:
        same = yaml.load(text, Loader=OmegaConfParityLoader) == text  # a safe loader
    except yaml.YAMLError:
        same = False
    return text if same else "'" + text.replace("'", "''") + "'"


def shell_word(text: str) -> str:
    import shlex  # command lines only

    return shlex.quote(text)


def _siblings(source: Source, entry: Entry) -> list[Entry]:
    parent_path = entry.path[:-1]
    parent = (
        source.root if not parent_path else (source.find(parent_path) or Entry("", 0, 0, Node(None, 0, 0), ())).node
    )
    return list(parent.entries or []) if parent is not None else []


def delete_entry(source: Source, entry: Entry) -> list[Edit] | None:
    """Remove a key and its value; in YAML and JSON, with its own line when it has one. A YAML entry's line goes
    whole, its end-of-line comment with it (`deepspeed: ds.json  # choices: [...]`: a note on a key that is gone,
    as ruff removes a statement's trailing comment with the statement); comments on lines of their own stay."""
    doc = source.document
    text = doc.text
    if source.kind == Kind.LF_CLI:
        start = entry.key_start
        end = max(entry.key_end, entry.node.end)
        # take the whitespace (and a line continuation) before the argument with it
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        if start > 1 and text[start - 1] == "\n" and text[start - 2] == "\\":
            start -= 2
            while start > 0 and text[start - 1] in " \t":
                start -= 1
        elif start > 2 and text[start - 2 : start] == "\r\n" and text[start - 3] == "\\":
            start -= 3
            while start > 0 and text[start - 1] in " \t":
                start -= 1
        return [Edit(start, end, "")]
    siblings = _siblings(source, entry)
    index = next((i for i, e in enumerate(siblings) if e is entry), None)
    if index is None:
        return None
    if source.kind == Kind.DEEPSPEED:
        return _delete_json_member(source, siblings, index)
    # YAML: only block mappings where the entry owns its lines
    line_start = doc.line_start(entry.key_start)
    if text[line_start : entry.key_start].strip(" ") not in ("", "-"):
        return None  # flow mapping, or several keys on one line
    if text[line_start : entry.key_start].strip(" ") == "-":
        return None  # first key of a sequence item: deleting would change the item's structure
    # to the end of the line of the value's last content: a block collection's end mark sits at the next key, past
    # the comment lines before it, which are not the entry's
    end = doc.line_end(max(_content_end(entry.node) - 1, entry.key_end))
    if index + 1 < len(siblings) and end > siblings[index + 1].key_start:
        return None
    return [Edit(line_start, end, "")]


def _content_end(node: Node) -> int:
    """Where a YAML value's own text ends: its last item's or entry's for a block collection (whose end mark is
    the next token's start), else its end."""
    if node.entries and node.style != "flow":
        return _content_end(node.entries[-1].node)
    if node.items and node.style != "flow":
        return _content_end(node.items[-1])
    return node.end


def delete_json_members(source: Source, entries: list[Entry]) -> list[Edit] | None:
    """Remove several members of one JSON object in one fix: each run of neighbours is removed as one member
    would be (a member's own edits take the comma it shares with the next, so runs never touch). None when
    they are not members of one object."""
    if not entries:
        return []
    siblings = _siblings(source, entries[0])
    gone = {id(e) for e in entries}
    if source.kind != Kind.DEEPSPEED or not gone <= {id(e) for e in siblings}:
        return None
    merged: list[Entry] = []  # the object's members with each run of removed ones as one (a stand-in)
    runs: list[int] = []  # indexes in `merged` of the stand-ins
    for i, entry in enumerate(siblings):
        if id(entry) in gone and i > 0 and id(siblings[i - 1]) in gone:
            first = merged[-1]
            merged[-1] = Entry(
                first.key, first.key_start, first.key_end, Node(None, first.node.start, entry.node.end), ()
            )
            continue
        merged.append(entry)
        if id(entry) in gone:
            runs.append(len(merged) - 1)
    return [e for index in runs for e in _delete_json_member(source, merged, index)]


def _delete_json_member(source: Source, siblings: list[Entry], index: int) -> list[Edit]:
    text = source.document.text
    doc = source.document
    entry = siblings[index]
    if index + 1 < len(siblings):
        nxt = siblings[index + 1]
        own_line = text[doc.line_start(entry.key_start) : entry.key_start].strip() == "" and (
            doc.line_start(nxt.key_start) > entry.key_start
        )
        start = doc.line_start(entry.key_start) if own_line else entry.key_start
        end = doc.line_start(nxt.key_start) if own_line else nxt.key_start
        return [Edit(start, end, "")]
    if index > 0:
        prev = siblings[index - 1]
        comma = text.index(",", prev.node.end)
        own_line = text[doc.line_start(entry.key_start) : entry.key_start].strip() == ""
        if own_line:
            return [
                Edit(comma, comma + 1, ""),
                Edit(
                    doc.line_start(entry.key_start),
                    doc.line_end(entry.node.end - 1)
                    if text[entry.node.end : doc.line_end(entry.node.end - 1)].strip() == ""
                    else entry.node.end,
                    "",
                ),
            ]
        return [Edit(comma, entry.node.end, "")]
    # the only member: leave `{}` with the container's own whitespace
    return [Edit(entry.key_start, entry.node.end, "")]


def insert_entry(source: Source, parent: Entry | None, key: str, value: Any) -> list[Edit] | None:
    """Add `key: value` as the last member of `parent` (None: the top level)."""
    doc = source.document
    text = doc.text
    node = source.root if parent is None else parent.node
    if node is None or node.entries is None or not node.entries:
        return None
    last = node.entries[-1]
    nl = doc.newline
    if source.kind == Kind.DEEPSPEED:
        indent_line = text[doc.line_start(last.key_start) : last.key_start]
        if indent_line.strip():
            return [
                Edit(
                    last.node.end,
                    last.node.end,
                    f", {render_key(source, key)}: {render_value(source, value)}",
                )
            ]
        return [
            Edit(
                last.node.end,
                last.node.end,
                f",{nl}{indent_line}{render_key(source, key)}: {render_value(source, value)}",
            )
        ]
    if source.kind == Kind.LF_CLI or node.style == "flow":
        return None
    indent = text[doc.line_start(last.key_start) : last.key_start]
    if indent.strip():
        return None
    end = doc.line_end(max(last.node.end - 1, last.key_end))
    if last.node.end > last.key_end and text[last.node.end - 1 : last.node.end] == "\n":
        end = last.node.end
    if end == 0 or text[end - 1] == "\n":
        return [Edit(end, end, f"{indent}{key}: {render_value(source, value)}{nl}")]
    # after a last line without a line break: start a new line, and still end without one, as the file did
    return [Edit(end, end, f"{nl}{indent}{key}: {render_value(source, value)}")]


def insert_top(source: Source, key: str, value: Any) -> list[Edit] | None:
    """Edits adding `key: value` at the top level: YAML via `insert_entry`; on a command line, a new
    `--key value` argument after the last one (on its own continuation line when the command uses them)."""
    if source.kind != Kind.LF_CLI:
        return insert_entry(source, None, key, value)
    if source.command.get("yaml"):  # after a YAML: a `key=value` override, where the release reads them
        if not source.command.get("dotlist"):
            return None
        end = source.command["end"]
        return [Edit(end, end, " " + shell_word(f"{key}={dotlist_value(value)}"))]
    entries = list(source.root.entries or []) if source.root is not None else []
    if not entries:
        return None
    doc, text = source.document, source.document.text
    last = entries[-1]
    end = max(last.key_end, last.node.end)
    indent = text[doc.line_start(last.key_start) : last.key_start]
    before = text[: doc.line_start(last.key_start)].rstrip("\r\n")
    arg = f"--{key} {render_value(source, value)}"
    if not indent.strip() and before.endswith("\\"):
        return [Edit(end, end, f" \\{doc.newline}{indent}{arg}")]
    return [Edit(end, end, f" {arg}")]
