"""DeepSpeed JSON as the HF Trainer path reads it: strict `json.load` (accelerate's `HfDeepSpeedConfig`).

So comments, trailing commas and a UTF-8 BOM are errors (json.loads raises "Unexpected UTF-8 BOM"), and
a repeated key keeps its last value, while the `deepspeed` launcher (hjson with
`dict_raise_error_on_duplicate_keys`) rejects it: duplicates are kept here as entries for a rule to report.
"""

from __future__ import annotations

import json
from json.decoder import scanstring  # type: ignore[attr-defined]
from json.scanner import NUMBER_RE  # type: ignore[attr-defined]

from cfgopt.text.document import Document
from cfgopt.text.patterns import lazy
from cfgopt.text.source import Entry, Kind, Node, ParseError, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WS = " \t\n\r"
# What a JSON error that looks like a comment or a trailing comma adds; which reader rejects them is CFG001's to say
# (the HF Trainer's json.load does; DeepSpeed's own loader, hjson, does not)
COMMENTS_HINT = "comments and trailing commas are not JSON"
_LONG_INTEGER = lazy(r"-?\d{4301,}")  # beyond sys.get_int_max_str_digits()'s default of 4300
_CONSTANTS = {
    "true": True,
    "false": False,
    "null": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


class _SpanParser:
    """A second pass over text that json.loads already accepted, recording spans. Recursion depth is
    bounded by the caller catching RecursionError."""

    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, i: int) -> int:
        text = self.text
        while i < len(text) and text[i] in _WS:
            i += 1
        return i

    def value(self, i: int, path: tuple[Any, ...]) -> tuple[Node, int]:
        text = self.text
        i = self.skip(i)
        ch = text[i]
        if ch == "{":
            entries: list[Entry] = []
            result: dict[str, Any] = {}
            j = self.skip(i + 1)
            if text[j] == "}":
                return Node(value=result, start=i, end=j + 1, entries=entries), j + 1
            while True:
                j = self.skip(j)
                key, kend = scanstring(text, j + 1, True)  # j is the key's opening quote
                key_start = j
                colon = self.skip(kend)
                child, j = self.value(colon + 1, (*path, key))
                entries.append(Entry(key=key, key_start=key_start, key_end=kend, node=child, path=(*path, key)))
                result[key] = child.value
                j = self.skip(j)
                if text[j] == ",":
                    j += 1
                    continue
                return Node(value=result, start=i, end=j + 1, entries=entries), j + 1
        if ch == "[":
            items: list[Node] = []
            j = self.skip(i + 1)
            if text[j] == "]":
                return Node(value=[], start=i, end=j + 1, items=items), j + 1
            while True:
                child, j = self.value(j, (*path, len(items)))
                items.append(child)
                j = self.skip(j)
                if text[j] == ",":
                    j += 1
                    continue
                return Node(value=[n.value for n in items], start=i, end=j + 1, items=items), j + 1
        if ch == '"':
            s, end = scanstring(text, i + 1, True)
            return Node(value=s, start=i, end=end, style='"'), end
        for word, const in _CONSTANTS.items():
            if text.startswith(word, i):
                return Node(value=const, start=i, end=i + len(word)), i + len(word)
        m = NUMBER_RE.match(text, i)
        assert m is not None  # json.loads accepted the text
        integer, frac, exp = m.groups()
        num = float(integer + (frac or "") + (exp or "")) if (frac or exp) else int(integer)
        return Node(value=num, start=i, end=m.end()), m.end()


def _parse_with_spans(text: str) -> Node:
    return _SpanParser(text).value(0, ())[0]


def load_json(doc: Document, kind: Kind = Kind.UNKNOWN) -> Source:
    doc.syntax = "json"  # lines end at JSON's breaks only, whatever the file is named
    source = Source(document=doc, kind=kind)
    if doc.has_bom:
        source.error = ParseError(
            "invalid JSON for the HF Trainer: the file starts with a UTF-8 BOM, which json.load rejects "
            '("Unexpected UTF-8 BOM"); save it without the BOM',
            0,
        )
        return source
    try:
        json.loads(doc.text)
    except json.JSONDecodeError as exc:
        hint = ""
        if exc.msg.startswith("Expecting property name") or "//" in doc.text or "/*" in doc.text:
            hint = f" ({COMMENTS_HINT})"
        source.error = ParseError(f"invalid JSON: {exc.msg}{hint}", exc.pos)
        return source
    except RecursionError:
        source.error = ParseError("invalid JSON: nested too deeply to read", 0)
        return source
    except ValueError as exc:  # Python's limit on integer digits: json.load raises the same ValueError
        long_number = _LONG_INTEGER.search(doc.text)
        limit = str(exc).split(":", 1)[0]  # "Exceeds the limit (4300 digits) for integer string conversion"
        source.error = ParseError(
            f"invalid JSON for the HF Trainer: an integer too long for json.load (ValueError: {limit})",
            long_number.start() if long_number else 0,
        )
        return source
    try:
        source.root = _parse_with_spans(doc.text)
    except RecursionError:
        source.error = ParseError("invalid JSON: nested too deeply to read", 0)
    return source
