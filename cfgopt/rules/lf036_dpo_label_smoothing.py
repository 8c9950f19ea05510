from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, is_train_group, number, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class DpoLabelSmoothing(Rule):
    code = "LF036"
    name = "dpo-label-smoothing-loss"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"dpo_label_smoothing"})
    summary = "`dpo_label_smoothing` > 0 with a DPO `pref_loss` other than sigmoid"
    why = (
        "Confidence: certain. FinetuningArguments refuses label smoothing (the robust DPO loss) for every "
        "preference loss but `sigmoid` (the default), in every release 0.9.0-0.9.5."
    )
    fails_when = (
        "At start-up (FinetuningArguments.__post_init__): `dpo_label_smoothing` is only valid for sigmoid loss."
    )
    evidence = (
        "llamafactory 0.9.5 hparams/finetuning_args.py `__post_init__`",
        "the audit table, tests/data/startup-audit.json",
    )
    example = (
        "stage: dpo\npref_loss: ipo\ndpo_label_smoothing: 0.1   ->  pref_loss: sigmoid, or drop dpo_label_smoothing"
    )
    fix_safety = "No fix: which of the two the user wants is a choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx) or value_of(ctx, "stage") != "dpo":
            return
        smoothing = number(value_of(ctx, "dpo_label_smoothing"))
        loss = value_of(ctx, "pref_loss")
        if smoothing is None or smoothing <= 1e-6 or loss == "sigmoid" or not isinstance(loss, str):
            return
        yield report(
            self,
            ctx,
            ("dpo_label_smoothing", "pref_loss"),
            f"`dpo_label_smoothing: {smoothing:g}` with `pref_loss: {loss}`: label smoothing is only valid for the "
            "sigmoid loss, LLaMA-Factory stops at start-up",
        )
