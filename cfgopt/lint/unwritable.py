"""Why a finding has no fix where the same job written in block style has one.

cfgopt's span edits add and remove keys only in block mappings: `cfgopt.loaders.edits` makes no edit that adds or
removes a key of a flow mapping (`{stage: sft, do_train: true}`), so a one-line flow document gets no removal and no
speed plan, and the keys a `<<:` merge brings in are the merged mapping's text, edited by no fix. Rather than leave
such a finding without a word, the fixer asks what the job would get in block style (`block_text`: the YAML as its
consumer loads it, merges applied, written one key per line), lints the job again with that text in place of the
file (nothing is written), and each finding that gets a fix there and has none here is said with that fix and why
(`explain`; `cfgopt fix` prints "not fixed: ..."). Only files holding a flow mapping or a merge (`styled`) pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from cfgopt.text.diagnostics import Diagnostic
from cfgopt.text.document import Document, real_path
from cfgopt.text.record import Record
from cfgopt.text.source import Entry, Node, Source

FLOW_STYLE = (
    "the YAML is written in flow style (`{key: value, ...}`), and cfgopt adds and removes keys in block style only "
    "(one `key: value` per line): edit it by hand, or rewrite the mapping in block style"
)
MERGED_KEY = "the key comes from a YAML merge (`<<:`); edit the merged mapping by hand"
CHANGES_MERGED = "it would change a key a YAML merge (`<<:`) brings in; edit the merged mapping by hand"


class Unoffered(Record):
    diagnostic: Diagnostic  # the finding as it stands: no fix
    description: str  # the fix the job written in block style gets
    why: str


def _entries(node: Node | None) -> Iterator[Entry]:
    """Every mapping entry under `node` (merged entries are not descended into: their values are the merged
    mapping's)."""
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        for entry in current.entries or ():
            yield entry
            if not entry.merged:
                stack.append(entry.node)
        stack.extend(current.items or ())


def _flow_mapping(node: Node | None) -> bool:
    return node is not None and node.entries is not None and node.style == "flow"


def _has_flow_mapping(source: Source) -> bool:
    return _flow_mapping(source.root) or any(_flow_mapping(entry.node) for entry in _entries(source.root))


def styled(source: Source) -> bool:
    """Does the YAML hold a flow mapping or a merge key, where span edits cannot add or remove keys?"""
    return _has_flow_mapping(source) or any(entry.merged for entry in _entries(source.root))


def block_text(path: Path, text: str) -> str | None:
    """The YAML `text` written in block style, as its consumer loads it (merges applied; comments, tags and
    anchors gone: it is only linted); None when it does not load as a mapping."""
    import yaml

    from cfgopt.loaders.yaml_loader import load_yaml

    source = load_yaml(Document(path, text))
    if source.error is not None or not isinstance(source.data, dict):
        return None
    try:
        return yaml.safe_dump(source.data, sort_keys=False, default_flow_style=False, allow_unicode=True)
    except yaml.YAMLError:  # a value safe_dump cannot write: no comparison, no line
        return None


def explain(
    remaining: list[Diagnostic],
    in_block_style: list[Diagnostic],
    texts: dict[Path, str],
    applies: Callable[[Diagnostic], bool],
) -> list[Unoffered]:
    """The findings of the files of `texts` (real path -> the text as it stands) with no fix whose twin (same file,
    rule and key) in the job linted in block style has a fix `cfgopt fix` would apply (`applies`)."""
    offered: dict[tuple[Path, str, str], str] = {}
    for d in in_block_style:
        if d.fix is not None and applies(d):
            offered.setdefault((real_path(d.path), d.code, d.key), d.fix.description)
    out: list[Unoffered] = []
    sources: dict[Path, Source] = {}
    for d in remaining:
        key = real_path(d.path)
        description = offered.get((key, d.code, d.key))
        if d.fix is not None or key not in texts or description is None:
            continue
        if key not in sources:
            from cfgopt.loaders.yaml_loader import load_yaml

            sources[key] = load_yaml(Document(key, texts[key]))
        out.append(Unoffered(d, description, _why(sources[key], d.key)))
    return out


def _why(source: Source, dotted: str) -> str:
    """The finding's key brought in by a merge; else a flow mapping in the file; else a merge the fix would change."""
    if any(entry.merged and entry.dotted == dotted for entry in _entries(source.root)):
        return MERGED_KEY
    return FLOW_STYLE if _has_flow_mapping(source) else CHANGES_MERGED
