from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind

KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
PLAUSIBLE_WORLD_SIZES = range(1, 1025)


def resolve(train: int | None, micro: int | None, accum: int | None, world: int) -> str | None:
    """DeepSpeed 0.19.8 `_set_batch_related_parameters` + `_batch_assertion`; the error, or None."""
    if train is not None and micro is not None and accum is not None:
        pass
    elif train is not None and micro is not None:
        accum = train // micro // world
    elif train is not None and accum is not None:
        micro = train // world // accum
    elif micro is not None and accum is not None:
        train = micro * accum * world
    elif train is not None:
        accum, micro = 1, train // world
    elif micro is not None:
        train, accum = micro * world, 1
    else:
        return "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
    assert train is not None and micro is not None and accum is not None
    if train <= 0:
        return f"Train batch size: {train} has to be greater than 0"
    if micro <= 0:
        return f"Micro batch size per gpu: {micro} has to be greater than 0"
    if accum <= 0:
        return f"Gradient accumulation steps: {accum} has to be greater than 0"
    if train != micro * accum * world:
        return (
            f"Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
            f"gradient_acc_step * world_size {train} != {micro} * {accum} * {world}"
        )
    return None


class BatchSizeArithmetic(Rule):
    code = "DS007"
    name = "batch-size-arithmetic"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "train_batch_size, micro batch and accumulation cannot agree"
    why = (
        "DeepSpeed derives the missing batch values and asserts `train_batch_size == micro * accumulation * "
        "world_size`. cfgopt runs the same arithmetic with `--gpus` when given; without it, it reports only "
        'values that fail for every GPU count from 1 to 1024. `"auto"` values are filled by the HF Trainer '
        "and are checked against the training config by XF002 instead."
    )
    fails_when = "At DeepSpeedConfig construction (`deepspeed.initialize`), after data and model loading."
    evidence = ("deepspeed 0.19.8 runtime/config.py `_set_batch_related_parameters`, `_batch_assertion`",)
    example = '"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        data = src.data if isinstance(src.data, dict) else {}
        values = [data.get(k) for k in KEYS]
        if any(v == "auto" for v in values) or not any(k in data for k in KEYS[:2]):
            return
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) for v in values):
            return  # DS005 reports non-numbers
        train, micro, accum = (int(v) if v is not None else None for v in values)
        worlds = [ctx.settings.gpus] if ctx.settings.gpus else list(PLAUSIBLE_WORLD_SIZES)
        errors = [resolve(train, micro, accum, w) for w in worlds]
        if all(errors):
            entry = src.root.get("train_batch_size") or src.root.get("train_micro_batch_size_per_gpu")
            scope = f"with {ctx.settings.gpus} GPUs" if ctx.settings.gpus else "for any GPU count"
            yield self.at_entry(
                ctx,
                entry,
                f"The batch sizes cannot agree {scope}: DeepSpeed fails with `{errors[0]}`",
                on="value",
            )
