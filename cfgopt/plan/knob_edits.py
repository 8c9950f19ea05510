"""Knob changes written into a LLaMA-Factory YAML (or `llamafactory-cli` line) as span edits: the one writer of
the speed plan's fix (`cfgopt.plan.planner.plan_edits`) and of `cfgopt tune`'s winner (`cfgopt.tune.winner`).

Values are replaced where they stand and new keys added at the end of the top level, so comments, order and
quoting stay as they are; a precision switch the change turns from one key to another (`fp16: true` off,
`bf16: true` on) is renamed in place, one edit. On the lint path (the planner): plain functions, a record (`Record`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from cfgopt.knowledge.deepspeed_plan import dropped_below_stage3
from cfgopt.loaders import edits
from cfgopt.text.diagnostics import Edit
from cfgopt.text.record import Record
from cfgopt.text.source import Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PRECISION_SWITCHES = ("fp16", "bf16", "pure_bf16")


class KnobEdits(Record):
    edits: list[Edit]  # sorted; insertions at one offset merged, so no two edits touch
    failed: list[str]  # keys that cannot be edited in place (nothing for them is among `edits`)
    renamed: dict[str, str]  # old key -> new key: the old key is gone, which LLaMA-Factory reads as off


def knob_edits(source: Source, changes: dict[str, Any], remove: Iterable[str] = ()) -> KnobEdits | None:
    """The edits setting every key of `changes` and deleting every entry of the keys in `remove`; None when the
    file's top level is no mapping. A key that cannot be edited in place is listed in `failed`, the rest edited."""
    root = source.root
    if root is None or not root.is_mapping:
        return None
    out: list[Edit] = []
    failed: list[str] = []
    changes = dict(changes)
    renamed = dict(renamed_switches(root, changes))
    for old, new in renamed.items():  # `fp16: true` -> `bf16: true`, one edit
        out += edits.rename_key(source, root.get(old), new)
        del changes[old], changes[new]
    for key, value in changes.items():
        entry = root.get(key)
        made = edits.replace_value(source, entry, value) if entry is not None else edits.insert_top(source, key, value)
        if not made:
            failed.append(key)
            continue
        out += made
    for key in remove:
        for entry in [e for e in root.entries or () if e.key == key]:
            made = edits.delete_entry(source, entry)
            if not made:
                failed.append(key)
                continue
            out += made
    return KnobEdits(merge_inserts(out), list(dict.fromkeys(failed)), renamed)


def renamed_switches(root: Any, changes: dict[str, Any]) -> list[tuple[str, str]]:
    """Precision switches the changes turn from one key to another (`fp16: true` off, `bf16: true` on) where the
    YAML has the old key set to true and not the new one: renaming the key says it in one edit, where it stood."""
    for old, new in itertools.permutations(PRECISION_SWITCHES, 2):
        entry = root.get(old)
        switched = changes.get(old) is False and changes.get(new) is True and root.get(new) is None
        if switched and entry is not None and entry.node.value is True:
            return [(old, new)]
    return []


def merge_inserts(found: list[Edit]) -> list[Edit]:
    """Insertions at one offset become one edit (in the order made), so no two edits of the fix touch."""
    merged: dict[int, Edit] = {}
    out: list[Edit] = []
    for e in found:
        if e.start == e.end and e.start in merged:
            first = merged[e.start]
            text = e.text.lstrip("\r\n") if first.text.endswith("\n") else e.text
            merged[e.start] = Edit(first.start, first.end, first.text + text)
        elif e.start == e.end:
            merged[e.start] = e
        else:
            out.append(e)
    return sorted(out + list(merged.values()), key=lambda e: (e.start, e.end))


def stage_edits(source: Source, stage: int) -> list[Edit] | None:
    """The edits writing ZeRO `stage` into a DeepSpeed JSON (the speed plan's lower stage): `stage`'s value
    replaced, the keys a stage below 3 never reads removed (`cfgopt.knowledge.deepspeed_plan.at_stage`, as judged); None
    when the file has no literal `zero_optimization.stage` to replace."""
    zero = source.find(("zero_optimization",))
    entry = source.find(("zero_optimization", "stage"))
    if zero is None or entry is None or not zero.node.is_mapping or type(entry.node.value) is not int:
        return None
    members = list(zero.node.entries or ())
    dropped = dropped_below_stage3(e.key for e in members) if stage < 3 else []
    made = edits.replace_value(source, entry, stage)
    removed = edits.delete_json_members(source, [e for e in members if e.key in dropped])
    return None if made is None or removed is None else sorted(made + removed, key=lambda e: (e.start, e.end))
