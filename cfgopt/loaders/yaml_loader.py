"""YAML as LLaMA-Factory 0.9.5 reads it: `OmegaConf.load` (omegaconf 2.4) over PyYAML's YAML 1.1 resolver.

Parity points (omegaconf/_yaml.py `get_yaml_loader`, checked against the real OmegaConf in
tests/loaders/test_loader_parity.py):
- YAML 1.1 scalars: `yes`/`no`/`on`/`off` are booleans, `0x10` is 16, `010` is 8;
- OmegaConf's float resolver: `1e-4` is a float (plain PyYAML would give the string '1e-4');
- timestamps are not resolved (`2024-01-01` stays a string);
- duplicate keys are an error ("found duplicate key"), reported here as a diagnostic on the second key;
- recursive aliases are an error, and expansion is capped as OmegaConf caps it: 10,000 nodes, keys and values,
  each alias and each `<<:` merge counted with what it expands to, and a 100x expansion past 1,000 nodes;
- `<<:` merges as OmegaConf applies them (a key written in the mapping wins, then the first merged mapping
  that has it); merged keys are entries of the parsed view (`Entry.merged`), spanning the `<<` and the alias.
- the pathlib tags OmegaConf's loader adds (`!!python/object/apply:pathlib.Path [out, run1]`, `PosixPath`,
  `WindowsPath` and Python 3.13's `pathlib._local` names) are constructed as it constructs them: a `Path` value
  (a Path key is refused, as OmegaConf refuses it), which LLaMA-Factory 0.9.4+ receives.
Other tags than the standard ones are never constructed: the SafeLoader base rejects them.
"""

from __future__ import annotations

import pathlib
import re

import yaml

from cfgopt.text.document import Document
from cfgopt.text.patterns import lazy
from cfgopt.text.source import Entry, Kind, Node, ParseError, Source
from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:  # libyaml: same marks (character offsets), much faster
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

MAX_EXPANDED_NODES = 10_000  # omegaconf 2.4 default (_DEFAULT_MAX_YAML_EXPANDED_NODES_VALUE)
MAX_EXPANSION_RATIO = 100  # omegaconf 2.4 _MAX_YAML_ALIAS_EXPANSION_RATIO, past _MIN_YAML_ALIAS_EXPANSION_RATIO_NODES
MIN_RATIO_NODES = 1_000

# PyYAML's resolver asks only `.match` of it, and tries it after its own float and int patterns (so a run meets it
# only for a value those refuse: `1e-4`): compiled then, not at every import.
_FLOAT = lazy(
    r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class OmegaConfParityLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader with OmegaConf's resolvers."""


OmegaConfParityLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
OmegaConfParityLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in OmegaConfParityLoader.yaml_implicit_resolvers.items()
}


def _path_constructor(cls: type[pathlib.PurePath]) -> Any:
    return lambda loader, node: cls(*loader.construct_sequence(node))


# omegaconf 2.4 _yaml.py `get_yaml_loader` (lines 283-308): a path from the sequence of its parts
for _module in ("pathlib", "pathlib._local"):
    for _name in ("Path", "PosixPath", "WindowsPath"):
        OmegaConfParityLoader.add_constructor(
            f"tag:yaml.org,2002:python/object/apply:{_module}.{_name}", _path_constructor(getattr(pathlib, _name))
        )

_STYLE = {"'": "'", '"': '"', "|": "|", ">": ">"}


class YamlStructureError(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def compose(text: str) -> yaml.Node | None:
    return yaml.compose(text, Loader=OmegaConfParityLoader)


def construct(node: yaml.Node) -> Any:
    loader = OmegaConfParityLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expansion_problem(root: yaml.Node) -> str | None:
    """OmegaConf 2.4's alias limits (`get_yaml_loader` `construct_document`), counted as it counts them: every
    key and value node, each alias and each `<<:` merge counted with what it expands to, memoised (linear in the
    document). Before merges were counted, a merge bomb passed and took minutes to walk."""
    expanded: dict[int, int] = {}

    def count(node: yaml.Node) -> int:
        if id(node) in expanded:
            return expanded[id(node)]
        total = 1
        children = node.value if isinstance(node, yaml.SequenceNode) else ()
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        for child in children:
            total += count(child)
            if total > MAX_EXPANDED_NODES:
                break
        expanded[id(node)] = total
        return total

    nodes = count(root)
    if nodes > MAX_EXPANDED_NODES:
        return f"YAML node expansion exceeds OmegaConf's limit of {MAX_EXPANDED_NODES} nodes (alias or merge bomb?)"
    unique = _unique_nodes(root)
    if nodes > MIN_RATIO_NODES and nodes > unique * MAX_EXPANSION_RATIO:
        return (
            f"YAML aliases expand the document from {unique} nodes to {nodes} nodes, over OmegaConf's limit of "
            f"{MAX_EXPANSION_RATIO}x (alias or merge bomb?)"
        )
    return None


def _unique_nodes(root: yaml.Node) -> int:
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    return len(seen)


def _mark_offset(doc: Document, mark: Any) -> int:
    # The mark's character index, not (line, column): the parser counts lines at every YAML line break.
    index = getattr(mark, "index", None)
    if isinstance(index, int):
        return max(0, min(index, len(doc.text)))
    return doc.offset(mark.line, mark.column)


class _SpanBuilder:
    """Walks the composed node graph into `Node`/`Entry` with spans, before construction mutates it."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.expanded = 0
        self.visiting: set[int] = set()
        self.built: set[int] = set()  # nodes met before: meeting one again is an alias

    def build(self, ynode: yaml.Node, path: tuple[Any, ...], alias_at: tuple[int, int] | None = None) -> Node:
        """`alias_at`: the span of the `*alias` token when this node is reached through an alias."""
        self.expanded += 1
        if self.expanded > MAX_EXPANDED_NODES:
            raise YamlStructureError(
                f"YAML node expansion exceeds OmegaConf's limit of {MAX_EXPANDED_NODES} nodes (alias or merge bomb?)",
                _mark_offset(self.doc, ynode.start_mark),
            )
        ident = id(ynode)
        if ident in self.visiting:
            raise YamlStructureError(
                "YAML recursive aliases are not supported (OmegaConf rejects them)",
                _mark_offset(self.doc, ynode.start_mark),
            )
        start = _mark_offset(self.doc, ynode.start_mark)
        end = _mark_offset(self.doc, ynode.end_mark)
        value_start, tagged = _skip_properties(self.doc.text, start, end)
        if alias_at is not None:  # `key: *name`: the alias token is this value's own text
            start, value_start, end = alias_at[0], alias_at[0], alias_at[1]
        via_alias = alias_at is not None or ident in self.built
        self.built.add(ident)
        if isinstance(ynode, yaml.ScalarNode):
            return Node(
                value=None,
                start=value_start,
                end=end,
                style=_STYLE.get(ynode.style or "", ""),
                tagged=tagged,
                via_alias=via_alias,
            )
        self.visiting.add(ident)
        try:
            if isinstance(ynode, yaml.SequenceNode):
                items = [self.build(child, (*path, i)) for i, child in enumerate(ynode.value)]
                for item in items:
                    item.via_alias = item.via_alias or via_alias
                node = Node(value=None, start=start, end=end, items=items, style="flow" if ynode.flow_style else "")
            else:
                node = self._mapping(ynode, path, start, end)
            node.tagged, node.via_alias = tagged, via_alias
            if via_alias:
                _mark_via_alias(node)
            return node
        finally:
            self.visiting.discard(ident)

    def _mapping(self, ynode: yaml.MappingNode, path: tuple[Any, ...], start: int, end: int) -> Node:
        entries: list[Entry] = []
        # OmegaConf's merge (its `flatten_mapping`): a key written in the mapping wins over a merged one, and
        # among merged mappings the first one that has a key wins.
        taken = {k.value for k, _ in ynode.value if k.tag != _MERGE_TAG and isinstance(k, yaml.ScalarNode)}
        for key_node, value_node in ynode.value:
            if key_node.tag == _MERGE_TAG:
                entries.extend(self._merged(key_node, value_node, path, taken))
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            key_start = _mark_offset(self.doc, key_node.start_mark)
            key_end = _mark_offset(self.doc, key_node.end_mark)
            alias_at = None
            if id(value_node) in self.built:
                m = _ALIAS_AFTER_KEY.match(self.doc.text, key_end)
                alias_at = (m.start(1), m.end(1)) if m else None
            child = self.build(value_node, (*path, key), alias_at)
            entries.append(
                Entry(
                    key=key,
                    key_start=key_start,
                    key_end=key_end,
                    node=child,
                    path=(*path, key),
                    key_is_str=getattr(key_node, "tag", "") == "tag:yaml.org,2002:str",
                )
            )
        return Node(value=None, start=start, end=end, entries=entries, style="flow" if ynode.flow_style else "")

    def _merged(self, key_node: yaml.Node, value_node: yaml.Node, path: tuple[Any, ...], taken: set) -> list[Entry]:
        """The entries a `<<: *base` (or `<<: [*a, *b]`) brings into a mapping, as OmegaConf applies them: each
        key spans the `<<` token and its value the `*alias` (or the merged value's own text), so that rules see
        them and report them at the merge; `Entry.merged` keeps every fix off them (fix_check)."""
        key_start = _mark_offset(self.doc, key_node.start_mark)
        key_end = _mark_offset(self.doc, key_node.end_mark)
        alias = _ALIAS_AFTER_KEY.match(self.doc.text, key_end)
        merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        out: list[Entry] = []
        for source in merged:
            if not isinstance(source, yaml.MappingNode):
                continue  # OmegaConf refuses it; the construction below reports it
            alias_at = (alias.start(1), alias.end(1)) if alias and len(merged) == 1 else None
            built = self.build(source, path, alias_at)
            for entry in built.entries or ():
                if entry.key in taken:
                    continue
                taken.add(entry.key)
                if alias_at is not None:  # a merged value's text is the alias's (as for `key: *alias`)
                    entry.node.start, entry.node.end = alias_at
                out.append(
                    Entry(entry.key, key_start, key_end, entry.node, (*path, entry.key), entry.key_is_str, merged=True)
                )
        return out


_MERGE_TAG = "tag:yaml.org,2002:merge"
_ALIAS_AFTER_KEY = lazy(r"[ \t]*:\s*(\*[^\s,\[\]{}]+)")
_PROPERTY = lazy(r"[&!][^\s,\[\]{}]*\s*")


def _skip_properties(text: str, start: int, end: int) -> tuple[int, bool]:
    """Where a node's own text starts after its anchor (`&a`) and tag (`!!int`), and whether it has a tag.
    PyYAML's node marks include those properties; an edit of the value must keep them."""
    tagged = False
    i = start
    for _ in range(2):  # at most one anchor and one tag
        if not text.startswith(("&", "!"), i, end):
            break  # no property here (most nodes): `_PROPERTY` starts with `[&!]`
        m = _PROPERTY.match(text, i, end)
        if m is None:
            break
        tagged = tagged or text[i] == "!"
        i = m.end()
    return (i if i <= end else start), tagged


def _mark_via_alias(node: Node) -> None:
    for entry in node.entries or ():
        entry.node.via_alias = True
        _mark_via_alias(entry.node)
    for item in node.items or ():
        item.via_alias = True
        _mark_via_alias(item)


def _attach_values(node: Node, value: Any) -> None:
    """Give every span node the constructed value (the one OmegaConf would hand to LLaMA-Factory)."""
    node.value = value
    if node.entries is not None and isinstance(value, dict):
        for entry in node.entries:
            if entry.key in value:
                _attach_values(entry.node, value[entry.key])
            elif _coerce_key(entry.key) in value:
                _attach_values(entry.node, value[_coerce_key(entry.key)])
    elif node.items is not None and isinstance(value, list):
        for item, v in zip(node.items, value, strict=False):
            _attach_values(item, v)


_INTERPOLATION = lazy(r"(?<!\\)\$\{")
_VALUE_TYPES = (bool, int, float, str, bytes, type(None), pathlib.PurePath)


def _interpolation_error(text: str) -> str | None:
    """OmegaConf parses `${...}` when a node is created: an unclosed one is a GrammarParseError."""
    for match in _INTERPOLATION.finditer(text):
        depth, i = 0, match.start()
        while i < len(text):
            if text.startswith("${", i):
                depth += 1
                i += 2
                continue
            if text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if depth != 0:
            return f"unclosed interpolation in {text[:60]!r} (GrammarParseError)"
    return None


def _omegaconf_refuses(value: Any, depth: int = 0) -> str | None:
    """What OmegaConf.create() rejects after PyYAML built the value: null keys, value types it cannot hold
    (`!!set`, `!!timestamp`), and interpolations its grammar cannot parse."""
    if depth > 200:
        return None
    if isinstance(value, dict):
        texts = {str(k) for k in value if isinstance(k, str)}
        for key, item in value.items():
            if key is None:
                return "a null key (KeyValidationError)"
            if isinstance(key, pathlib.PurePath):
                return f"a key of type {type(key).__name__} (KeyValidationError)"
            if is_int(key) and str(key) in texts:
                return f"conflicting integer and string keys {key} and '{key}' (KeyValidationError)"
            problem = _omegaconf_refuses(item, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, list):
        for item in value:
            problem = _omegaconf_refuses(item, depth + 1)
            if problem:
                return problem
        return None
    if not isinstance(value, _VALUE_TYPES):
        return f"a value of type {type(value).__name__} (UnsupportedValueType)"
    if isinstance(value, str) and "${" in value:
        return _interpolation_error(value)
    return None


def _coerce_key(key: str) -> Any:
    # Keys resolve like values (`1: x` has the int key 1); look them up the same way.
    try:
        return construct(compose(key))
    except Exception:  # noqa: BLE001 - a key that does not re-parse alone is looked up as text
        return key


def load_yaml(doc: Document, kind: Kind = Kind.UNKNOWN) -> Source:
    source = Source(document=doc, kind=kind)
    try:
        ynode = compose(doc.text)
        if ynode is None:  # empty or comments only: OmegaConf gives an empty config
            source.root = Node(value={}, start=0, end=len(doc.text), entries=[])
            return source
        root = _SpanBuilder(doc).build(ynode, ())  # first: it refuses recursive aliases, which `count` cannot
        too_big = _expansion_problem(ynode)
        if too_big:
            raise YamlStructureError(too_big, _mark_offset(doc, ynode.start_mark))
        value = construct(ynode)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        offset = _mark_offset(doc, mark) if mark is not None else 0
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        source.error = ParseError(f"invalid YAML: {problem or exc}", offset)
        return source
    except yaml.YAMLError as exc:
        source.error = ParseError(f"invalid YAML: {exc}".splitlines()[0], getattr(exc, "position", 0) or 0)
        return source
    except YamlStructureError as exc:
        source.error = ParseError(str(exc), exc.offset)
        return source
    except RecursionError:
        source.error = ParseError("invalid YAML: nested too deeply to read", 0)
        return source
    except Exception as exc:  # noqa: BLE001 - PyYAML itself crashes on some inputs (e.g. a lone `?`)
        source.error = ParseError(f"invalid YAML: PyYAML (and so OmegaConf) cannot read it ({type(exc).__name__})", 0)
        return source
    problem = _omegaconf_refuses(value)
    if problem:
        source.error = ParseError(f"OmegaConf cannot load this YAML: {problem}", 0)
        return source
    if value is None:  # an empty document: OmegaConf gives an empty config
        value = {}
        root.entries = root.entries if root.entries is not None else []
    elif isinstance(value, str):  # OmegaConf.create() reads a lone scalar as a key with no value
        value = {value: None}
    _attach_values(root, value)
    source.root = root
    return source
