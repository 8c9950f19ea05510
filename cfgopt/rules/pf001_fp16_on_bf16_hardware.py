from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, training
from cfgopt.text.diagnostics import Diagnostic, Severity


class Fp16OnBf16Hardware(Rule):
    code = "PF001"
    name = "fp16-on-bf16-hardware"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    summary = "fp16 mixed precision on a GPU that has bf16: loss scaling and overflow risk for no speed gain"
    why = (
        "Confidence: certain (numerics) / likely (speed). A GPU with bf16 hardware (NVIDIA Ampere and newer, "
        "every AMD Instinct since MI200) runs bf16 at the fp16 rate: AMD measured MI300X GEMMs at 708 TFLOP/s "
        "bf16 vs 654 fp16. fp16 adds "
        "dynamic loss scaling (skipped steps, overflow in large-activation models) that bf16 does not need. On an "
        "H200, the fp16 + eager variant ran 1.08x the bf16 + SDPA one at Alpaca lengths: no real speed reason."
    )
    fails_when = "Never fails: a slower or less stable run (loss-scale overflows skip steps)."
    evidence = (
        "docs/evidence/rocm_perf.md §2.2 and R04 (AMD max-achievable FLOPs: bf16 708 vs fp16 654 TFLOP/s)",
        "bench/h200/measurements.md V1 vs V4 (fp16/eager 2178 vs bf16/sdpa 2011 tok/s, within noise)",
        "llamafactory 0.9.5 hparams/parser.py L522-525 (compute dtype from bf16/fp16)",
    )
    example = "fp16: true   ->  bf16: true"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = "Unsafe: changes the training precision."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not target.stated or not target.bf16 or target.platform == "cpu" or not training(ctx):
            return  # no target: whether bf16 is there is unknown; V100 / T4: fp16 is right (LF008)
        fp16, bf16 = entry_of(ctx, "fp16"), entry_of(ctx, "bf16")
        if fp16 is None or not fp16.node.value or (bf16 is not None and bf16.node.value):
            return  # both on: LF004
        src = ctx.source
        if bf16 is None:
            fix_edits = edits.rename_key(src, fp16, "bf16")
        else:
            a, b = edits.replace_value(src, fp16, False), edits.replace_value(src, bf16, True)
            fix_edits = a + b if a and b else None
        yield self.at_entry(
            ctx,
            fp16,
            f"`fp16: true` on {target.name}, which has bf16 at the fp16 rate: bf16 needs no loss scaling and is not "
            "slower",
            fix=self.fix("Use bf16", fix_edits, safe=False),
        )
