"""The parsed view every rule works on: values as the consuming tool sees them, each with its span.

Loaders (`cfgopt.loaders`) build a `Source` from a `Document`. A mapping keeps its entries in file order,
duplicates included, so rules can both read the value the consumer will use (the last one) and point
at the exact key or value text when they report or fix something.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cfgopt.document import Document

KeyPath = tuple[Any, ...]


class Kind(str, Enum):
    LF_TRAIN = "llamafactory-train"
    LF_INFER = "llamafactory-infer"
    LF_CLI = "llamafactory-cli"  # a `llamafactory-cli train --key value ...` command line in a shell script
    DEEPSPEED = "deepspeed"
    LF_V1 = "llamafactory-v1"
    ACCELERATE = "accelerate"
    UNKNOWN = "unknown"

    @property
    def is_llamafactory(self) -> bool:
        return self in (Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI)


@dataclass
class Node:
    """A value and its text span [start, end) in the document."""

    value: Any
    start: int
    end: int
    entries: list[Entry] | None = None  # mappings: every key in file order, duplicates included
    items: list[Node] | None = None  # sequences
    style: str = ""  # scalars: '"', "'", "|", ">" or "" (plain); containers: "flow" or ""
    raw: str | None = None  # command-line values: the token as typed, before argparse converts it
    tagged: bool = False  # YAML: an explicit tag (`!!int 5`); start..end excludes it, and an anchor
    via_alias: bool = False  # YAML: reached through an alias (`*name`), so its text is shared with the anchor

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


@dataclass
class Entry:
    key: str
    key_start: int
    key_end: int
    node: Node
    path: KeyPath
    # False for YAML keys that resolve to something other than a string (`1:`, `yes:`): OmegaConf only
    # rejects repeated *string* keys, and keeps the last of repeated others.
    key_is_str: bool = True

    @property
    def dotted(self) -> str:
        return dotted(self.path)


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass
class ParseError:
    message: str
    offset: int = 0


@dataclass
class Source:
    document: Document
    kind: Kind
    root: Node | None = None
    error: ParseError | None = None
    # Command lines: where the command starts, the subcommand, and argparse-level failures.
    command: dict[str, Any] = field(default_factory=dict)

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
