from __future__ import annotations

from collections.abc import Callable, Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_set, is_train_group, on, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.record import Record
from cfgopt.text.user_text import is_number

# Optimizers built from torch.optim, whose constructor refuses `not 0.0 <= lr` (torch/optim/adam.py L58-59,
# sgd.py, adagrad.py, rmsprop.py): transformers 5.6.0 trainer_optimizer.py `_OPTIMIZER_HANDLERS`. transformers'
# Adafactor takes a negative rate (run on CPU); the bitsandbytes and other packages' optimizers were not run.
TORCH_OPTIMIZERS = frozenset({"adamw_torch", "adamw_torch_fused", "sgd", "adagrad", "rmsprop"})
# LLaMA-Factory's own optimizers (train/trainer_utils.py `create_custom_optimizer`) other than LoRA+, which builds
# the `optim` class with the same `lr`
CUSTOM_OPTIMIZERS = ("use_galore", "use_apollo", "use_badam", "use_adam_mini", "use_muon")


class Bound(Record):
    """A value the code that reads the key refuses, and where."""

    refused: Callable[[int | float], bool]  # the code's own test on the number as written (NaN goes where it goes)
    rule: str  # what the value must be, after "`key: value` " ({optim}: the optimizer)
    applies: Callable[[Context], bool]  # the run reads the key at all
    failure: str  # the real tool's words and when it says them ({value}: the value)
    evidence: str


def _new_lora_adapter(ctx: Context) -> bool:
    """A LoRA adapter is created by PEFT (not resumed, not Unsloth's): model/adapter.py L204-284."""
    return (
        training(ctx)
        and value_of(ctx, "finetuning_type") == "lora"
        and not is_set(ctx, "adapter_name_or_path")
        and not on(ctx, "use_unsloth")
    )


def _torch_optimizer(ctx: Context) -> bool:
    """The Trainer builds a torch.optim optimizer from `learning_rate` (no DeepSpeed `optimizer` block)."""
    if not training(ctx) or value_of(ctx, "optim") not in TORCH_OPTIMIZERS:
        return False
    if any(on(ctx, key) for key in CUSTOM_OPTIMIZERS):
        return False
    if not on(ctx, "deepspeed"):
        return True
    ds = ctx.deepspeed
    data = ds.data if ds is not None and ds.root is not None else None
    return isinstance(data, dict) and "optimizer" not in data  # a JSON not read: not judged


def _loops_over_batches(ctx: Context) -> bool:
    """Training from a dataset with a length: the Trainer's step count divides by the accumulation (a streamed
    dataset has none, and its steps come from `max_steps`)."""
    return training(ctx) and not on(ctx, "streaming")


def _splits_data(ctx: Context) -> bool:
    """`val_size` splits the training data: data/data_utils.py L109-117 (streaming takes `int(val_size)` rows)."""
    return (
        is_train_group(ctx)
        and is_set(ctx, "dataset")
        and not on(ctx, "streaming")
        and not is_set(ctx, "tokenized_path")
    )


BOUNDS: dict[str, Bound] = {
    "lora_rank": Bound(
        lambda v: v <= 0,
        "must be positive",
        _new_lora_adapter,
        'PEFT stops at model load: "`r` should be a positive integer value but the value passed is {value}"',
        "peft tuners/lora/layer.py L166-167 (`LoraLayer.update_layer`)",
    ),
    "lora_dropout": Bound(
        lambda v: v > 1,
        "must be at most 1",
        _new_lora_adapter,
        "PEFT's `nn.Dropout` stops at model load: `dropout probability has to be between 0 and 1, but got {value}`",
        "peft tuners/lora/layer.py L188-189 (`nn.Dropout(p=lora_dropout)` when above 0); torch nn/modules/dropout.py "
        "L24-27",
    ),
    "learning_rate": Bound(
        lambda v: v < 0,  # AdamW's `not 0.0 <= lr` refuses NaN too, SGD's `lr < 0.0` does not
        "must not be negative for the torch optimizer `{optim}`",
        _torch_optimizer,
        "the optimizer stops when training starts, after data and model loading: `Invalid learning rate: {value}`",
        "torch optim/adam.py L58-59 (AdamW), sgd.py L45-46, adagrad.py, rmsprop.py; transformers 5.6.0 "
        "trainer_optimizer.py `_OPTIMIZER_HANDLERS`",
    ),
    "per_device_train_batch_size": Bound(
        lambda v: v <= 0,
        "must be positive",
        training,
        "the training DataLoader stops when training starts, after data and model loading: `batch_size should be a "
        "positive integer value, but got batch_size={value}`",
        "torch utils/data/sampler.py L317-324 (`BatchSampler`)",
    ),
    "gradient_accumulation_steps": Bound(
        lambda v: v == 0,
        "must not be 0",
        _loops_over_batches,
        "the Trainer's loop divides by it and the run crashes when training starts, after data and model loading: "
        "`ZeroDivisionError`",
        "transformers 5.6.0 trainer.py L2318-2319 (`len_dataloader // args.gradient_accumulation_steps`)",
    ),
    "val_size": Bound(
        lambda v: isinstance(v, float) and v == 1.0,
        "is no fraction below 1: LLaMA-Factory counts rows only above 1 (`int(val_size) if val_size > 1`), so "
        "it asks `datasets` for a test share of 100%",
        _splits_data,
        "`datasets` stops at the split, after the data is read: `test_size={value} should be either positive and "
        "smaller than the number of samples ... or a float in the (0, 1) range`",
        "llamafactory 0.9.5 data/data_utils.py L114-115; datasets 4.0.0 arrow_dataset.py L4733-4742 "
        "(`train_test_split`)",
    ),
}


class ValueOutOfRange(Rule):
    code = "LF056"
    name = "value-out-of-range"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset(BOUNDS)
    summary = "A number outside what the code that reads it accepts (LoRA rank and dropout, rate, batch, val_size)"
    why = (
        "Confidence: certain. The parser checks no range, so these values pass start-up and fail where they are "
        "first used, after the dataset is read and often after the model is loaded: `lora_rank` 0 or below and "
        "`lora_dropout` above 1 in PEFT (a new LoRA adapter), a negative `learning_rate` in a torch optimizer, "
        "`per_device_train_batch_size` 0 or below in the DataLoader, `gradient_accumulation_steps: 0` in the "
        "Trainer's loop, and `val_size: 1.0`, which LLaMA-Factory passes on as a share of 100% (a count only "
        "above 1: `val_size: 1` holds one row out). Each bound is the code's own test, and each is judged only "
        "where the run reads the key (a LoRA adapter created, not resumed: model/adapter.py L204-284; an optimizer "
        "the Trainer builds; data not streamed, and for `val_size` not loaded from `tokenized_path`). A negative "
        "`lora_dropout` (no dropout) and a "
        "negative rate for Adafactor run."
    )
    fails_when = "After start-up: at model load (LoRA), at the split (val_size), when training starts (the rest)."
    evidence = (
        *(bound.evidence for bound in BOUNDS.values()),
        "run on CPU with peft, torch and transformers 5.6.0's Trainer: every failure quoted, and the near misses "
        "(`lora_dropout` below 0, Adafactor with a negative rate) training",
    )
    example = "lora_rank: 0   ->  lora_rank: 8\nval_size: 1.0   ->  val_size: 0.1"
    fix_safety = "No fix: the value meant is yours to say."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        for key, bound in BOUNDS.items():
            entry = entry_of(ctx, key)
            value = value_of(ctx, key) if entry is not None else None
            if not is_number(value) or not bound.refused(value) or not bound.applies(ctx):
                continue  # a bool or a string is LF002's
            facts = {"value": value, "optim": value_of(ctx, "optim")}
            message = f"`{key}: {value}` {bound.rule.format(**facts)}: {bound.failure.format(**facts)}"
            yield self.at_entry(ctx, entry, message, on="value")
