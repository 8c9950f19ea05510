from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

GATHER_KEYS = (
    "stage3_gather_16bit_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
)


class Zero3WeightsNotGathered(Rule):
    code = "DS008"
    name = "zero3-weights-not-gathered"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})
    summary = "ZeRO-3 without `stage3_gather_16bit_weights_on_model_save: true`: the saved model is unusable"
    why = (
        "Under ZeRO-3 every GPU holds a shard of each weight. Unless DeepSpeed gathers them at save time (the "
        "default is false), the HF Trainer logs 'Saving the full checkpoint instead, use zero_to_fp32.py' and "
        "the output folder holds no loadable model weights; with transformers < 5 a LoRA run even wrote a "
        "40-byte empty adapter. LLaMA-Factory's own ds_z3 configs set it to true."
    )
    fails_when = "At the first save (end of training), silently: the run finishes and its output cannot be loaded."
    evidence = (
        "transformers 5.6.0 trainer.py `save_model` (ValueError branch: 'Saving the full checkpoint instead')",
        "https://github.com/deepspeedai/DeepSpeed/issues/7900, https://github.com/huggingface/trl/issues/4416",
        "LLaMA-Factory 0.9.5 examples/deepspeed/ds_z3_config.json sets it to true",
    )
    example = '"zero_optimization": {"stage": 3}   ->  add "stage3_gather_16bit_weights_on_model_save": true'
    fix_safety = "Safe: gathering costs one all-gather at save time and changes nothing in training."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if zero_stage(src) != 3:
            return
        zero = src.root.get("zero_optimization") if src.root is not None else None
        if zero is None or not isinstance(zero.node.value, dict):
            return
        present = [zero.node.get(k) for k in GATHER_KEYS if zero.node.get(k) is not None]
        if any(e.node.value is True for e in present):
            return
        if present:
            entry = present[-1]
            fix = self.fix("Set it to true", edits.replace_value(src, entry, True), safe=True)
            where = entry
        else:
            fix = self.fix(
                'Add "stage3_gather_16bit_weights_on_model_save": true',
                edits.insert_entry(src, zero, "stage3_gather_16bit_weights_on_model_save", True),
                safe=True,
            )
            where = zero.node.get("stage") or zero
        yield self.at_entry(
            ctx,
            where,
            "ZeRO-3 without `stage3_gather_16bit_weights_on_model_save: true`: the "
            "saved model holds only ZeRO shards (zero_to_fp32.py needed to recover the weights)",
            fix=fix,
        )
