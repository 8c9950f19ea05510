from __future__ import annotations

from collections.abc import Iterator

from cfgopt.plan.planner import planned_batch, planned_estimate
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import SMALL_TOKENS, TRAIN_KINDS, neat_fa2_one_row, report
from cfgopt.rules.support.memory_advice import GPUS_IF_UNSTATED_SPEND, estimate_ctx, gpus
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity


class MicroBatchHeadroom(Rule):
    code = "MEM005"
    name = "micro-batch-headroom"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    summary = "Memory for a larger micro-batch with less gradient accumulation (same global batch)"
    why = (
        "Confidence: possible (small measured gain above 8k tokens; calibrated estimate). Gradient accumulation "
        "runs several small forward/backward passes per optimizer step; when memory allows, a larger micro-batch "
        "with proportionally less accumulation does the same step with bigger GEMMs and fewer launches. Measured "
        "on an H200 (8B LoRA, packed, GC off): 8x2 vs 4x4 micro x accumulation, 13,209 vs 12,757 tokens/s "
        "(+3.5%). Reported when `gradient_accumulation_steps` > 1 and cfgopt's memory estimate at the larger "
        "micro-batch stays within 90% of the target's memory; the factor divides the accumulation so the global "
        "batch (micro x accumulation x GPUs) is unchanged. Micro-batches of <= 4096 tokens are PF007's."
    )
    fails_when = "Never fails: the GPU does the same work in more, smaller pieces."
    evidence = (
        "bench/h200/measurements.md V11 vs V10 (8x2 vs 4x4: 13,209 vs 12,757 tokens/s, 101 vs 58 GiB)",
        "bench/memory/results.md (the estimate)",
    )
    example = (
        "per_device_train_batch_size: 4\ngradient_accumulation_steps: 4   (8B LoRA, 2048 tokens, mi300x)  ->  8 and 2"
    )
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. "
        "Unsafe: a larger micro-batch needs more memory (the estimate keeps 10% headroom); same global batch. "
        "Reported only when the plan grows the micro-batch, with the plan's shape."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if neat_fa2_one_row(ctx):
            return  # batch size must stay 1 (LF019)
        n = gpus(ctx, GPUS_IF_UNSTATED_SPEND)
        now = estimate_ctx(ctx, n)
        if now is None or now.gradient_accumulation < 2 or now.micro_batch * now.seq_len <= SMALL_TOKENS:
            return
        planned = planned_batch(ctx.job)  # the fix is the speed plan's: name its shape, or stay silent
        if planned is None or planned[0] <= now.micro_batch:
            return
        micro, accum = planned
        # with the plan's other changes and DeepSpeed (a bigger micro-batch may fit only with Liger's fused loss)
        est = planned_estimate(ctx.job, n)
        if est is None or not est.fits_with_headroom():
            return
        target = ctx.settings.target
        yield report(
            self,
            ctx,
            ("per_device_train_batch_size", "gradient_accumulation_steps"),
            f"{now.micro_batch} x {now.gradient_accumulation} (micro-batch x accumulation) leaves memory unused: "
            f"{micro} x {accum} keeps the global batch and should need about {est.required_gib:.0f} GiB per GPU "
            f"(now {now.required_gib:.0f}) of {a(format(target.memory_gib, 'g'))} GiB {target.name}",
        )
