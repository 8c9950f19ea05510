"""What a DeepSpeed `optimizer` / `scheduler` block does to a run, read from DeepSpeed's code: the defaults a
key left out falls back to, and the learning-rate curve each scheduler draws. Shared by XF002 (explicit values
the HF Trainer compares), XF005 (what the blocks replace or leave at DeepSpeed's defaults) and DS025 (the
scheduler's constructor checks).

Under the HF Trainer (transformers 4.41-5.6 integrations/deepspeed.py `deepspeed_optim_sched`) an `optimizer`
block makes DeepSpeed build the optimizer and a `scheduler` block makes it build the schedule; the Trainer fills
only the keys that are present and "auto" (`trainer_config_process` / `trainer_config_finalize`), so a key left
out takes the default of the class DeepSpeed builds, whatever the training config says.
"""

from __future__ import annotations

import math

from cfgopt.text.record import Record
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Source
from cfgopt.text.user_text import is_int, is_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The HF Trainer's `fill_match` keys of an optimizer block -> the TrainingArguments fields it fills them from
# (transformers 5.6.0 integrations/deepspeed.py:160-167; 4.41.2 :161-168).
OPTIMIZER_TRAINER_KEYS: dict[str, tuple[str, ...]] = {
    "lr": ("learning_rate",),
    "betas": ("adam_beta1", "adam_beta2"),
    "eps": ("adam_epsilon",),
    "weight_decay": ("weight_decay",),
}

_ADAM = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
# DeepSpeed optimizer name -> the defaults of the class `_configure_basic_optimizer` builds, for the keys the
# Trainer fills: FusedAdam / DeepSpeedCPUAdam (ops/adam/fused_adam.py:76-83, cpu_adam.py:15-22), FusedLamb
# (ops/lamb/fused_lamb.py:41-48), FusedLion / DeepSpeedCPULion (ops/lion/fused_lion.py:36, cpu_lion.py:15; no
# eps). The same in DeepSpeed 0.14.5-0.19.8.
OPTIMIZER_DEFAULTS: dict[str, dict[str, Any]] = {
    "adam": _ADAM,
    "adamw": _ADAM,
    "lamb": _ADAM,
    "lion": {"lr": 1e-3, "betas": [0.9, 0.999], "weight_decay": 0.0},
}
# `torch_adam: true` builds torch.optim.AdamW (adam_w_mode, the default), whose weight decay defaults to 0.01.
TORCH_ADAMW_WEIGHT_DECAY = 0.01

# The schedulers of deepspeed/runtime/lr_schedules.py that the HF Trainer fills keys of, and what each does.
WARMUP_SCHEDULERS = ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR")
WARMUP_STEPS_DEFAULT = 1000  # lr_schedules.py WarmupLR / WarmupDecayLR / WarmupCosineLR `warmup_num_steps=1000`
DECAY_MAX_LR_DEFAULT = 0.001  # WarmupDecayLR `warmup_max_lr: float = 0.001` (every release)
# WarmupLR's `warmup_max_lr` defaults to 0.001 up to 0.17.1; from 0.17.2 (PR #7360) to the optimizer's lr.
WARMUPLR_INHERITS_LR_FROM = (0, 17, 2)
# From 0.19.3 (PR #8126) the warm-up schedulers raise `ValueError: warmup_num_steps must be a positive
# integer` for 0, a negative number or a float; before, `max(2, warmup_num_steps)` took any number.
POSITIVE_WARMUP_FROM = (0, 19, 3)
# Constructor arguments without a default (lr_schedules.py, 0.14.5-0.19.8): left out, a TypeError at start.
REQUIRED_SCHEDULER_PARAMS: dict[str, tuple[str, ...]] = {
    "WarmupDecayLR": ("total_num_steps",),
    "WarmupCosineLR": ("total_num_steps",),
    "OneCycle": ("cycle_min_lr", "cycle_max_lr"),
}


def is_hf_shaped(source: Source) -> bool:
    """Whether a DeepSpeed JSON is written for the HF Trainer / accelerate: only they fill "auto" (DeepSpeed
    itself never does), so a JSON with an "auto" value anywhere is one. A JSON without any is as likely a
    native DeepSpeed script's, where the blocks are how a schedule is configured."""
    return _has_auto(source.data)


def _has_auto(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_auto(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_auto(v) for v in value)
    return value == "auto"


def optimizer_defaults(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """The defaults of the class an optimizer block of type `kind` builds, for the keys the Trainer fills (empty
    when the type is not one of DeepSpeed's own: a torch optimizer's defaults vary with the class)."""
    defaults = dict(OPTIMIZER_DEFAULTS.get(kind.lower(), {}))
    if defaults and kind.lower() in ("adam", "adamw") and params.get("torch_adam") is True:
        adam_w = kind.lower() == "adamw" or params.get("adam_w_mode", True) is not False
        defaults["weight_decay"] = TORCH_ADAMW_WEIGHT_DECAY if adam_w else 0.0
    return defaults


def trainer_value(key: str, values: dict[str, Any]) -> Any:
    """What the HF Trainer would fill an optimizer key with, from the TrainingArguments values given."""
    fields = OPTIMIZER_TRAINER_KEYS[key]
    if len(fields) == 1:
        return values.get(fields[0])
    return [values.get(field) for field in fields]


def same_number(a: Any, b: Any) -> bool:
    """Equal as the optimizer sees them: numbers (and lists of numbers) compared as floats."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_number(x, y) for x, y in zip(a, b, strict=True))
    numbers = is_number(a) and is_number(b)
    try:
        return numbers and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    except OverflowError:  # a 400-digit integer: equal only to itself
        return a == b


class Warmup(Record):
    """The warm-up the HF Trainer fills `warmup_num_steps: "auto"` with, where the config alone says it."""

    steps: int | None  # None: it depends on the run's step count (a ratio), unknown before the data is loaded
    said_by: str  # which keys say it, for messages


def trainer_warmup(warmup_steps: Any, warmup_ratio: Any) -> Warmup:
    """`TrainingArguments.get_warmup_steps` (transformers 4.41.2 training_args.py:2345: `warmup_steps` if > 0
    else ceil(steps x warmup_ratio); 5.6.0: `warmup_ratio` moved into `warmup_steps`, which is a count when
    >= 1 and a ratio below): known when the config gives a count, or no warm-up at all."""
    if not all(_finite(value) for value in (warmup_steps, warmup_ratio) if value is not None):
        return Warmup(None, "a warm-up that is not a finite number")  # the Trainer refuses it (LF002's)
    steps, ratio = warmup_steps or 0, warmup_ratio or 0
    if ratio == 0 and steps >= 1:
        return Warmup(int(steps), f"warmup_steps {warmup_steps}")
    if ratio == 0 and steps == 0:
        return Warmup(0, "no warmup_steps or warmup_ratio")
    return Warmup(None, "a warm-up ratio")


def ignores_learning_rate(kind: str, params: dict[str, Any], ds_version: str) -> bool:
    """Whether the scheduler sets the LR from its own numbers, not from the optimizer's (the Trainer's) lr."""
    if kind in ("OneCycle", "LRRangeTest"):
        return True
    if kind == "WarmupDecayLR":
        return "warmup_max_lr" not in params
    if kind == "WarmupLR":
        return "warmup_max_lr" not in params and version_key(ds_version) < WARMUPLR_INHERITS_LR_FROM
    return False


def _finite(value: Any) -> bool:
    return is_int(value) or (isinstance(value, float) and math.isfinite(value))


def schedule_curve(kind: str, params: dict[str, Any], ds_version: str) -> str:
    """What the learning rate does under DeepSpeed's scheduler `kind` (deepspeed runtime/lr_schedules.py), in
    words; empty for a scheduler this module does not describe (torch's)."""
    warmup = params.get("warmup_num_steps", WARMUP_STEPS_DEFAULT)
    warmup = "the Trainer's warm-up" if warmup == "auto" else f"{warmup} steps"
    shape = "linear" if params.get("warmup_type") == "linear" else "logarithmic"
    if kind == "WarmupLR":
        peak = params.get("warmup_max_lr")
        if peak is None:
            inherits = version_key(ds_version) >= WARMUPLR_INHERITS_LR_FROM
            peak = "the optimizer's lr" if inherits else f"{DECAY_MAX_LR_DEFAULT} (its default in {ds_version})"
        peak = "learning_rate" if peak == "auto" else peak
        return (
            f"the LR rises ({shape}) to {peak} over {warmup}, then stays flat at it for the rest of the run: "
            "WarmupLR never decays"
        )
    if kind == "WarmupDecayLR":
        peak = params.get("warmup_max_lr", f"{DECAY_MAX_LR_DEFAULT} (its default)")
        peak = "learning_rate" if peak == "auto" else peak
        return f"the LR rises ({shape}) to {peak} over {warmup}, then falls linearly to 0 at total_num_steps"
    if kind == "WarmupCosineLR":
        floor = params.get("cos_min_ratio", 0.0001)
        return f"the LR rises ({shape}) to the optimizer's lr over {warmup}, then follows a cosine to {floor} of it"
    if kind == "OneCycle":
        low, high = params.get("cycle_min_lr", "?"), params.get("cycle_max_lr", "?")
        return f"the LR cycles between cycle_min_lr {low} and cycle_max_lr {high}, whatever learning_rate says"
    if kind == "LRRangeTest":
        low = params.get("lr_range_test_min_lr", 0.001)
        return (
            f"the LR grows from {low} for the whole run (an LR range test, not a training schedule), whatever "
            "learning_rate says"
        )
    return ""
