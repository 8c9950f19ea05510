from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import (
    SMALL_TOKENS,
    TRAIN_KINDS,
    neat_fa2_one_row,
    number,
    report,
    tokens_per_micro_batch,
    training,
    value_of,
)
from cfgopt.text.diagnostics import Diagnostic, Severity

AIM_TOKENS = 8192


class SmallMicroBatch(Rule):
    code = "PF007"
    name = "small-micro-batch"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    summary = "Few tokens per micro-batch while gradient accumulation is > 1: trade accumulation for batch size"
    why = (
        "Confidence: likely for LoRA on >= 64 GB GPUs (measured), contested for full fine-tuning (memory). With "
        "`per_device_train_batch_size x cutoff_len` <= 4096 tokens, a large GPU spends each step on small GEMMs "
        "and launch overhead. Raising the micro-batch and lowering `gradient_accumulation_steps` by the same "
        "factor keeps the samples per optimizer step. Measured on an H200 (8B LoRA): 16x1 vs 4x4, 1.33x tokens/s; "
        "1x512 vs 16x512 tokens, 4.2x; on DPO (4B LoRA, chosen and rejected with a reference forward in each "
        "micro-batch) 8x1 vs 4x2, 1.61x. What settles it: peak memory of one step at the larger micro-batch."
    )
    fails_when = "Never fails: the GPU is under-used."
    evidence = (
        "bench/h200/measurements.md V5 vs V4 (2,667 vs 2,011 real tokens/s)",
        "docs/evidence/rocm_perf.md §2.4 and R08 (1x512: 2,721 tok/s; 16x512: 11,322 tok/s)",
        "bench/planner/README.md 'Longer searches' (Qwen3-4B LoRA DPO, GC on: 4x2 1,606 vs 8x1 2,581 tokens/s)",
    )
    worth_it = (
        "Info, never failing a run: LLaMA-Factory's examples use small micro-batches with accumulation for "
        "consumer GPUs, and on a stated large GPU the speed plan trades accumulation for micro-batch (same global "
        "batch). The gain is measured (1.33x), its size on other data is not."
    )
    example = "per_device_train_batch_size: 1\ngradient_accumulation_steps: 8   ->  4 and 2"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. "
        "Unsafe: a larger micro-batch needs more memory (the optimizer step sees the same samples)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or ctx.settings.target.memory_gib < 64:
            return
        tokens = tokens_per_micro_batch(ctx)
        accum = number(value_of(ctx, "gradient_accumulation_steps"))
        bsz = number(value_of(ctx, "per_device_train_batch_size"))
        if tokens is None or accum is None or bsz is None or tokens > SMALL_TOKENS or accum < 2 or bsz < 1:
            return
        if neat_fa2_one_row(ctx):
            return  # batch size must stay 1 (LF019)
        measured = _MEASURED.get(str(value_of(ctx, "stage") or "sft"), _MEASURED["sft"])
        yield report(
            self,
            ctx,
            ("per_device_train_batch_size", "gradient_accumulation_steps"),
            f"{tokens:g} tokens per micro-batch with gradient accumulation {accum:g} on {ctx.settings.target.name}: a "
            f"larger micro-batch with less accumulation keeps the step and uses the GPU better ({measured})",
        )


# The measurement quoted, by stage (evidence above; tune's priors use the same two, cfgopt/plan/priors.py)
_MEASURED = {"sft": "H200: 16x1 vs 4x4 was 1.33x", "dpo": "H200, DPO: 8x1 vs 4x2 was 1.61x"}
