from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Fp16AndBf16(Rule):
    code = "LF004"
    name = "fp16-and-bf16"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    triggers = frozenset({"fp16", "bf16"})
    summary = "Both fp16 and bf16 are on"
    why = "The HF TrainingArguments refuse two mixed-precision modes at once."
    fails_when = "At start-up: `ValueError: At most one of fp16 and bf16 can be True, but not both`."
    evidence = ("transformers 5.6.0 training_args.py `TrainingArguments.__post_init__`",)
    example = "fp16: true\nbf16: true   ->  fp16: false (on bf16 hardware)"
    fix_safety = (
        "Unsafe: keeps bf16 and sets fp16 to false; on a GPU without bf16 hardware (V100, T4) keeps fp16 and sets "
        "bf16 to false, except for a model that overflows fp16 (Qwen2 and later, LF050), which keeps bf16; no fix "
        "for `--target cpu`."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None:
            return
        fp16, bf16 = src.root.get("fp16"), src.root.get("bf16")
        if fp16 is None or bf16 is None or not (fp16.node.value and bf16.node.value):
            return
        fix = None
        target = ctx.settings.target
        # fp16 trains nothing for a model trained in bf16 (LF050): it keeps bf16, emulated on V100 / T4 (LF008)
        if target.bf16 or (target.platform in ("cuda", "rocm") and ctx.job.overflows_fp16):
            fix = self.fix("Set `fp16: false` (keep bf16)", edits.replace_value(src, fp16, False), safe=False)
        elif target.platform in ("cuda", "rocm"):  # V100 / T4: no bf16 hardware (LF008)
            fix = self.fix("Set `bf16: false` (keep fp16)", edits.replace_value(src, bf16, False), safe=False)
        yield self.at_entry(
            ctx,
            fp16,
            "fp16 and bf16 are both on: TrainingArguments stops with `At most one of "
            "fp16 and bf16 can be True, but not both`",
            fix=fix,
        )
