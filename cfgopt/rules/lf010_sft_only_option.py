from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity

SFT_ONLY = {
    "predict_with_generate": "`predict_with_generate` cannot be set as True except SFT.",
    "neat_packing": "`neat_packing` cannot be set as True except SFT.",
    "train_on_prompt": "`train_on_prompt` or `mask_history` cannot be set as True except SFT.",
    "mask_history": "`train_on_prompt` or `mask_history` cannot be set as True except SFT.",
}


class SftOnlyOption(Rule):
    code = "LF010"
    name = "sft-only-option"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset(SFT_ONLY)
    summary = "`predict_with_generate`, `neat_packing`, `train_on_prompt` or `mask_history` outside `stage: sft`"
    why = (
        "Confidence: certain. get_train_args refuses these SFT-only options for every other stage (pt, rm, ppo, "
        "dpo, kto). A typical source: a DPO or pre-training config made by copying an SFT one."
    )
    fails_when = "At start-up (get_train_args), before any data or model work."
    evidence = ("llamafactory 0.9.5 hparams/parser.py L316-324",)
    example = "stage: dpo\nneat_packing: true   ->  remove neat_packing"
    fix_safety = "No fix: remove the option or change the stage yourself."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        stage = value_of(ctx, "stage")
        if stage == "sft" or not isinstance(stage, str):
            return
        for key, message in SFT_ONLY.items():
            entry = entry_of(ctx, key)
            if entry is not None and entry.node.value:
                yield self.at_entry(
                    ctx, entry, f"`{key}` with `stage: {stage}`: get_train_args stops at start-up with `{message}`"
                )
