from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, as_list, is_train_group, number, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class TrainingDataMissing(Rule):
    code = "LF014"
    name = "training-data-missing"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    # a missing dataset matters only with one of these written (their defaults need no data)
    triggers = frozenset({"val_size", "do_train", "do_eval", "do_predict", "predict_with_generate", "eval_strategy"})
    summary = "Training without `dataset`, or evaluation without `eval_dataset`/`val_size`, or both split ways"
    why = (
        "Confidence: certain. DataArguments refuses `val_size` without `dataset` and `val_size` together with "
        "`eval_dataset`. get_train_args refuses `do_train` without `dataset`, and evaluation or prediction "
        "(`do_eval`, `do_predict`, `predict_with_generate`, or an `eval_strategy` other than `no`, which turns "
        "`do_eval` on in TrainingArguments) without `eval_dataset` and with `val_size` 0."
    )
    fails_when = "At start-up (DataArguments / get_train_args)."
    evidence = (
        "llamafactory 0.9.5 hparams/data_args.py L159-163",
        "llamafactory 0.9.5 hparams/parser.py L359-365",
        "transformers 5.6.0 training_args.py L1537-1538 (`eval_strategy` != no sets do_eval)",
    )
    example = "eval_strategy: steps   (no eval_dataset, no val_size)  ->  add val_size: 0.1"
    fix_safety = "No fix: the data split is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        dataset = as_list(value_of(ctx, "dataset"))
        eval_dataset = as_list(value_of(ctx, "eval_dataset"))
        val_size = number(value_of(ctx, "val_size"))
        split = val_size is not None and val_size > 1e-6
        if split and not dataset:
            yield report(
                self,
                ctx,
                ("val_size",),
                "`val_size` without `dataset`: `Cannot specify `val_size` if `dataset` is None.`",
            )
        if split and eval_dataset:
            yield report(
                self,
                ctx,
                ("val_size", "eval_dataset"),
                "`val_size` and `eval_dataset` together: LLaMA-Factory stops at start-up with "
                "`Cannot specify `val_size` if `eval_dataset` is not None.`",
            )
        if not is_train_group(ctx):
            return
        if on(ctx, "do_train") and not dataset:
            yield report(
                self,
                ctx,
                ("dataset", "do_train"),
                "`do_train` without `dataset`: LLaMA-Factory stops at start-up with `Please specify dataset "
                "for training.`",
            )
        evaluating = [k for k in ("do_eval", "do_predict", "predict_with_generate") if on(ctx, k)]
        strategy = value_of(ctx, "eval_strategy")
        if isinstance(strategy, str) and strategy != "no":
            evaluating.append("eval_strategy")
        if evaluating and not eval_dataset and val_size is not None and val_size < 1e-6:
            yield report(
                self,
                ctx,
                tuple(evaluating),
                f"`{evaluating[0]}` without `eval_dataset` or `val_size`: get_train_args stops at start-up with "
                "`Please make sure eval_dataset be provided or val_size >1e-6`",
            )
