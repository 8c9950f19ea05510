from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import as_list, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class DataOptionConflict(Rule):
    code = "LF029"
    name = "data-option-conflict"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"mask_history", "train_on_prompt", "interleave_probs"})
    summary = "`mask_history` with `train_on_prompt`, or `interleave_probs` that cannot apply"
    why = (
        "Confidence: certain. DataArguments.__post_init__ refuses `mask_history` together with `train_on_prompt`, "
        "`interleave_probs` with `mix_strategy: concat` (the default), and `interleave_probs` whose count differs "
        "from the number of datasets (or eval datasets)."
    )
    fails_when = "At start-up (DataArguments)."
    evidence = ("llamafactory 0.9.5 hparams/data_args.py L165-183",)
    example = "interleave_probs: 0.7,0.3   ->  add mix_strategy: interleave_under"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if on(ctx, "mask_history") and on(ctx, "train_on_prompt"):
            yield report(
                self,
                ctx,
                ("mask_history", "train_on_prompt"),
                "`mask_history` and `train_on_prompt` together: LLaMA-Factory stops at start-up with `mask_history is "
                "incompatible with train_on_prompt.`",
            )
        probs = value_of(ctx, "interleave_probs")
        if probs is None:
            return
        if value_of(ctx, "mix_strategy") == "concat":
            yield report(
                self,
                ctx,
                ("interleave_probs",),
                "`interleave_probs` with `mix_strategy: concat` (the default): LLaMA-Factory stops at start-up with "
                "`interleave_probs is only valid for interleaved mixing.`",
            )
            return
        count = len(as_list(probs))
        for key, what in (("dataset", "dataset"), ("eval_dataset", "eval dataset")):
            names = as_list(value_of(ctx, key))
            if names and len(names) != count:
                yield report(
                    self,
                    ctx,
                    ("interleave_probs",),
                    f"{count} `interleave_probs` for {len(names)} {what}(s): LLaMA-Factory stops at start-up with "
                    f"`The length of {what} and interleave probs should be identical.`",
                )
