from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, report
from cfgopt.rules.support.memory_advice import GPUS_IF_UNSTATED_OOM, estimate_ctx, gpus, top3
from cfgopt.wording import a


def smaller_micro_batches(micro: int, accum: int) -> list[tuple[int, int]]:
    """(micro, accumulation) pairs with the same product and a smaller micro-batch, largest first."""
    product = micro * accum
    return [(m, product // m) for m in range(micro - 1, 0, -1) if product % m == 0]


class PredictedOutOfMemory(Rule):
    code = "MEM001"
    name = "predicted-out-of-memory"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    # an estimate needs a training run (`do_train`, default false) of a named model (default None)
    triggers = frozenset({"do_train", "model_name_or_path"})
    summary = "The estimated peak memory per GPU exceeds the target's memory, or comes within 10% of it"
    why = (
        "Confidence: likely (calibrated estimate, docs/memory.md). cfgopt's memory model (`cfgopt estimate`) "
        "adds weights, gradients and optimizer states (partitioned by the ZeRO stage over the GPUs, minus "
        "offload), activations (with or without gradient checkpointing), the fp32 logits, eager attention "
        "scores and buffers. When even that peak without the allocator margin exceeds the target's memory, the "
        "run will stop with an out-of-memory error at its first full-length batch. Above 90% of the memory the "
        "verdict is 'tight': the estimate's worst calibrated error is 12%, and `estimate`, this rule and tune's "
        "pruning share that one margin (an 8B full fine-tune estimated at 97% of an H200 died of OOM). The "
        "message names the speed plan when one fits, then the "
        "largest parts and the first change that makes it fit: gradient checkpointing back on, a smaller "
        "micro-batch with more accumulation (same global batch), Liger kernels, or ZeRO-3/offload. Only for "
        "models whose shape is known (local config.json or cfgopt's table); without packing the peak batch is "
        "assumed to reach cutoff_len. With `--gpus` unstated a node of 8 GPUs is assumed."
    )
    fails_when = "At the first batch that reaches the estimated size: CUDA/HIP out of memory."
    evidence = (
        "bench/memory/results.md: estimate vs measured peaks on an H200 (LLaMA-Factory 0.9.5)",
        "docs/evidence/rocm_perf.md §5.3 (8B LoRA 8x2048 tokens without GC predicted 149 GiB: OOM on the H200, "
        "as measured)",
    )
    example = (
        "Llama-3-8B LoRA, disable_gradient_checkpointing: true, 8 x 2048 tokens, h200  ->  "
        "gradient checkpointing on (or 4 x 2 micro x accumulation)"
    )
    fix_safety = (
        "Planned: this rule writes no fix of its own; `cfgopt fix --unsafe-fixes` writes the job's speed plan "
        "(cfgopt/planner.py), the knobs chosen together by the memory model and tune's measured priors. "
        "Unsafe: the plan keeps only candidates that fit (re-enabling gradient checkpointing, trading micro-batch "
        "for accumulation with the global batch kept); the message names the plan's shape."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        n = gpus(ctx, GPUS_IF_UNSTATED_OOM)
        est = estimate_ctx(ctx, n)
        if est is None or est.verdict == "fits":
            return
        target = ctx.settings.target
        remedies: list[str] = []
        from cfgopt.planner import plan_for, planned_batch  # only here: the planner loads tune's priors

        plan = plan_for(ctx.job)
        if plan is not None and plan.changed and plan.est_gib is not None:
            remedies.append(f"the speed plan (~{plan.est_gib:.0f} GiB; `cfgopt fix --unsafe-fixes`)")
        if not est.gradient_checkpointing:
            after = estimate_ctx(ctx, n, disable_gradient_checkpointing=None)
            if after is not None and after.verdict == "fits":
                remedies.append(f"gradient checkpointing on (~{after.required_gib:.0f} GiB)")
        planned = planned_batch(ctx.job)  # name the speed plan's shape when it has one (the fix writes it)
        shapes = [planned] if planned else smaller_micro_batches(est.micro_batch, est.gradient_accumulation)
        for micro, accum in shapes:
            after = estimate_ctx(ctx, n, per_device_train_batch_size=micro, gradient_accumulation_steps=accum)
            if after is not None and after.verdict == "fits":
                remedies.append(
                    f"micro-batch {micro} x accumulation {accum} (same global batch, ~{after.required_gib:.0f} GiB)"
                )
                break
        if not est.liger and est.logits_gib > 0.15 * est.peak_allocated_gib:
            remedies.append(f"`enable_liger_kernel: true` (fused loss saves ~{est.logits_gib:.0f} GiB of logits)")
        if est.zero_stage != 3 and est.gpus > 1:
            remedies.append(
                "ZeRO-3 to shard the model states over the GPUs"
                + (" (FSDP from an accelerate config is invisible to cfgopt)" if est.zero_stage is None else "")
            )
        elif est.zero_stage == 3 and not est.offloaded_gib:
            remedies.append("ZeRO offload of the optimizer states")
        assumed = "" if ctx.settings.gpus else " (assumed; --gpus)"
        yield report(
            self,
            ctx,
            ("per_device_train_batch_size", "cutoff_len", "disable_gradient_checkpointing", "model_name_or_path"),
            ("predicted out of memory" if est.verdict == "over" else "tight (above 90%, the estimate's margin)")
            + f": about {est.required_gib:.0f} GiB per GPU on "
            f"{a(format(target.memory_gib, 'g'))} GiB "
            f"{target.name} with {est.gpus} GPU(s){assumed} ({est.model}, {est.tokens} tokens per micro-batch; "
            f"largest parts in GiB: {top3(est)}); try {'; or '.join(remedies) or 'a smaller cutoff_len'}",
        )
