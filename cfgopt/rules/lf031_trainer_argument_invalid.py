from __future__ import annotations

import json
import math
from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import on, top_entries, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind
from cfgopt.text.user_text import as_float, is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Schedulers that need a floor through `lr_scheduler_kwargs` (transformers 5.6.0 optimization.py L372-377, L452-457)
MIN_LR_SCHEDULERS = ("cosine_with_min_lr", "cosine_warmup_with_min_lr")
MIN_LR_KEYS = ("min_lr", "min_lr_rate")


def _scheduler_kwargs(value: Any) -> dict | None:
    """`lr_scheduler_kwargs` as TrainingArguments leaves it: a dict, a string starting with `{` parsed as JSON
    (training_args.py L1495-1501), None for nothing; anything else (a path, bad JSON) is not judged here."""
    if value is None:
        return {}
    if isinstance(value, str) and value.startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _min_lr_problem(scheduler: Any, kwargs: Any) -> str | None:
    """What `get_scheduler` raises for a min-lr cosine schedule: neither floor given, or both."""
    if scheduler not in MIN_LR_SCHEDULERS:
        return None
    given = _scheduler_kwargs(kwargs)
    if given is None:
        return None
    floors = [key for key in MIN_LR_KEYS if given.get(key) is not None]
    if not floors:
        return "One of min_lr or min_lr_rate should be set through the `lr_scheduler_kwargs`"
    if len(floors) == 2:
        return "Only one of min_lr or min_lr_rate should be set"
    return None


def _step_problem(key: str, value: Any) -> str | None:
    """TrainingArguments' check of a `*_steps` above 1 under the steps strategy: `value != int(value)` raises
    ValueError for a fraction and OverflowError for an infinity (`int(inf)`); an integer of any size passes."""
    if not isinstance(value, float) or not value > 1:
        return None
    if math.isinf(value):
        return f"`{key}` is infinite: its `int()` raises OverflowError"
    if not value.is_integer():
        return f"`{key}` must be an integer if bigger than 1 (it is {value})"
    return None


class TrainerArgumentInvalid(Rule):
    code = "LF031"
    name = "trainer-argument-invalid"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    # every finding is reported on its own key
    triggers = frozenset(
        {
            "torch_empty_cache_steps",
            "logging_steps",
            "eval_steps",
            "save_steps",
            "fp16_full_eval",
            "lr_scheduler_type",
            "warmup_steps",
            "dataloader_prefetch_factor",
        }
    )
    summary = (
        "A value HF TrainingArguments refuses when it is built (steps, warmup, schedulers, full-eval precision), "
        "or the scheduler when training starts (a min-lr cosine without its floor)"
    )
    why = (
        "Confidence: certain. transformers' `TrainingArguments.__post_init__` validates a handful of values as "
        "LLaMA-Factory builds the arguments: `*_steps` above 1 must be integers under a steps strategy, "
        "`logging_steps` cannot be 0, `warmup_steps` cannot be negative, a plateau or greedy scheduler needs an "
        "eval strategy, fp16 and bf16 full-eval exclude each other, `torch_empty_cache_steps` must be a positive "
        "integer, and `dataloader_prefetch_factor` needs worker processes. Later, when training starts, "
        "`get_scheduler` refuses `cosine_with_min_lr` / `cosine_warmup_with_min_lr` without exactly one of "
        "`min_lr` and `min_lr_rate` in `lr_scheduler_kwargs` (LLaMA-Factory adds no default; a DeepSpeed "
        "`scheduler` block replaces the HF scheduler, and is not judged here)."
    )
    fails_when = (
        "At start-up, in `get_train_args`, before data and model loading; the min-lr schedulers when training "
        "starts, after data and model loading."
    )
    evidence = (
        "transformers 5.6.0 training_args.py `TrainingArguments.__post_init__` L1681-1763",
        "transformers 5.6.0 optimization.py L372-377 and L452-457 (`get_cosine_with_min_lr_schedule_with_warmup`, "
        "`get_cosine_with_min_lr_schedule_with_warmup_lr_rate`), integrations/deepspeed.py L557-559 (a DeepSpeed "
        "`scheduler` block); llamafactory 0.9.5 train/trainer_utils.py L551-570 (`create_custom_scheduler`: no "
        "default for them); run on CPU with the Trainer",
    )
    example = "save_steps: 1.5   ->  an integer (or a ratio below 1)"

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None:
            return
        data = src.data if isinstance(src.data, dict) else {}
        entries = {e.key: e for e in top_entries(src)}

        def get(key: str, default: Any) -> Any:
            return data.get(key, default)

        def report(key: str, message: str) -> Diagnostic:
            return self.at_entry(ctx, entries[key], f"{message}: TrainingArguments stops at start-up", on="value")

        strategy = {
            "logging": get("logging_strategy", "steps"),
            "eval": get("eval_strategy", "no"),
            "save": get("save_strategy", "steps"),
        }
        if "torch_empty_cache_steps" in entries and data["torch_empty_cache_steps"] is not None:
            value = data["torch_empty_cache_steps"]
            if not (is_int(value) and value > 0):
                yield report(
                    "torch_empty_cache_steps", f"`torch_empty_cache_steps` must be a positive integer, not {value!r}"
                )
        logging_steps = as_float(get("logging_steps", 500))
        if "logging_steps" in entries and strategy["logging"] == "steps" and logging_steps == 0:
            yield report("logging_steps", "`logging_steps: 0` with the steps logging strategy")
        for kind in ("logging", "eval", "save"):
            key = f"{kind}_steps"
            problem = _step_problem(key, data.get(key)) if key in entries and strategy[kind] == "steps" else None
            if problem:
                yield report(key, problem)
        if "fp16_full_eval" in entries and data.get("fp16_full_eval") and data.get("bf16_full_eval"):
            yield report("fp16_full_eval", "`fp16_full_eval` and `bf16_full_eval` are both on")
        scheduler = data.get("lr_scheduler_type")
        if (
            "lr_scheduler_type" in entries
            and scheduler in ("reduce_lr_on_plateau", "greedy")
            and strategy["eval"] == "no"
        ):
            yield report(
                "lr_scheduler_type", f"`lr_scheduler_type: {scheduler}` needs an eval strategy (eval_strategy is no)"
            )
        yield from self._min_lr(ctx, entries)
        warmup = as_float(data.get("warmup_steps"))
        # transformers 5.6 copies a set warmup_ratio over warmup_steps before this check (training_args.py L1511)
        if "warmup_steps" in entries and warmup is not None and warmup < 0 and data.get("warmup_ratio") is None:
            yield report("warmup_steps", "`warmup_steps` is negative")
        prefetch = data.get("dataloader_prefetch_factor")
        if "dataloader_prefetch_factor" in entries and prefetch is not None and get("dataloader_num_workers", 0) == 0:
            yield report(
                "dataloader_prefetch_factor", "`dataloader_prefetch_factor` needs `dataloader_num_workers` > 0"
            )

    def _min_lr(self, ctx: Context, entries: dict) -> Iterator[Diagnostic]:
        """A min-lr cosine schedule without exactly one floor: `get_scheduler` stops when training starts."""
        scheduler = value_of(ctx, "lr_scheduler_type")
        if "lr_scheduler_type" not in entries or not training(ctx) or _deepspeed_schedules(ctx) is not False:
            return
        problem = _min_lr_problem(scheduler, value_of(ctx, "lr_scheduler_kwargs"))
        if problem:
            yield self.at_entry(
                ctx,
                entries["lr_scheduler_type"],
                f"`lr_scheduler_type: {scheduler}` needs exactly one of `min_lr` and `min_lr_rate` in "
                "`lr_scheduler_kwargs`: the scheduler stops when training starts, after data and model loading "
                f'(get_scheduler: "{problem}")',
                on="value",
            )


def _deepspeed_schedules(ctx: Context) -> bool | None:
    """Does a DeepSpeed `scheduler` block replace the HF scheduler? None: a DeepSpeed JSON that was not read."""
    if not on(ctx, "deepspeed"):
        return False
    ds = ctx.deepspeed
    data = ds.data if ds is not None and ds.root is not None else None
    return "scheduler" in data if isinstance(data, dict) else None
