from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.deepspeed_plan import at_stage
from cfgopt.plan.json_fixes import json_as_fixed, removed_words
from cfgopt.plan.planner import plan_for
from cfgopt.plan.wording import shape
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, value_of
from cfgopt.rules.support.memory_advice import GPUS_IF_UNSTATED_SPEND, gpus
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity


class ZeroStageHigherThanNeeded(Rule):
    code = "MEM003"
    name = "zero-stage-higher-than-needed"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    summary = "DeepSpeed ZeRO-3 where the model and GPU count need no more than ZeRO-2 (or no DeepSpeed)"
    why = (
        "Confidence: likely (calibrated estimate, docs/memory.md). Each ZeRO stage trades speed for memory: "
        "stage 1 shards the optimizer states, stage 2 the gradients too, both with the communication volume of "
        "plain data parallel; stage 3 shards the weights and all-gathers them in every forward and backward "
        "(1.5x the traffic, and the frozen base of a LoRA run as well). The fastest setting is the lowest stage "
        "that fits. Reported for ZeRO-3 when the estimated peak per GPU without DeepSpeed (LoRA, OFT) or with "
        "ZeRO-2 (full, freeze; then without DeepSpeed) stays within 90% of the target's memory for this model, "
        "GPU count and batch (ZeRO-2 judged without the offloads MEM002 / PF051 remove from the JSON in the same run, "
        "and with the others kept), or "
        "with ZeRO-2 and the job's speed plan's settings where the plan writes ZeRO-2 (a smaller micro-batch that "
        "fits). ZeRO-1/2 are not reported: they move as "
        "much data as plain data parallel. With `--gpus` unstated one GPU is assumed (the most memory per GPU "
        "at every stage). ZeRO-3 for LoRA with `--gpus 1` is PF050's (measured, no estimate needed)."
    )
    fails_when = "Never: the run is slower than it needs to be."
    evidence = (
        "docs/evidence/deepspeed.md §2.1 (stage trade-offs; 'stage 0 = plain DP, fastest if it fits'), "
        "docs/evidence/rocm_perf.md §5.1 and §5.4 (ZeRO-2 for 8B full fine-tuning on 8 x MI300X)",
        "measured: bench/h200/measurements.md V2 vs V4 (ZeRO-3 4.47x slower on one H200, no memory saved)",
        "https://github.com/deepspeedai/DeepSpeed/pull/8064 (ZeRO-3 27,941 vs ZeRO-1 57,414 tok/s)",
    )
    example = "Llama-3-8B full fine-tune, ZeRO-3, 8 x mi300x  ->  ZeRO-2 (the states take ~30 GB per GPU)"
    # the job's speed plan writes the fix (cfgopt/lint/plans.py); where it writes the lower stage into the DeepSpeed
    # JSON, this finding moves to that JSON's `zero_optimization.stage` and carries the JSON's edit
    fix_replaced_by_plan = True
    fix_safety = (
        "This rule writes no fix of its own. "
        "Unsafe: the plan writes ZeRO-2 into the job's own DeepSpeed JSON (`zero_optimization.stage: 2`, the keys "
        "only stage 3 reads removed; the finding then stands on that `stage`, the fix's edit), or removes "
        "`deepspeed` where no DeepSpeed is fastest (plain data parallel). A JSON another config reads keeps its stage "
        "(the edit would change that job too), whether that config is in the run or only in the project (a config "
        "of its repository naming the JSON and not named, as a pre-commit run names only the changed files): the "
        "finding stays on the config, without a fix, its message naming that config."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        known, ds = ctx.job.deepspeed
        if not known or ds is None:
            return
        n = gpus(ctx, GPUS_IF_UNSTATED_SPEND)
        current = ctx.job.estimate(n, deepspeed=ds)
        if current is None or current.zero_stage != 3:
            return  # ZeRO-1/2 move as much data as plain data parallel: no measured gain from dropping them
        if current.zero_stage == 3 and n == 1 and current.finetuning_type == "lora" and ctx.settings.gpus == 1:
            return  # PF050
        # LoRA/OFT states are tiny: plain data parallel first. Full/freeze: ZeRO-2 keeps its memory small at the
        # same communication volume as plain data parallel, so it comes first.
        # ZeRO-2 in the JSON as this run leaves it: without the offloads MEM002 / PF051 remove from it, as the plan
        fixed = json_as_fixed(ctx.job, n)
        candidates = [(0, None), (2, at_stage(fixed.deepspeed or ds, 2))]
        if current.finetuning_type in ("full", "freeze") and n > 1:
            candidates.reverse()  # on one GPU ZeRO shards nothing: no DeepSpeed first (measured 4.4x faster)
        target = ctx.settings.target
        entry = entry_of(ctx, "deepspeed")  # None on a launch line whose YAML names the JSON: at the YAML's word
        where = f"{n} GPU(s)" if ctx.settings.gpus else "any number of GPUs"
        ft = value_of(ctx, "finetuning_type")
        planned = plan_for(ctx.job)
        for stage, plan in candidates:
            est = ctx.job.estimate(n, deepspeed=plan)
            if est is None or not est.fits_with_headroom():
                continue
            lower = "no DeepSpeed (plain data parallel)" if stage == 0 else f"ZeRO-{stage}"
            gone = removed_words(fixed.removed, ("offload_optimizer",)) if stage else ""  # below 3: no offload_param
            lower += f" and {gone}" if gone else ""
            kept = ""
            if stage == 0 and planned is not None and planned.config_changed and planned.best.zero == planned.base.zero:
                kept = f"; the speed plan keeps it and spends the memory on {shape(planned)} instead"
            yield self.at_entry(
                ctx,
                entry,
                f"ZeRO-{current.zero_stage} is more than {est.model} ({ft}) needs on "
                f"{where}: with {lower} the estimated peak is about {est.required_gib:.0f} GiB per GPU of "
                f"{a(format(target.memory_gib, 'g'))} GiB {target.name} (now {current.required_gib:.0f}); the higher "
                f"stage only adds communication{kept}",
                key="deepspeed",
            )
            return
        if planned is not None and planned.deepspeed_stage is not None and planned.est_gib is not None:
            # no lower stage fits the batch as written, but one fits the plan's (a smaller micro-batch): the finding
            # that carries the plan's edit of the JSON (cfgopt.lint.plans.attach_plans)
            yield self.at_entry(
                ctx,
                entry,
                f"ZeRO-{current.zero_stage} is more than {current.model} ({ft}) needs on {where} with the speed "
                f"plan's settings ({shape(planned)}): their estimated peak is about {planned.est_gib:.0f} GiB per GPU "
                f"of {a(format(target.memory_gib, 'g'))} GiB {target.name}; the higher stage only adds communication",
                key="deepspeed",
            )
