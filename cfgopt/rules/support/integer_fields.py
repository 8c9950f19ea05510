"""Where an integral float in one of LLaMA-Factory's int fields (`max_steps: 1e4`, `lora_rank: 8.0`) stops the run.

`parse_dict` passes the float on unconverted and nothing at start-up looks at most of these fields, so the float
reaches code that needs a real int: `range()`, a slice, `DataLoader(batch_size=...)`, `torch.empty(...)`. Each
entry names that code and the point of the run where it is reached; `reached` says whether the judged job gets
there (a LoRA rank matters only when a LoRA adapter is built). The fields not listed here are left a warning:
their float is converted or harmless where it is used (`save_total_limit`, `eval_accumulation_steps`,
`ddp_timeout`, `lora_alpha`, `early_stopping_steps`, `buffer_size`: compared or used in float arithmetic), or no
failure was found. Read in llamafactory 0.9.5, transformers 5.6.0, datasets 4.0.0, peft 0.18.1 and torch, and
each failure raised with the real library by tests/oracle/test_integral_floats.py.
"""

from __future__ import annotations

from collections.abc import Callable

from cfgopt.rules.base import Context
from cfgopt.rules.support.llamafactory import is_train_group, number, on, packing_on, training, value_of
from cfgopt.text.record import Record

_LOOP = (
    "the Trainer's loop stops on it at train start (`'float' object cannot be interpreted as an integer`, TypeError)"
)
_LOADER = "the Trainer's DataLoader stops on it at train start (TypeError)"


class IntegerUse(Record):
    """The code that needs an int, and whether the judged job reaches it with this value."""

    where: str
    reached: Callable[[Context, float], bool]


def _seeding(ctx: Context, value: float) -> bool:
    """`get_train_args` and `get_eval_args` call `transformers.set_seed` (hparams/parser.py L529, L588)."""
    return ctx.job.group in ("train", "eval")


def _loading_data(ctx: Context, value: float) -> bool:
    return is_train_group(ctx)


def _tokenising(ctx: Context, value: float) -> bool:
    """Streaming data is mapped without `num_proc` (data/loader.py L248-253)."""
    return is_train_group(ctx) and not on(ctx, "streaming")


def _training(ctx: Context, value: float) -> bool:
    return training(ctx)


def _positive_while_training(ctx: Context, value: float) -> bool:
    """`max_steps: -1.0` and `dataloader_num_workers: 0.0` take the branch that never uses the value."""
    return training(ctx) and value > 0


def _evaluating(ctx: Context, value: float) -> bool:
    strategy = value_of(ctx, "eval_strategy")
    evaluates = on(ctx, "do_eval") or on(ctx, "do_predict") or (isinstance(strategy, str) and strategy != "no")
    return is_train_group(ctx) and evaluates


def _workers_prefetch(ctx: Context, value: float) -> bool:
    workers = number(value_of(ctx, "dataloader_num_workers"))
    return training(ctx) and workers is not None and workers > 0


def _new_adapter(ctx: Context, method: str) -> bool:
    """A new adapter of `method` is built at model load; an `adapter_name_or_path` may be resumed instead
    (model/adapter.py L175-177: its own config then holds the rank)."""
    return training(ctx) and value_of(ctx, "finetuning_type") == method and not on(ctx, "adapter_name_or_path")


def _lora(ctx: Context, value: float) -> bool:
    return _new_adapter(ctx, "lora")


def _pissa(ctx: Context, value: float) -> bool:
    """`pissa_iter: -1` selects plain `pissa` (model/adapter.py L265-270), which never reads it."""
    return _new_adapter(ctx, "lora") and on(ctx, "pissa_init") and value != -1


def _oft(ctx: Context, value: float) -> bool:
    """0 means "derive it from the other one" (peft tuners/oft/layer.py L446-459)."""
    return _new_adapter(ctx, "oft") and value != 0


def _freeze(ctx: Context, value: float) -> bool:
    return training(ctx) and value_of(ctx, "finetuning_type") == "freeze"


INTEGER_USES: dict[str, IntegerUse] = {
    "seed": IntegerUse(
        "`transformers.set_seed` stops on it at start-up (numpy: `Cannot cast scalar from dtype('float64')`, "
        "TypeError)",
        _seeding,
    ),
    "torch_empty_cache_steps": IntegerUse(
        "TrainingArguments' start-up check stops on it (`must be an integer bigger than 0`, ValueError)",
        _loading_data,
    ),
    "max_samples": IntegerUse(
        "`dataset.select(range(max_samples))` stops on it when the data is loaded, for any dataset of {n} rows "
        "or more (TypeError)",
        _loading_data,
    ),
    "preprocessing_num_workers": IntegerUse(
        "`datasets.map(num_proc=...)` stops on it when the data is tokenised (TypeError)", _tokenising
    ),
    "preprocessing_batch_size": IntegerUse(
        "`datasets.map(batch_size=...)` stops on it when the data is tokenised (TypeError)", _loading_data
    ),
    "cutoff_len": IntegerUse("", _loading_data),  # where: `cutoff_where`, it depends on packing
    "per_device_train_batch_size": IntegerUse(
        "the Trainer's DataLoader stops on it at train start (`batch_size should be a positive integer value`, "
        "ValueError)",
        _training,
    ),
    "per_device_eval_batch_size": IntegerUse(
        "the evaluation DataLoader stops on it at the first evaluation (`batch_size should be a positive integer "
        "value`, ValueError)",
        _evaluating,
    ),
    "gradient_accumulation_steps": IntegerUse(_LOOP, _training),
    "max_steps": IntegerUse(_LOOP, _positive_while_training),
    "dataloader_num_workers": IntegerUse(_LOADER, _positive_while_training),
    "dataloader_prefetch_factor": IntegerUse(_LOADER, _workers_prefetch),
    "data_seed": IntegerUse(
        "the Trainer's data sampler stops on it at train start (`manual_seed expected a long`, RuntimeError)",
        _training,
    ),
    "lora_rank": IntegerUse("PEFT stops on it when it builds the LoRA layers at model load (TypeError)", _lora),
    "pissa_iter": IntegerUse(
        "PEFT's PiSSA initialisation stops on it at model load (`int('16.0')`, ValueError)", _pissa
    ),
    "oft_rank": IntegerUse("PEFT stops on it when it builds the OFT layers at model load (TypeError)", _oft),
    "oft_block_size": IntegerUse("PEFT stops on it when it builds the OFT layers at model load (TypeError)", _oft),
    "freeze_trainable_layers": IntegerUse(
        "the choice of trainable layers stops on it at model load (`range()` of a float, TypeError)", _freeze
    ),
}


def cutoff_where(ctx: Context) -> str:
    """Packed SFT pads with `[pad] * (cutoff_len - n + 1)` and packed pre-training cuts blocks with `range(0, n,
    cutoff_len)` (unpacked, the tokenizer's `max_length`): the first batch. Otherwise the truncation slices with
    it only for an example that reaches `cutoff_len` tokens (data/processor/processor_utils.py L76-88)."""
    if value_of(ctx, "stage") == "pt":
        return "pre-training tokenisation stops on it at the first batch of data (TypeError)"
    if packing_on(ctx) and value_of(ctx, "stage") == "sft":
        return "packing stops on it at the first batch of data (`[pad_token_id] * pad_length`, TypeError)"
    return "the truncation stops on it at the first example of {n} tokens or more (`ids[:float]`, TypeError)"


def integer_use(ctx: Context, key: str, value: float) -> str | None:
    """Where the judged job stops on the integral float `value` in `key` (`{n}` in the text: the value as an
    integer); None where it does not."""
    use = INTEGER_USES.get(key)
    if use is None or not use.reached(ctx, value):
        return None
    return (cutoff_where(ctx) if key == "cutoff_len" else use.where).format(n=int(value))
