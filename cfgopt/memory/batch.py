"""What one micro-batch holds (`Batch`): the stage and fine-tuning type, the micro-batch and accumulation, and the
tokens per sequence: cutoff_len where the stage packs, else the share of it the longest batch reaches (`fill`,
`DEFAULT_FILL`), PPO's prompt plus its response; the pairwise stages put two sequences per sample through the
graph. docs/memory.md, "Tokens per micro-batch".
"""

from __future__ import annotations

import math

from cfgopt.knowledge import methods
from cfgopt.knowledge.packing import packing_on
from cfgopt.memory import stages as memory_stages
from cfgopt.memory.config_values import MAX_COUNT, get, integer_at, short_repr
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_FILL = 1.0  # without packing: the peak batch is padded to cutoff_len (see docs/memory.md)


class Batch(Record):
    """What one micro-batch holds: the run's stage and finetuning type, sizes and sequence length. A record, not a
    frozen dataclass: `dataclasses` imports `inspect`, 4 ms of a lint that estimates memory."""

    stage: str
    ftype: str
    micro_batch: int
    accumulation: int
    packing: bool
    fill: float
    seq: int  # tokens per sequence in the peak micro-batch
    seqs: int  # sequences per micro-batch (two per sample for pairwise stages)

    @property
    def tokens(self) -> int:
        return self.seqs * self.seq


def unusable_sizes(config: dict[str, Any]) -> list[str]:
    """The sizes the estimate cannot count with, said as "`key` is VALUE, not ...": a micro-batch or cutoff_len
    that is not a positive integer up to MAX_COUNT (NaN, an infinity, `1e300`, a list...)."""
    out = []
    for key in ("per_device_train_batch_size", "cutoff_len"):
        number = integer_at(config, key)
        if number is None or number < 1:
            out.append(f"`{key}` is {short_repr(get(config, key))}, not a positive integer up to {MAX_COUNT}")
    return out


def batch_of(config: dict[str, Any], fill: float | None, unmodelled: list[str], notes: list[str]) -> Batch:
    stage = str(get(config, "stage"))
    ftype = str(get(config, "finetuning_type"))
    if ftype not in ("lora", "oft", "freeze", "full"):
        unmodelled.append(f"finetuning_type {ftype!r}")
        ftype = "lora"
    bsz, accum, cutoff = (
        integer_at(config, "per_device_train_batch_size"),
        integer_at(config, "gradient_accumulation_steps"),
        integer_at(config, "cutoff_len"),
    )
    unmodelled.extend(unusable_sizes(config))
    bsz, cutoff = max(1, bsz or 1), max(1, cutoff or 1)
    accum = accum if accum and accum > 0 else 1
    packing = packing_on(config) and methods.packing_applies(stage)
    if packing_on(config) and not packing:
        notes.append(f"stage {stage}: its data processor does not pack (`packing` counts for pt and sft only)")
    if packing:
        fill_used = 1.0
    else:
        fill_used = DEFAULT_FILL if fill is None else max(0.0, min(1.0, float(fill)))
        notes.append(
            f"packing off: sequences padded to {fill_used:.0%} of cutoff_len in the peak micro-batch"
            + (" (the longest batch reaches cutoff_len)" if fill is None else "")
        )
    if stage == "ppo":
        cutoff = methods.ppo_sequence(config, cutoff)
        notes.append(f"PPO: prompt (cutoff_len) + response (max_new_tokens) = {cutoff} tokens per sequence")
    seq = max(1, math.ceil(cutoff * fill_used))
    seqs = memory_stages.graph_sequences(stage, bsz)
    return Batch(stage, ftype, bsz, accum, packing, fill_used, seq, seqs)
