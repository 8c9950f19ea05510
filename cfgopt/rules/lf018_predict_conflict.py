from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, is_train_group, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class PredictConflict(Rule):
    code = "LF018"
    name = "predict-conflict"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"do_predict", "predict_with_generate"})
    summary = "SFT `do_predict` without `predict_with_generate`, or `predict_with_generate` with `compute_accuracy`"
    why = (
        "Confidence: certain. For `stage: sft`, get_train_args needs `predict_with_generate` to save predictions, "
        "and refuses `predict_with_generate` together with `compute_accuracy` (accuracy is computed from logits, "
        "generation returns tokens)."
    )
    fails_when = "At start-up (get_train_args)."
    evidence = ("llamafactory 0.9.5 hparams/parser.py L326-327, L371-372",)
    example = "do_predict: true   ->  add predict_with_generate: true"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        if value_of(ctx, "stage") == "sft" and on(ctx, "do_predict") and not on(ctx, "predict_with_generate"):
            yield report(
                self,
                ctx,
                ("do_predict",),
                "`do_predict` without `predict_with_generate` (SFT): get_train_args stops at start-up with "
                "`Please enable `predict_with_generate` to save model predictions.`",
            )
        if on(ctx, "predict_with_generate") and on(ctx, "compute_accuracy"):
            yield report(
                self,
                ctx,
                ("compute_accuracy", "predict_with_generate"),
                "`Cannot use `predict_with_generate` and `compute_accuracy` together.` (at start-up)",
            )
