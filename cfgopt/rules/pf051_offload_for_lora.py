from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules._ds import offload_device, zero_block, zero_stage
from cfgopt.rules._xf import lf_value, model_shape
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind

FIT_SHARE = 0.5


class OffloadForLora(Rule):
    code = "PF051"
    name = "offload-for-lora"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "ZeRO optimizer (or parameter) offload for LoRA training, where there is nothing worth offloading"
    why = (
        "Confidence: certain (measured). A LoRA run's optimizer state covers only the adapters (a few tens of MB "
        "for an 8B model), so offloading it to the CPU frees no meaningful GPU memory while the optimizer step, "
        "gradient copies and the JIT-built DeepSpeedCPUAdam move to the host: measured 4.79x slower than no "
        "DeepSpeed on one H200 with no memory saved. Parameter offload of the frozen base is reported too when the "
        "model's bf16 weights fit half of one GPU (model size from a local config.json or cfgopt's table). "
        "Reported when every LLaMA-Factory config using the file trains LoRA."
    )
    fails_when = "Never: the run is several times slower (4.79x measured)."
    evidence = (
        "measured: knowledge/h200_measurements.md V3 vs V4, Llama-3-8B LoRA on one H200: ZeRO-3 + offload_optimizer "
        "cpu 6.855 s/step vs 1.434 s/step (4.79x), peak 20.5 vs 21.0 GiB; train start 74.5 s vs ~20 s (CPUAdam JIT)",
        "knowledge/rocm_perf.md §5.1 (LoRA states 16 bytes per trainable parameter)",
    )
    example = '"offload_optimizer": {"device": "cpu"} for LoRA   ->  remove it'
    fix_safety = "Unsafe: removing the offload changes where memory goes; check the GPU budget."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        stage = zero_stage(src)
        if zero is None or not stage or not ctx.consumers:
            return
        lf = ctx.settings.lf_schema
        if any(lf_value(c, "finetuning_type", lf) != "lora" for c in ctx.consumers):
            return
        opt = zero.node.get("offload_optimizer")
        if opt is not None and offload_device(src, "offload_optimizer") != "none":
            yield self.at_entry(
                ctx,
                opt,
                "Optimizer offload for LoRA: the adapters' optimizer state is tiny, so nothing is saved while the "
                "step runs on the CPU (measured 4.79x slower than no DeepSpeed, Llama-3-8B LoRA, H200)",
                fix=self.fix("Remove `offload_optimizer`", edits.delete_entry(src, opt), safe=False),
            )
        param = zero.node.get("offload_param")
        target = ctx.settings.target
        if param is None or stage != 3 or offload_device(src, "offload_param") == "none" or not target.memory_gib:
            return
        shapes = [model_shape(c, lf) for c in ctx.consumers]
        if any(s is None for s in shapes):
            return
        biggest = max(shapes, key=lambda s: s.num_parameters)
        weights_gb = 2 * biggest.num_parameters / 1e9
        if weights_gb <= FIT_SHARE * target.memory_gib:
            yield self.at_entry(
                ctx,
                param,
                f"Parameter offload for LoRA on {biggest.name}: its bf16 weights ({weights_gb:.0f} GB) fit one "
                f"{target.name} ({weights_gb / target.memory_gib:.0%}); offloading them makes every forward and "
                "backward fetch the weights over PCIe",
                fix=self.fix("Remove `offload_param`", edits.delete_entry(src, param), safe=False),
            )
