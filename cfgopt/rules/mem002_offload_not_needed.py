from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.plan.json_fixes import unneeded_offloads
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import readers_keep, zero_block, zero_stage
from cfgopt.rules.support.memory_advice import GPUS_IF_UNSTATED_SPEND, gpus
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class OffloadNotNeeded(Rule):
    code = "MEM002"
    name = "offload-not-needed"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "ZeRO optimizer or parameter offload where every run using the file fits on the GPU without it"
    why = (
        "Confidence: likely (calibrated estimate, docs/memory.md). Offload moves optimizer states (and with "
        "`offload_param` the ZeRO-3 weight partitions) to host memory: every step then copies gradients and "
        "weights over PCIe and runs the optimizer on the CPU (measured 4.79x slower for an 8B LoRA on one H200). "
        "It pays only when the run does not fit otherwise. Reported when every LLaMA-Factory config using this "
        "file is a training run of a known model whose estimated peak without that offload (same ZeRO stage; "
        "`offload_param` judged without the optimizer's offload too where that is reported, as both fixes apply "
        "together) stays within 90% of the target's memory. With `--gpus` unstated one GPU is assumed (the most "
        "memory per GPU). Optimizer offload for LoRA needs no estimate and is PF051's. The speed plan and MEM003 "
        "judge the JSON without the offloads reported here."
    )
    fails_when = "Never: the run is slower than it needs to be."
    evidence = (
        "measured: bench/h200/measurements.md V3 vs V4 (ZeRO-3 + offload_optimizer 4.79x slower, no memory "
        "saved for LoRA)",
        "docs/evidence/deepspeed.md §2.1 (offload trades HBM for host RAM and PCIe bandwidth)",
        "bench/memory/results.md (the estimate)",
    )
    example = '"offload_param": {"device": "cpu"} for Llama-3-8B LoRA on 8 x mi300x  ->  remove it'
    fix_safety = (
        "Unsafe: removing the offload raises GPU memory use; the estimate keeps 10% headroom. A JSON that a config "
        "of the project not judged in the run reads (not named, as a pre-commit run names only the changed files) "
        "is left as it is: no fix, and the message names that config."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        stage = zero_stage(src)
        if zero is None or not ctx.consumers or not isinstance(src.data, dict):
            return
        jobs = [ctx.job_of(c) for c in ctx.consumers]
        target = ctx.settings.target
        removed: list[str] = []  # judged one after the other: the JSON without all of them fits (`unneeded_offloads`)
        for block, estimates in unneeded_offloads(jobs, src.data, stage, gpus(ctx, GPUS_IF_UNSTATED_SPEND)):
            entry = zero.node.get(block)
            if entry is None:
                continue
            worst = max(estimates, key=lambda e: e.required_gib)
            what = "optimizer states" if block == "offload_optimizer" else "parameters"
            also = " (nor the optimizer states, above)" if removed else ""
            removed.append(block)
            where = f"{worst.gpus} GPU(s)" if ctx.settings.gpus else "even on 1 GPU"
            kept = readers_keep(ctx)
            yield self.at_entry(
                ctx,
                entry,
                f"{block}: without offloading the {what}{also}, {worst.model} ({worst.finetuning_type}, ZeRO-{stage}, "
                f"{where}) needs about {worst.required_gib:.0f} GiB per GPU of {a(format(target.memory_gib, 'g'))} "
                f"GiB {target.name}: the offload only slows every step down{kept}",
                fix=None if kept else self.fix(f"Remove `{block}`", edits.delete_entry(src, entry), safe=False),
            )
