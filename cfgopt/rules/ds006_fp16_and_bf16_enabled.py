from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import enabled, lax_true
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Fp16AndBf16Enabled(Rule):
    code = "DS006"
    name = "fp16-and-bf16-enabled"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"fp16"})  # fp16.enabled must be on: a bf16/bfloat16 block alone cannot fire
    summary = "Both `fp16.enabled` and `bf16.enabled` are true"
    why = "DeepSpeed refuses two half-precision modes at once."
    fails_when = "At DeepSpeedConfig construction: `bfloat16 and fp16 modes cannot be simultaneously enabled`."
    evidence = ("deepspeed 0.19.8 runtime/config.py `_do_error_check` / precision config assertion",)
    example = '"fp16": {"enabled": true}, "bf16": {"enabled": true}   ->  set both to "auto"'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        bf16_block = "bf16" if enabled(src, "bf16") is not None else "bfloat16"
        if lax_true(enabled(src, "fp16")) and lax_true(enabled(src, bf16_block)):
            entry = src.find(("fp16", "enabled"))
            if entry is not None:
                yield self.at_entry(
                    ctx,
                    entry,
                    "fp16 and bf16 are both enabled: DeepSpeed refuses the config; "
                    'keep one (or set both to "auto" and let the training config decide)',
                    on="value",
                )
