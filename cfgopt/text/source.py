"""The parsed view every rule works on: values as the consuming tool sees them, each with its span.

Loaders (`cfgopt.loaders`) build a `Source` from a `Document`. A mapping keeps its entries in file order,
duplicates included, so rules can both read the value the consumer will use (the last one) and point
at the exact key or value text when they report or fix something.
"""

from __future__ import annotations

from enum import Enum

from cfgopt.text.document import Document
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    KeyPath = tuple[Any, ...]  # a value's place: keys and list indices from the document's root


class Kind(str, Enum):
    LF_TRAIN = "llamafactory-train"
    LF_INFER = "llamafactory-infer"
    LF_CLI = "llamafactory-cli"  # a `llamafactory-cli train --key value ...` command line in a shell script
    DEEPSPEED = "deepspeed"
    LF_V1 = "llamafactory-v1"
    ACCELERATE = "accelerate"
    # requirements*.txt, pyproject.toml, uv.lock, poetry.lock, setup.py, setup.cfg, environment.yml: the packages
    # the job installs
    REQUIREMENTS = "requirements"
    UNKNOWN = "unknown"

    @property
    def is_llamafactory(self) -> bool:
        return self in (Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI)


class Node:
    """A value and its text span [start, end) in the document."""

    __slots__ = ("end", "entries", "items", "raw", "start", "style", "tagged", "value", "via_alias")

    def __init__(
        self,
        value: Any,
        start: int,
        end: int,
        entries: list[Entry] | None = None,  # mappings: every key in file order, duplicates included
        items: list[Node] | None = None,  # sequences
        style: str = "",  # scalars: '"', "'", "|", ">" or "" (plain); containers: "flow" or ""
        raw: str | None = None,  # command-line values: the token as typed, before argparse converts it
        tagged: bool = False,  # YAML: an explicit tag (`!!int 5`); start..end excludes it, and an anchor
        via_alias: bool = False,  # YAML: reached through an alias (`*name`): its text is shared with the anchor
    ) -> None:
        self.value, self.start, self.end = value, start, end
        self.entries, self.items, self.style, self.raw = entries, items, style, raw
        self.tagged, self.via_alias = tagged, via_alias

    def __repr__(self) -> str:
        return f"Node({self.value!r}, {self.start}, {self.end})"

    def get(self, key: str) -> Entry | None:
        """The entry the consumer uses for `key`: the last one when a key is repeated."""
        found = None
        for entry in self.entries or ():
            if entry.key == key:
                found = entry
        return found

    @property
    def is_mapping(self) -> bool:
        return self.entries is not None


class Argument(Record):
    """A command-line entry as its words are written in the script. Offsets inside a word hold only where the
    word is `verbatim` (no quote, escape or expansion: `"--flash_attn=Fa"` decodes to a shorter text), so an
    edit of any other word replaces the whole word (`cfgopt.loaders.edits`)."""

    text: str  # the word holding the key (`--key`, `--key=value`, `key=value`) as bash passes it
    start: int  # ... and its span as written, quotes and escapes included
    end: int
    verbatim: bool
    inline: bool  # the value is in the key's word (`--key=value`, `key=value`)
    dotlist: bool  # `key=value` after a YAML, read by `OmegaConf.from_cli` (a YAML value), not by argparse
    editable: bool = True  # False: the value is a variable's (`--template $T`): a fix would drop the variable
    value_at: int = -1  # inline: where the `=` before the value is written (-1: unknown), and the quote it is in
    quote: str = ""
    computed: bool = False  # the key's word is a variable's (`$OPTS` split into `--bf16 ...`): no edit may touch it


class Entry:
    """A mapping entry: its key, the key's span, the value's node, and the path from the root."""

    __slots__ = ("argument", "key", "key_end", "key_is_str", "key_start", "merged", "node", "path")

    def __init__(
        self,
        key: str,
        key_start: int,
        key_end: int,
        node: Node,
        path: KeyPath,
        # False for YAML keys that resolve to something other than a string (`1:`, `yes:`): OmegaConf only
        # rejects repeated *string* keys, and keeps the last of repeated others.
        key_is_str: bool = True,
        # YAML: brought in by a merge (`<<: *base`, as OmegaConf applies it): the key spans the `<<` token, the
        # value the alias; no fix edits it (the text is the merged mapping's).
        merged: bool = False,
    ) -> None:
        self.key, self.key_start, self.key_end, self.node, self.path = key, key_start, key_end, node, path
        self.key_is_str = key_is_str
        self.merged = merged
        self.argument: Argument | None = None  # command lines: the words as written

    def __repr__(self) -> str:
        return f"Entry({self.key!r}, {self.key_start}, {self.key_end}, {self.node!r})"

    @property
    def dotted(self) -> str:
        return dotted(self.path)


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class ParseError(Record):
    message: str
    offset: int = 0


class Source:
    """One parsed config: the document, what kind of config it is, its root node or why it did not parse."""

    def __init__(
        self,
        document: Document,
        kind: Kind,
        root: Node | None = None,
        error: ParseError | None = None,
        command: dict[str, Any] | None = None,
    ) -> None:
        self.document, self.kind, self.root, self.error = document, kind, root, error
        # Command lines: where the command starts, the subcommand, and argparse-level failures.
        self.command: dict[str, Any] = {} if command is None else command

    def __repr__(self) -> str:
        return f"Source({self.document.path}, {self.kind.value})"

    @property
    def data(self) -> Any:
        return None if self.root is None else self.root.value

    def find(self, path: KeyPath) -> Entry | None:
        node = self.root
        entry = None
        for part in path:
            if node is None or not node.is_mapping:
                return None
            entry = node.get(part)
            if entry is None:
                return None
            node = entry.node
        return entry

    def walk(self) -> list[Entry]:
        """Every mapping entry, depth first, in file order."""
        out: list[Entry] = []

        def visit(node: Node) -> None:
            for entry in node.entries or ():
                out.append(entry)
                visit(entry.node)
            for item in node.items or ():
                visit(item)

        if self.root is not None:
            visit(self.root)
        return out
