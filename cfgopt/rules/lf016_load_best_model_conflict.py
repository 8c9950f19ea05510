from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, number, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity

# Schedulers for which TrainingArguments fills in `metric_for_best_model: loss` (training_args.py L1551-1556)
METRIC_FILLED_BY = ("reduce_lr_on_plateau", "greedy")


class LoadBestModelConflict(Rule):
    code = "LF016"
    name = "load-best-model-conflict"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"load_best_model_at_end", "save_strategy"})
    summary = (
        "`load_best_model_at_end` with unmatched save/eval strategies or steps, with rm/ppo, or save_only_model; "
        "`save_strategy: best` without a metric"
    )
    why = (
        "Confidence: certain. TrainingArguments requires, for `load_best_model_at_end`, that the save and eval "
        "strategies match (unless `save_strategy: best`) and, for `steps`, that `save_steps` be a multiple of "
        "`eval_steps`; the defaults (`eval_strategy: no`, `save_strategy: steps`) do not match. LLaMA-Factory "
        "refuses it for the rm and ppo stages; the HF Trainer refuses it with `save_only_model` under DeepSpeed "
        "or FSDP. A truthy string (`true \\` with a stray backslash, LLaMA-Factory #6721) counts as on. "
        "`save_strategy: best` saves when the metric improves, so the Trainer wants `metric_for_best_model`; "
        "TrainingArguments fills in `loss` only with `load_best_model_at_end` or a plateau / greedy scheduler."
    )
    fails_when = (
        "At start-up (TrainingArguments / get_train_args); with `save_only_model` under DeepSpeed/FSDP, and "
        "`save_strategy: best` without a metric, when the Trainer is built, after data and model loading."
    )
    evidence = (
        "transformers 5.6.0 training_args.py L1704-1730",
        "llamafactory 0.9.5 hparams/parser.py L329-330",
        "transformers 5.6.0 trainer.py L838-845 (save_only_model with DeepSpeed/FSDP)",
        "transformers 5.6.0 trainer.py L639-643 (`save_strategy: best` without `metric_for_best_model`), "
        "training_args.py L1551-1556 (`loss` filled in for load_best_model_at_end and plateau / greedy)",
        "LLaMA-Factory issue #6721",
    )
    example = "load_best_model_at_end: true   (eval_strategy unset)  ->  eval_strategy: steps, eval_steps = save_steps"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        yield from self._best_without_metric(ctx)
        entry = entry_of(ctx, "load_best_model_at_end")
        if entry is None or not entry.node.value:
            return
        stage = value_of(ctx, "stage")
        if stage in ("rm", "ppo"):
            yield self.at_entry(
                ctx, entry, f"stage {stage}: `RM and PPO stages do not support `load_best_model_at_end`.` (start-up)"
            )
        evals, saves = value_of(ctx, "eval_strategy"), value_of(ctx, "save_strategy")
        if isinstance(evals, str) and isinstance(saves, str) and saves != "best":
            if evals != saves:
                yield report(
                    self,
                    ctx,
                    ("eval_strategy", "save_strategy", "load_best_model_at_end"),
                    f"`load_best_model_at_end` needs the save and eval strategies to match (eval `{evals}`, save "
                    f"`{saves}`): TrainingArguments stops at start-up",
                )
            elif evals == "steps":
                save_steps = number(value_of(ctx, "save_steps"))
                eval_steps = number(value_of(ctx, "eval_steps"))
                if eval_steps in (None, 0.0):
                    eval_steps = number(value_of(ctx, "logging_steps"))
                if save_steps and eval_steps and save_steps >= 1 and eval_steps >= 1 and save_steps % eval_steps:
                    yield report(
                        self,
                        ctx,
                        ("save_steps", "eval_steps"),
                        f"`load_best_model_at_end` needs `save_steps` ({save_steps:g}) to be a round multiple of "
                        f"`eval_steps` ({eval_steps:g}): TrainingArguments stops at start-up",
                    )
        if on(ctx, "save_only_model") and (on(ctx, "deepspeed") or on(ctx, "fsdp")):
            wrapper = "DeepSpeed" if on(ctx, "deepspeed") else "FSDP"
            yield report(
                self,
                ctx,
                ("save_only_model",),
                f"`{wrapper} can't be used with `save_only_model` along with `load_best_model_at_end`.` "
                "(when the Trainer is built, after model load)",
            )

    def _best_without_metric(self, ctx: Context) -> Iterator[Diagnostic]:
        """`save_strategy: best` with no metric to compare: the Trainer's constructor refuses it."""
        if value_of(ctx, "save_strategy") != "best" or value_of(ctx, "metric_for_best_model") is not None:
            return
        if on(ctx, "load_best_model_at_end") or value_of(ctx, "lr_scheduler_type") in METRIC_FILLED_BY:
            return  # TrainingArguments sets metric_for_best_model to "loss"
        yield report(
            self,
            ctx,
            ("save_strategy",),
            "`save_strategy: best` without `metric_for_best_model`: the Trainer stops when it is built, after data "
            "and model loading (`'args.metric_for_best_model' must be provided when using 'best' save_strategy "
            "...`); name the metric (`eval_loss`, say)",
        )
