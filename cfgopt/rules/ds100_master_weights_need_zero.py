from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import lax_true, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

CHECKS = (
    ("fp16", "fp16_master_weights_and_grads", "Fp16_master_weights_and_grads"),
    ("bf16", "bf16_master_weights_and_grads", "Bf16_master_weights_and_grads"),
    ("bf16", "bf16_optimizer_states", "bf16_optimizer_states"),
)


def _bf16_block(data: dict) -> str:
    """The block DeepSpeed reads its bf16 settings from: `bf16`, else the older spelling `bfloat16`
    (deepspeed 0.19.8 runtime/precision_config.py `get_bfloat16_config`)."""
    return "bf16" if data.get("bf16") is not None else "bfloat16"


class MasterWeightsNeedZero(Rule):
    code = "DS100"
    name = "master-weights-need-zero"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"fp16", "bf16", "bfloat16"})
    summary = "16-bit master weights or optimizer states without ZeRO stage 1-3"
    why = (
        "Confidence: certain. DeepSpeed keeps fp16/bf16 master weights, gradients and optimizer states only in its "
        "ZeRO optimizers: with ZeRO off (no `zero_optimization` block, a misspelt one, or stage 0) the config is "
        "refused. `bf16_optimizer_states` also needs `bf16_master_weights_and_grads`."
    )
    fails_when = (
        "At DeepSpeedConfig construction (`deepspeed.initialize`, train start): `Bf16_master_weights_and_grads "
        "is only supported with ZeRO Stage 1, 2, or 3.`"
    )
    evidence = ("deepspeed 0.19.8 runtime/config.py `_do_error_check` L702-714",)
    example = '"bf16": {"enabled": true, "bf16_master_weights_and_grads": true} without zero_optimization'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if not isinstance(src.data, dict):
            return
        stage = zero_stage(src)
        bf16 = _bf16_block(src.data)
        for block, key, label in CHECKS:
            block = bf16 if block == "bf16" else block
            entry = src.find((block, key))
            if entry is None or not lax_true(entry.node.value):
                continue
            if stage not in (1, 2, 3):
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{block}.{key}` without ZeRO stage 1-3 (stage {stage}): DeepSpeed "
                    f"stops with `{label} is only supported with ZeRO Stage 1, 2, or 3.`",
                )
            master = src.find((bf16, "bf16_master_weights_and_grads"))
            if key == "bf16_optimizer_states" and not (master is not None and lax_true(master.node.value)):
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{bf16}.bf16_optimizer_states` needs `bf16_master_weights_and_grads`: "
                    "DeepSpeed stops with `bf16_optimizer_states requires "
                    "bf16_master_weights_and_grads to be enabled.`",
                )
