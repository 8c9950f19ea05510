from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, on, report, training
from cfgopt.text.diagnostics import Diagnostic, Severity


class NoMixedPrecision(Rule):
    code = "PF002"
    name = "no-mixed-precision"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    summary = "Training with neither `bf16` nor `fp16` (nor `pure_bf16`, BAdam): no mixed precision"
    why = (
        "Confidence: likely. Without `bf16`/`fp16` the HF Trainer runs no autocast; LLaMA-Factory still loads the "
        "weights in a half dtype it infers, but the trainable parameters are upcast to fp32 and the matmuls that "
        "touch them run in fp32, which is several times slower on matrix cores and needs more memory. "
        "LLaMA-Factory itself logs 'We recommend enable mixed precision training.'"
    )
    fails_when = "Never fails: a slower run."
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py L438-439 ('We recommend enable mixed precision training.')",
        "llamafactory 0.9.5 model/adapter.py L313-324 (trainable parameters upcast to fp32 unless pure_bf16)",
    )
    example = "(no bf16/fp16)   ->  bf16: true"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "Unsafe: adds `bf16: true` (`fp16: true` on V100 / T4), which changes the training precision; no fix "
        "without a target, where neither holds on every GPU. Quiet on V100 / T4 for a model that overflows fp16 "
        "(Qwen2 and later, LF050): fp16 trains nothing there and bf16 is emulated, so there is nothing to advise."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or ctx.settings.target.platform == "cpu":
            return
        if any(on(ctx, k) for k in ("bf16", "fp16", "pure_bf16", "use_badam", "use_cpu")):
            return
        if (ctx.source.command or {}).get("launcher_precision") not in (None, "no"):
            return  # `accelerate launch --mixed_precision bf16`: the Trainer autocasts all the same
        src = ctx.source
        stated, overflows = ctx.settings.target.stated, ctx.job.overflows_fp16
        half = "bf16" if ctx.settings.target.bf16 else "fp16"  # V100 / T4: no bf16 hardware (LF008)
        if half == "fp16" and overflows and stated:
            return  # fp16 trains nothing for this model (LF050), and bf16 is emulated here (LF008): nothing to advise
        entry = entry_of(ctx, half)
        fix_edits = edits.replace_value(src, entry, True) if entry is not None else edits.insert_top(src, half, True)
        # no target: neither half holds on every GPU (bf16 is emulated on V100 / T4), so the advice names both
        on_v100 = (
            "on V100 / T4 keep fp32: fp16 overflows this model, LF050"
            if overflows
            else "`fp16: true` on V100 / T4: no bf16 there"
        )
        advice = f"set `{half}: true`" if stated else f"set `bf16: true` ({on_v100})"
        yield report(
            self,
            ctx,
            ("bf16", "fp16", "do_train"),
            "training without mixed precision (neither `bf16` nor `fp16`): trainable weights and their matmuls run "
            f"in fp32; {advice}",
            fix=self.fix(f"Set `{half}: true`", fix_edits, safe=False) if stated else None,
        )
