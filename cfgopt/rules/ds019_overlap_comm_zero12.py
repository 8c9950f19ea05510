from __future__ import annotations

import math
from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_block, zero_stage
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind
from cfgopt.text.user_text import as_float

DEFAULT_BUCKET = 5e8  # DeepSpeedZeroConfig reduce_bucket_size / allgather_bucket_size


class OverlapCommZero12(Rule):
    code = "DS019"
    name = "overlap-comm-zero12"
    severity = Severity.INFO
    default_on = False
    opt_in_because = (
        "contested: the overlap can hide communication, and users report NaN grad norms and large bucket "
        "buffers; not measured here"
    )
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})
    summary = "`overlap_comm: true` at ZeRO stage 1/2: large bucket buffers, NaN reports"
    why = (
        "Confidence: contested. Overlapping the gradient reduction with the backward pass can hide communication, "
        "but at stages 1/2 it allocates about 4.5 x (reduce_bucket_size + allgather_bucket_size) 16-bit elements "
        "(HF DeepSpeed guide: 9 GB at the 5e8 defaults) and has user reports of NaN `grad_norm` / zero loss with "
        "ZeRO-2 (DeepSpeed #5347, #7188). LLaMA-Factory ships `overlap_comm: false` for every stage; DeepSpeed's "
        "default is false below stage 3. Whether it pays depends on the interconnect and model: settle it with "
        "an A/B of tokens/s and loss/grad-norm parity over a few hundred steps on the target."
    )
    fails_when = "Never at start-up; the risk is memory (bucket buffers) and the reported NaN gradients."
    evidence = (
        "deepspeed 0.19.8 runtime/zero/config.py:138, :384-386 (`overlap_comm` default True only for stage 3)",
        "https://github.com/deepspeedai/DeepSpeed/issues/5347, https://github.com/deepspeedai/DeepSpeed/issues/7188",
        "HF transformers DeepSpeed guide (overlap_comm: 4.5x the bucket sizes; 5e8 buckets -> ~9 GB); "
        "llamafactory 0.9.5 examples/deepspeed/ds_z2_config.json (`overlap_comm: false`)",
    )
    example = '"stage": 2, "overlap_comm": true   ->  "overlap_comm": false (or A/B it)'
    fix_safety = "Unsafe: turning the overlap off changes speed and memory."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        stage = zero_stage(src)
        entry = zero.node.get("overlap_comm") if zero is not None else None
        if entry is None or entry.node.value is not True or stage not in (1, 2):
            return
        sizes = []
        for key in ("reduce_bucket_size", "allgather_bucket_size"):
            e = zero.node.get(key)
            value = DEFAULT_BUCKET if e is None else as_float(e.node.value)
            sizes.append(value)
        memory = ""
        if all(v is not None and math.isfinite(v) for v in sizes):  # no size to say for NaN or 1e400 (DS005's)
            gb = 4.5 * sum(sizes) * 2 / 1e9
            target = ctx.settings.target
            share = f", {gb / target.memory_gib:.0%} of {a(target.name)} GPU" if target.memory_gib else ""
            memory = f"; bucket buffers about {gb:.1f} GB{share}"
        yield self.at_entry(
            ctx,
            entry,
            f"`overlap_comm` is true at ZeRO stage {stage}{memory}; NaN grad-norm reports with ZeRO-2 and "
            "LLaMA-Factory's own configs keep it false (contested: A/B it)",
            on="value",
            fix=self.fix("Set it to false", edits.replace_value(src, entry, False), safe=False),
        )
