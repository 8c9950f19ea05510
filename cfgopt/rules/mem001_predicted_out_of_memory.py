from __future__ import annotations

from collections.abc import Iterator

from cfgopt.plan.space import deepspeed_template
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, report
from cfgopt.rules.support.memory_advice import GPUS_IF_UNSTATED_OOM, estimate_ctx, gpus, gpus_stated, top3
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity


def smaller_micro_batches(micro: int, accum: int) -> list[tuple[int, int]]:
    """(micro, accumulation) pairs with the same product and a smaller micro-batch, largest first."""
    product = micro * accum
    return [(m, product // m) for m in range(micro - 1, 0, -1) if product % m == 0]


# An offload that moves less than this to the host (a LoRA's optimizer states are MiB) saves nothing worth naming:
# it would only be slower. The same floor for any remedy's saving.
MIN_SAVING_GIB = 1.0


def what_would_fit(ctx: Context, n: int, est) -> list[str]:
    """When no setting of the job's own fits: what would, each with its estimate, cheapest first: ZeRO-3 over the
    job's own GPUs (the same training, its states sharded), a shorter cutoff_len, 8-bit AdamW, an offload (slower;
    only where ZeRO-3 alone does not fit), more GPUs (only where ZeRO-3 over these does not fit)."""
    out: list[str] = []
    here = zero3_here(ctx, n, est)
    if here is not None and here[1]:
        out.append(here[0])
    cutoff = est.tokens // max(est.micro_batch, 1)
    for shorter in (cutoff // 2, cutoff // 4, cutoff // 8):
        after = estimate_ctx(ctx, n, cutoff_len=shorter) if shorter >= 128 else None
        if after is not None and after.verdict == "fits":
            out.append(f"cutoff_len {shorter} (fewer tokens per micro-batch, ~{after.required_gib:.0f} GiB)")
            break
    eight_bit = _eight_bit_adamw(ctx, n)
    if eight_bit is not None:
        out.append(eight_bit)
    if here is not None and here[1]:
        return out  # an offload or more GPUs, each with ZeRO-3 too, would only be slower or cost more GPUs
    offload = zero3_offload(ctx, n, est)
    if offload is not None and offload[1]:
        out.append(offload[0])
    plan = ctx.job.distributed
    fsdp = plan is not None and plan.kind == "fsdp"  # more GPUs under the job's own FSDP config, not ZeRO-3
    for more in (2 * n, 4 * n, 8 * n, 16 * n, 32 * n):
        after = ctx.job.estimate(more) if fsdp else ctx.job.estimate(more, deepspeed=deepspeed_template("z3"))
        if after is not None and after.verdict == "fits":
            how = f"under FSDP (`num_processes: {more}`)" if fsdp else "with ZeRO-3"
            out.append(f"{more} GPUs {how} (~{after.required_gib:.0f} GiB each)")
            break
    return out


def zero3_here(ctx: Context, n: int, est) -> tuple[str, bool] | None:
    """ZeRO-3 (LLaMA-Factory's stage-3 JSON) over the job's own GPUs, for a job on several GPUs under neither ZeRO-3
    nor an accelerate config (`_sharding_remedy` speaks for FSDP / DDP): (the words, with its estimate; whether it
    fits), None where it saves under MIN_SAVING_GIB."""
    if n <= 1 or est.zero_stage == 3 or ctx.job.distributed is not None:
        return None
    after = ctx.job.estimate(n, deepspeed=deepspeed_template("z3"))
    if after is None or est.required_gib - after.required_gib < MIN_SAVING_GIB:
        return None
    fits = after.verdict == "fits"
    alone = "" if fits else ", not enough alone"
    return f"ZeRO-3 over the {n} GPUs (~{after.required_gib:.0f} GiB per GPU{alone})", fits


def zero3_offload(ctx: Context, n: int, est) -> tuple[str, bool] | None:
    """ZeRO-3 with the optimizer offloaded to the CPU, else the parameters too (the optimizer alone first: the
    parameters stay on the GPU, so less crosses PCIe each step): the first that fits, else the optimizer's, with
    its estimate and host memory (words; whether it fits). None where the job offloads already, or the offload
    moves under MIN_SAVING_GIB to the host (a LoRA's optimizer states): ZeRO-3 alone would do as much, faster."""
    if est.offloaded_gib:
        return None
    found: list[tuple[str, bool]] = []
    for zero, what in (("z3_optim_offload", "the optimizer offloaded to the CPU"), ("z3_offload", "CPU offload")):
        after = ctx.job.estimate(n, deepspeed=deepspeed_template(zero))
        if after is None or after.offloaded_gib < MIN_SAVING_GIB:
            continue
        fits = after.verdict == "fits"
        alone = "" if fits else ", not enough alone"
        words = f"ZeRO-3 with {what} (~{after.required_gib:.0f} GiB per GPU, {after.offloaded_gib:.0f} GiB in host "
        found.append((f"{words}memory{alone}; slower)", fits))
        if fits:
            return found[-1]
    return found[0] if found else None


def _eight_bit_adamw(ctx: Context, n: int) -> str | None:
    """8-bit AdamW with bf16 autocast and no DeepSpeed, for a full or freeze fine-tune with an AdamW (a quarter of
    its state memory; within 0.3% of AdamW's loss in bench/verify/results.md), where that fits; its package named
    where it is not known to be installed."""
    from cfgopt.plan.space import DEFAULT_OPTIM

    job = ctx.job
    adamw = str(job.value("optim") or DEFAULT_OPTIM) in (DEFAULT_OPTIM, "adamw_torch", "adamw_torch_fused")
    if job.value("finetuning_type") not in ("full", "freeze") or not adamw or job.on("pure_bf16"):
        return None
    half = {"bf16": True, "fp16": False} if ctx.job.settings.target.bf16 else {}
    after = job.estimate(n, deepspeed=None, optim="adamw_bnb_8bit", **half)
    if after is None or after.verdict != "fits":
        return None
    env = job.environment
    needs = "" if job.has_package("bitsandbytes") else f"; needs bitsandbytes, which {env.where} does not name"
    return f"optim: adamw_bnb_8bit without DeepSpeed (~{after.required_gib:.0f} GiB{needs})"


def _sharding_remedy(plan, est) -> str | None:
    """For a job its accelerate config runs under FSDP or DDP (`Job.distributed`): the config's own next step
    (FULL_SHARD, then `fsdp_offload_params`; DDP to FSDP), None where the config says neither."""
    if plan is None or est.zero_stage is not None:
        return None
    where = f" in {plan.config}" if plan.config else ""
    if plan.kind == "ddp" and est.gpus > 1:
        return f"`distributed_type: FSDP` (FULL_SHARD){where} to shard the model states over the GPUs"
    if plan.kind != "fsdp":
        return None
    if plan.sharding != "FULL_SHARD" and est.gpus > 1:
        return f"FSDP's FULL_SHARD{where} (now {plan.sharding})"
    return None if plan.offload_params else f"`fsdp_offload_params: true`{where} (slower)"


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
        "adds weights, gradients and optimizer states (partitioned by the ZeRO stage over the GPUs, or by FSDP "
        "as the accelerate config a launch line names says, minus offload; plain DDP adds its gradient "
        "buckets), activations (with or without gradient checkpointing), the fp32 logits, eager attention "
        "scores and buffers. When even that peak without the allocator margin exceeds the target's memory, the "
        "run will stop with an out-of-memory error at its first full-length batch. Above 90% of the memory the "
        "verdict is 'tight': the estimate's worst calibrated error is 12%, and `estimate`, this rule and tune's "
        "pruning share that one margin (an 8B full fine-tune estimated at 97% of an H200 died of OOM). The "
        "message names the speed plan when one fits, then the "
        "largest parts and the first change that makes it fit: gradient checkpointing back on, a smaller "
        "micro-batch with more accumulation (same global batch), Liger kernels, or ZeRO-3/offload (for an "
        "accelerate launch: FSDP's FULL_SHARD, then `fsdp_offload_params`); when no "
        "setting of the job's own fits, what would, each with its estimate, cheapest first: ZeRO-3 over the job's "
        "own GPUs (the same training, its states sharded), a shorter cutoff_len, 8-bit AdamW (bitsandbytes) for a "
        "full fine-tune, then, only where ZeRO-3 over these GPUs does not fit, ZeRO-3 with the optimizer offloaded "
        "to the CPU, else with the parameters too (and the host memory that takes), or the GPU count at which "
        "ZeRO-3 fits (an FSDP job: its own FSDP config). No remedy that saves under 1 GiB is named (an offload of "
        "a LoRA's optimizer states moves MiB: only slower), and one that does not fit alone says so. Only for "
        "models whose shape is known (local config.json or cfgopt's table); without packing the peak batch is "
        "assumed to reach cutoff_len. With `--gpus` unstated a node of 8 GPUs is assumed. Where the estimate "
        "counts some terms only roughly (confidence low: a mixture of experts' activations, PPO), its model "
        "states (weights, gradients and optimizer states under the ZeRO stage, counted exactly) are judged alone: "
        "when they exceed the GPU's memory the run cannot fit (Mixtral-8x7B full, ZeRO-3 over 8 H100s: 87 GiB per "
        "GPU), and the message says the activations are not in that figure and what brings the states under 90%; "
        "where only the rough terms would push it over, nothing is said."
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
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. "
        "Unsafe: the plan keeps only candidates that fit (re-enabling gradient checkpointing, trading micro-batch "
        "for accumulation with the global batch kept); the message names the plan's shape."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        n = gpus(ctx, GPUS_IF_UNSTATED_OOM)
        est = estimate_ctx(ctx, n)
        if est is None:
            yield from self._states_alone(ctx, n)
            return
        if est.verdict == "fits":
            return
        target = ctx.settings.target
        remedies: list[str] = []
        from cfgopt.plan.planner import plan_for, planned_batch  # only here: the planner loads tune's priors

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
        sharding = _sharding_remedy(ctx.job.distributed, est)
        # ZeRO-3 over these GPUs, else its offload, with its estimate: named only where it saves something
        zero = zero3_here(ctx, n, est) or (zero3_offload(ctx, n, est) if est.zero_stage == 3 else None)
        if sharding or zero:
            remedies.append(sharding or zero[0])
        if plan is None or not plan.changed:  # nothing the plan can set fits: say what would, with its estimate
            remedies = what_would_fit(ctx, n, est) + remedies
        remedies = list(dict.fromkeys(remedies))  # ZeRO-3 over these GPUs may be in both lists
        assumed = "" if gpus_stated(ctx) else " (assumed; --gpus)"
        yield report(
            self,
            ctx,
            ("per_device_train_batch_size", "cutoff_len", "disable_gradient_checkpointing", "model_name_or_path"),
            ("predicted out of memory" if est.verdict == "over" else "tight (above 90%, the estimate's margin)")
            + f": about {est.required_gib:.0f} GiB per GPU on "
            f"{a(format(target.memory_gib, 'g'))} GiB "
            f"{target.name} with {est.gpus} GPU(s){assumed} ({est.model}, {est.tokens} tokens per micro-batch, "
            f"{ctx.job.sequence_basis()}; "
            f"largest parts in GiB: {top3(est)}); try {'; or '.join(remedies) or 'a smaller cutoff_len'}",
        )

    def _states_alone(self, ctx: Context, n: int) -> Iterator[Diagnostic]:
        """Where the estimate counts some terms only roughly (a mixture of experts' activations: confidence "low",
        no verdict), its model states are still exact: when they alone exceed the GPU, the run cannot fit whatever
        its activations (Mixtral-8x7B full, ZeRO-3 over 8 H100s: 87 GiB of states per GPU). Silent where only the
        rough terms would push it over."""
        from cfgopt.memory.result import STATE_PARTS  # only here: a lint run without an estimate never loads it

        est = ctx.job.rough_estimate(n)
        target = ctx.settings.target
        if est is None or not est.approximate or est.states_gib <= target.memory_gib:
            return
        parts = ", ".join(f"{c.name} {c.gib:.0f}" for c in est.components if c.name in STATE_PARTS and c.gib >= 0.5)
        assumed = "" if gpus_stated(ctx) else " (assumed; --gpus)"
        yield report(
            self,
            ctx,
            ("model_name_or_path", "finetuning_type", "deepspeed"),
            f"predicted out of memory: the model states alone are about {est.states_gib:.0f} GiB per GPU on "
            f"{a(format(target.memory_gib, 'g'))} GiB {target.name} with {est.gpus} GPU(s){assumed} ({est.model}, "
            f"{est.total_params / 1e9:.1f}B parameters; {parts} GiB), activations not counted in that figure "
            f"({'; '.join(est.approximate)}); try {'; or '.join(states_remedies(ctx, n, est)) or 'LoRA'}",
        )


def states_remedies(ctx: Context, n: int, est) -> list[str]:
    """What brings the model states under HEADROOM of the GPU's memory (the activations, counted only roughly, must
    fit beside them), each with its figure: the first of ZeRO-3 over the job's own GPUs, its optimizer's offload,
    its parameters' offload (none where the job offloads already), then the GPU count at which ZeRO-3 does."""
    from cfgopt.memory.result import HEADROOM

    room = HEADROOM * ctx.settings.target.memory_gib
    variants = [("z3", f"ZeRO-3 over the {n} GPUs")] if est.zero_stage != 3 and n > 1 else []
    if not est.offloaded_gib:
        variants += [
            ("z3_optim_offload", "ZeRO-3 with the optimizer offloaded to the CPU"),
            ("z3_offload", "ZeRO-3 with CPU offload"),
        ]
    out: list[str] = []
    for zero, words in variants:
        after = ctx.job.rough_estimate(n, deepspeed=deepspeed_template(zero))
        if after is not None and after.states_gib <= room:
            slower = "; slower" if after.offloaded_gib else ""
            out.append(f"{words} (states ~{after.states_gib:.0f} GiB per GPU{slower})")
            break
    for more in (2 * n, 4 * n, 8 * n, 16 * n, 32 * n):
        after = ctx.job.rough_estimate(more, deepspeed=deepspeed_template("z3"))
        if after is not None and after.states_gib <= room:
            out.append(f"{more} GPUs with ZeRO-3 (states ~{after.states_gib:.0f} GiB each)")
            break
    return out
