from __future__ import annotations

import copy
from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import offload_device, zero_block, zero_stage
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
        "file is a training run of a known model whose estimated peak without that offload (same ZeRO stage) "
        "stays within 90% of the target's memory. With `--gpus` unstated one GPU is assumed (the most memory per "
        "GPU). Optimizer offload for LoRA needs no estimate and is PF051's."
    )
    fails_when = "Never: the run is slower than it needs to be."
    evidence = (
        "measured: bench/h200/measurements.md V3 vs V4 (ZeRO-3 + offload_optimizer 4.79x slower, no memory "
        "saved for LoRA)",
        "docs/evidence/deepspeed.md §2.1 (offload trades HBM for host RAM and PCIe bandwidth)",
        "bench/memory/results.md (the estimate)",
    )
    example = '"offload_param": {"device": "cpu"} for Llama-3-8B LoRA on 8 x mi300x  ->  remove it'
    fix_safety = "Unsafe: removing the offload raises GPU memory use; the estimate keeps 10% headroom."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        stage = zero_stage(src)
        if zero is None or not stage or not ctx.consumers or not isinstance(src.data, dict):
            return
        lora_only = all(ctx.job_of(c).value("finetuning_type") == "lora" for c in ctx.consumers)
        n = gpus(ctx, GPUS_IF_UNSTATED_SPEND)
        for block in ("offload_optimizer", "offload_param"):
            entry = zero.node.get(block)
            if entry is None or offload_device(src, block) == "none":
                continue
            if block == "offload_param" and stage != 3:
                continue
            if block == "offload_optimizer" and lora_only:
                continue  # PF051: nothing worth offloading, whatever the model
            without = copy.deepcopy(src.data)
            without["zero_optimization"].pop(block, None)
            estimates = [ctx.job_of(c).estimate(n, deepspeed=without) for c in ctx.consumers]
            if not estimates or any(e is None or not e.fits_with_headroom() for e in estimates):
                continue
            worst = max(estimates, key=lambda e: e.required_gib)
            target = ctx.settings.target
            what = "optimizer states" if block == "offload_optimizer" else "parameters"
            where = f"{worst.gpus} GPU(s)" if ctx.settings.gpus else "even on 1 GPU"
            yield self.at_entry(
                ctx,
                entry,
                f"{block}: without offloading the {what}, {worst.model} ({worst.finetuning_type}, ZeRO-{stage}, "
                f"{where}) needs about {worst.required_gib:.0f} GiB per GPU of {a(format(target.memory_gib, 'g'))} "
                f"GiB {target.name}: the offload only slows every step down",
                fix=self.fix(f"Remove `{block}`", edits.delete_entry(src, entry), safe=False),
            )
