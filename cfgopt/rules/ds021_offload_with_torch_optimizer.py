from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import offload_device, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class OffloadWithTorchOptimizer(Rule):
    code = "DS021"
    name = "offload-with-torch-optimizer"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_force_ds_cpu_optimizer"})  # the flag must be present (false); offload alone cannot fire
    summary = "Optimizer offload with `zero_force_ds_cpu_optimizer: false`: a torch optimizer steps on the CPU"
    why = (
        "Confidence: likely. With optimizer offload the optimizer step runs on the host. By default "
        "(`zero_force_ds_cpu_optimizer: true`) accelerate swaps the Trainer's torch AdamW for DeepSpeed's "
        "vectorised DeepSpeedCPUAdam, and DeepSpeed refuses any other client optimizer. Setting the flag to "
        "false keeps the plain torch optimizer on CPU tensors, which DeepSpeed's own message says 'in most cases "
        "will yield poor performance'."
    )
    fails_when = "Never: the optimizer step is slow."
    evidence = (
        "deepspeed 0.19.8 runtime/engine.py:2342-2346 (the ZeRO-Offload client-optimizer check and its message)",
        "accelerate 1.11.0 accelerator.py `_prepare_deepspeed` (map_pytorch_optim_to_deepspeed only when "
        "`zero_force_ds_cpu_optimizer` is true)",
        "https://github.com/OpenMOSS/MOSS/issues/272",
    )
    example = '"zero_force_ds_cpu_optimizer": false with offload_optimizer cpu   ->  remove the flag'
    fix_safety = "Unsafe: removing the flag swaps the optimizer implementation (same Adam maths, different code)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        entry = src.find(("zero_force_ds_cpu_optimizer",))
        if entry is None or entry.node.value is not False:
            return
        stage = zero_stage(src)
        if not stage or offload_device(src, "offload_optimizer") == "none":
            return
        yield self.at_entry(
            ctx,
            entry,
            "`zero_force_ds_cpu_optimizer` is false with optimizer offload: the torch optimizer runs its step on "
            "CPU tensors instead of DeepSpeedCPUAdam (DeepSpeed: 'in most cases will yield poor performance')",
            on="value",
            fix=self.fix("Remove the flag", edits.delete_entry(src, entry), safe=False),
        )
