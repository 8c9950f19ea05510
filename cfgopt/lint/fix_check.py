"""The fixer's last word on one file: would these edits damage it?

Independent of the rules (and so of `--select`/`--ignore`), a change is kept only when the file, re-read
the way its consumer reads it, (1) still loads, (2) repeats no key it did not repeat before (OmegaConf, which
LLaMA-Factory loads YAML with, refuses a duplicate key; so does the `deepspeed` launcher for JSON), and
(3) has every value equal to before except those the edits touch: parse before and after, compare.
A value reached through a YAML alias is never "touched" by an edit of its anchor, so a fix that would change
it through the anchor is refused. Edits are also refused inside text they must not change: a YAML alias or
tagged value, a heredoc body, a shell string that spans lines, or a word whose value the shell computes.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from pathlib import Path

from cfgopt.text.diagnostics import Edit
from cfgopt.text.document import Document
from cfgopt.text.source import Entry, Node, Source, dotted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.text.source import KeyPath


class Parsed:
    """A text's sources and their keys, read back to check a fix (`parse`). A plain class, not a dataclass
    (`dataclasses` imports `inspect`: 6 ms of a `cfgopt fix` under -X importtime), and no record: `error` is set
    as the sources are read."""

    def __init__(
        self,
        sources: list[Source],
        error: str | None,
        values: dict[KeyPath, Any],
        duplicates: set[KeyPath],
        entries: list[tuple[KeyPath, Entry]],
    ) -> None:
        self.sources = sources
        self.error = error
        self.values = values  # every leaf (and empty container) by path; scripts: (command index, *path)
        self.duplicates = duplicates
        self.entries = entries


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, list[tuple[int, int]]]:
    """The new text and, for each edit in offset order, the span of its replacement in the new text."""
    out: list[str] = []
    images: list[tuple[int, int]] = []
    last, size = 0, 0
    for edit in sorted(edits):
        out.append(text[last : edit.start])
        size += edit.start - last
        out.append(edit.text)
        images.append((size, size + len(edit.text)))
        size += len(edit.text)
        last = edit.end
    out.append(text[last:])
    return "".join(out), images


def parse(path: Path, text: str, loader: str, lf_schema: Any = None) -> Parsed:
    from cfgopt.loaders.json_loader import load_json
    from cfgopt.loaders.yaml_loader import load_yaml

    doc = Document(path=path, text=text)
    if loader == "script":
        from cfgopt.loaders.launch import find_commands  # the shell lexer: for scripts only

        sources = find_commands(doc, lf_schema)
    elif loader == "requirements":  # the pins, one entry per package (an edit adds or changes pins)
        from cfgopt.loaders.requirement_files import load_requirements

        found = load_requirements(doc)
        sources = [found] if found is not None else []
    else:
        sources = [load_json(doc) if loader == "json" else load_yaml(doc)]
    parsed = Parsed(sources, None, {}, set(), [])
    for index, src in enumerate(sources):
        if src.error is not None:
            parsed.error = src.error.message
            continue
        prefix: KeyPath = (index,) if loader == "script" else ()
        if src.root is not None:
            _flatten(src.root, prefix, parsed)
            if loader == "script" and parsed.values.get(prefix) == {}:
                del parsed.values[prefix]  # a launch without arguments: one added to it is named by its own path
    return parsed


def _flatten(node: Node, path: KeyPath, parsed: Parsed) -> None:
    if node.entries is not None:
        seen: set[str] = set()
        if not node.entries:
            parsed.values[path] = {}
        for entry in node.entries:
            child = (*path, entry.key)
            if entry.key in seen and entry.key_is_str:
                parsed.duplicates.add(child)
            seen.add(entry.key)
            parsed.entries.append((child, entry))
            _flatten(entry.node, child, parsed)
    elif node.items is not None:
        if not node.items:
            parsed.values[path] = []
        for i, item in enumerate(node.items):
            _flatten(item, (*path, i), parsed)
    else:
        parsed.values[path] = node.value


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _touches(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    for s, e in spans:
        if s == e:
            if start < s < end or start == s == end:
                return True
        elif s < end and start < e:
            return True
    return False


class _Spans:
    """Edit spans sorted, to find those touching a region without looking at every one (a sweep script's fix
    has thousands of edits and thousands of entries: comparing every pair was quadratic)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = sorted(spans)
        self.reach: list[int] = []  # the furthest end of the spans so far: non-decreasing, so bisectable
        furthest = -1
        for _, e in self.spans:
            furthest = max(furthest, e)
            self.reach.append(furthest)

    def touching(self, start: int, end: int) -> list[tuple[int, int]]:
        """The spans `_touches` says touch [start, end)."""
        out = []
        for j in range(bisect.bisect_left(self.reach, start), len(self.spans)):
            s, e = self.spans[j]
            if s > end:
                break
            if _touches(start, end, [(s, e)]):
                out.append((s, e))
        return out


def _named(parsed: Parsed, spans: list[tuple[int, int]]) -> set[KeyPath]:
    """Paths of the entries an edit touches (its key or value text), the innermost ones: an edit inside one
    child names that child, not its whole parent. Entries of an anchored mapping that an alias repeats are
    never named."""
    out: set[KeyPath] = set()
    # An entry whose key text also belongs to another entry sits in an anchored mapping that an alias
    # repeats: an edit there changes every copy, so it names none of them.
    shared = Counter(entry.key_start for _, entry in parsed.entries)
    edits = _Spans(spans)
    for path, entry in parsed.entries:
        if shared[entry.key_start] > 1:
            continue
        mine = edits.touching(min(entry.key_start, entry.node.start), max(entry.key_end, entry.node.end))
        if not mine:
            continue
        children = sorted(
            (min(c.key_start, c.node.start), max(c.key_end, c.node.end)) for c in entry.node.entries or ()
        )
        starts = [c[0] for c in children]
        inside_child = 0
        for s, e in mine:
            i = bisect.bisect_right(starts, s)
            inside_child += any(cs <= s and e <= ce for cs, ce in children[max(0, i - 4) : i])
        if inside_child < len(mine):
            out.add(path)
    return out


def protected_spans(sources: list[Source]) -> list[tuple[int, int, int, str]]:
    """Text an edit must not change, as (owner start, start, end, why): an edit may remove it whole with its
    key (from the owner's start on), never edit inside it or replace it."""
    out: list[tuple[int, int, int, str]] = []
    for src in sources:
        if src.root is None:
            continue
        text = src.document.text
        stack: list[tuple[int, Node]] = [(src.root.start, src.root)]
        while stack:
            owner, node = stack.pop()
            if node.via_alias and text.startswith("*", node.start):
                out.append((owner, node.start, node.end, "the value is a YAML alias (edit its anchor by hand)"))
            elif node.tagged:
                out.append((owner, node.start, node.end, "the value has an explicit YAML tag"))
            for entry in node.entries or ():
                if entry.merged:  # never editable, not even removable with its key: the text is the merge's
                    why = "the key comes from a YAML merge (`<<:`); edit the merged mapping by hand"
                    out.append((-1, entry.key_start, max(entry.key_end, entry.node.end), why))
            stack.extend((e.key_start, e.node) for e in node.entries or () if not e.merged)
            stack.extend((item.start, item) for item in node.items or ())
        for entry in src.root.entries or ():
            if entry.argument is not None and entry.argument.computed:
                why = "the shell computes this argument when the script runs (a variable's words)"
                out.append((-1, entry.argument.start, max(entry.argument.end, entry.node.end), why))
            elif entry.argument is not None and not entry.argument.editable and entry.node.start != entry.key_start:
                why = "the shell computes this value when the script runs"
                out.append((entry.key_start, entry.node.start, entry.node.end, why))
    return out


def damage(
    path: Path,
    before: str,
    edits: list[Edit],
    loader: str,
    lf_schema: Any = None,
) -> tuple[str, str | None]:
    """The edited text, and why it damages the file (None: it does not)."""
    after, images = apply_edits(before, edits)
    if after == before:
        return after, "the fix changes nothing"
    old = parse(path, before, loader, lf_schema)
    why = _refused_text(before, edits, old, loader)
    if why:
        return after, why
    if old.error:  # a removed comment or line could make it parse as something its author never wrote
        return after, "the file does not parse; cfgopt applies no fix to a file it cannot read"
    new = parse(path, after, loader, lf_schema)
    if new.error:
        return after, f"the fixed file would not load: {new.error}"
    repeated = new.duplicates - old.duplicates
    if repeated:
        return after, f"the fixed file would repeat the key `{dotted(_strip(sorted(repeated, key=str)[0], loader))}`"
    if len(new.sources) != len(old.sources):
        return after, "the fix would change which commands the script runs"
    named = _named(old, [(e.start, e.end) for e in edits]) | _named(new, images)
    for key in sorted(set(old.values) | set(new.values), key=str):
        if any(key[:length] in named for length in range(len(key) + 1)):
            continue
        if key not in old.values or key not in new.values or not _same(old.values[key], new.values[key]):
            return after, f"the fix would also change `{dotted(_strip(key, loader))}`, which no fix names"
    return after, None


def _strip(key: KeyPath, loader: str) -> KeyPath:
    return key[1:] if loader == "script" and key else key


def _refused_text(before: str, edits: list[Edit], parsed: Parsed, loader: str) -> str | None:
    spans = [(e.start, e.end) for e in edits]
    sorted_spans = _Spans(spans)
    for owner, start, end, why in protected_spans(parsed.sources):
        for s, e in sorted_spans.touching(start, end):
            if not (s <= owner and e >= end):
                return why
    if loader == "script":
        from cfgopt.loaders import shell

        layout = shell.layout(before)
        if any(layout.overlaps_opaque(s, e) for s, e in spans):
            return "the edit falls inside a heredoc or a multi-line string"
    return None
