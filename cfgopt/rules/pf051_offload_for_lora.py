from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import offload_device, readers_keep, zero_block, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class OffloadForLora(Rule):
    code = "PF051"
    name = "offload-for-lora"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})  # `check` reads only the `zero_optimization` block
    summary = "ZeRO optimizer offload for LoRA training, where there is nothing worth offloading"
    why = (
        "Confidence: certain (measured). A LoRA run's optimizer state covers only the adapters (a few tens of MB "
        "for an 8B model), so offloading it to the CPU frees no meaningful GPU memory while the optimizer step, "
        "gradient copies and the JIT-built DeepSpeedCPUAdam move to the host: measured 4.79x slower than no "
        "DeepSpeed on one H200 with no memory saved. Needs no model size. Reported when every LLaMA-Factory config "
        "using the file trains LoRA. Parameter offload, and offload for other fine-tuning types, save real memory: "
        "whether the run fits without them is MEM002's (cfgopt's memory estimate)."
    )
    fails_when = "Never: the run is several times slower (4.79x measured)."
    evidence = (
        "measured: bench/h200/measurements.md V3 vs V4, Llama-3-8B LoRA on one H200: ZeRO-3 + offload_optimizer "
        "cpu 6.855 s/step vs 1.434 s/step (4.79x), peak 20.5 vs 21.0 GiB; train start 74.5 s vs ~20 s (CPUAdam JIT)",
        "docs/evidence/rocm_perf.md §5.1 (LoRA states 16 bytes per trainable parameter)",
    )
    example = '"offload_optimizer": {"device": "cpu"} for LoRA   ->  remove it'
    fix_safety = (
        "Unsafe: removing the offload changes where memory goes; check the GPU budget. A JSON that a config of the "
        "project not judged in the run reads is left as it is: no fix, and the message names that config."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        stage = zero_stage(src)
        if zero is None or not stage or not ctx.consumers:
            return
        if any(ctx.job_of(c).value("finetuning_type") != "lora" for c in ctx.consumers):
            return
        opt = zero.node.get("offload_optimizer")
        if opt is not None and offload_device(src, "offload_optimizer") != "none":
            kept = readers_keep(ctx)  # a config outside the run may train more than LoRA
            yield self.at_entry(
                ctx,
                opt,
                "Optimizer offload for LoRA: the adapters' optimizer state is tiny, so nothing is saved while the "
                f"step runs on the CPU (measured 4.79x slower than no DeepSpeed, Llama-3-8B LoRA, H200){kept}",
                fix=None if kept else self.fix("Remove `offload_optimizer`", edits.delete_entry(src, opt), safe=False),
            )
        # Parameter offload (ZeRO-3) saves real memory for any model: whether it is needed is MEM002's estimate.
