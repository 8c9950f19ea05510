from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class ActivationCheckpointingInert(Rule):
    code = "DS017"
    name = "activation-checkpointing-inert"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"activation_checkpointing"})
    summary = "An `activation_checkpointing` block: inert for Hugging Face models (LLaMA-Factory)"
    why = (
        "Confidence: certain. DeepSpeed's `activation_checkpointing` block is read only by "
        "`deepspeed.checkpointing.configure()`, which Megatron-style model code calls itself; neither the HF "
        "Trainer, accelerate nor LLaMA-Factory call it, and HF models checkpoint through torch's "
        "`torch.utils.checkpoint` (LLaMA-Factory turns gradient checkpointing on by default; "
        "`disable_gradient_checkpointing` turns it off). So `partition_activations`, `cpu_checkpointing` and the "
        "rest do nothing here. Without a LLaMA-Factory config using the file it is only noted."
    )
    fails_when = "Never: the block is ignored; memory the user expected to save is not saved."
    evidence = (
        "deepspeed 0.19.8 runtime/activation_checkpointing/checkpointing.py:1125, :1152 `configure` (the only "
        "reader of the block); no caller in transformers 5.6.0, accelerate 1.11.0 or llamafactory 0.9.5",
        "llamafactory 0.9.5 model/model_utils/checkpointing.py (HF gradient checkpointing)",
    )
    example = '"activation_checkpointing": {"partition_activations": true}   ->  remove; LLaMA-Factory checkpoints'
    fix_safety = "Unsafe: removal changes nothing at run time, but drops what the file asked for."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        entry = src.find(("activation_checkpointing",))
        if entry is None:
            return
        fix = self.fix("Remove the block", edits.delete_entry(src, entry), safe=False)
        if ctx.consumers:
            yield self.at_entry(
                ctx,
                entry,
                "`activation_checkpointing` does nothing under the HF Trainer (only Megatron-style code calls "
                "`deepspeed.checkpointing.configure`); LLaMA-Factory's own gradient checkpointing applies",
                fix=fix,
            )
        else:
            yield self.at_entry(
                ctx,
                entry,
                "`activation_checkpointing` is read only by `deepspeed.checkpointing.configure()`: inert for HF "
                "models (LLaMA-Factory, HF Trainer)",
                severity=Severity.INFO,
                fix=fix,
            )
