from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.gpu_count import PLAUSIBLE, gpu_count_note, pinned_world
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


Number = int | float


def resolve(train: Number | None, micro: Number | None, accum: Number | None, world: int) -> str | None:
    """DeepSpeed 0.19.8 `_set_batch_related_parameters` + `_batch_assertion`; the error, or None. The values are
    used as the JSON gives them, as DeepSpeed does (no int(): NaN, an infinity and 1e400 go through the same
    arithmetic, and `x > 0` is false for NaN)."""
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
    if not train > 0:
        return f"Train batch size: {train} has to be greater than 0"
    if not micro > 0:
        return f"Micro batch size per gpu: {micro} has to be greater than 0"
    if not accum > 0:
        return f"Gradient accumulation steps: {accum} has to be greater than 0"
    if train != micro * accum * world:
        return (
            f"Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
            f"gradient_acc_step * world_size {train} != {micro} * {accum} * {world}"
        )
    return None


def _possible(values: list[Number | str | None], worlds: list[int]) -> str | None:
    """None when some GPU count (and some fill of each "auto") satisfies DeepSpeed; else its error."""
    autos = [i for i, v in enumerate(values) if v == "auto"]
    first_error = None
    if len(autos) > 1:
        return None  # two free values always admit a solution unless a fixed one is <= 0 (checked by caller)
    fills = [None] if not autos else list(PLAUSIBLE)
    for world in worlds:
        for fill in fills:
            concrete = [fill if v == "auto" else v for v in values]
            error = resolve(*concrete, world)  # type: ignore[arg-type]
            if error is None:
                return None
            first_error = first_error or error
    return first_error


class BatchSizeArithmetic(Rule):
    code = "DS007"
    name = "batch-size-arithmetic"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "train_batch_size, micro batch and accumulation cannot agree (or none is given)"
    why = (
        "DeepSpeed derives the missing batch values and asserts `train_batch_size == micro * accumulation * "
        "world_size`, each > 0, and needs `train_batch_size` or `train_micro_batch_size_per_gpu`. The HF Trainer "
        'fills only keys that are present as "auto" (accelerate adds `gradient_accumulation_steps: 1` when it '
        "is absent), so a config with neither batch key fails under LLaMA-Factory too. cfgopt runs the same "
        "arithmetic with `--gpus` when given; without it, it reports only values that fail for every GPU count "
        'from 1 to 1024 and every value an "auto" could take, and says, as an info, which GPU count explicit '
        "values hold on when that is one count other than the 1 the advice assumes. Mismatches with the training "
        "config itself are XF002's."
    )
    fails_when = "At DeepSpeedConfig construction (`deepspeed.initialize`, train start), after data and model loading."
    evidence = (
        "deepspeed 0.19.8 runtime/config.py `_set_batch_related_parameters`, `_batch_assertion`",
        "accelerate 1.11.0 accelerator.py `_prepare_deepspeed`: fills train_micro_batch_size_per_gpu only when it "
        'is "auto"; transformers 5.6.0 integrations/deepspeed.py `fill_match` only touches existing keys',
    )
    worth_it = (
        "It fires on a quarter of DeepSpeedExamples' JSON judged for 8 GPUs, and only then: those files state "
        "`train_batch_size` for one GPU, and DeepSpeed's own assertion stops them at start-up on eight. The "
        "verdict is the real tool's for the GPU count judged; with no count stated it gives no error, only an "
        "info naming the one count explicit values hold on, where that is not 1 (none of those files)."
    )
    example = '"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2'
    fix_safety = (
        'Adding `"train_micro_batch_size_per_gpu": "auto"` when no batch key is given: safe when a LLaMA-Factory '
        "config uses the file (the HF Trainer fills it from per_device_train_batch_size), unsafe otherwise."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        data = src.data if isinstance(src.data, dict) else {}
        if src.root is None:
            return
        # DeepSpeed does the arithmetic in Python, where true counts as 1 (DS005 asks for the number)
        values = [int(v) if isinstance(v, bool) else v for v in (data.get(k) for k in KEYS)]
        if any(v is not None and v != "auto" and not isinstance(v, (int, float)) for v in values):
            return  # DS005 reports non-numbers
        if values[0] is None and values[1] is None:
            fix = self.fix(
                'Add "train_micro_batch_size_per_gpu": "auto"',
                edits.insert_entry(src, None, "train_micro_batch_size_per_gpu", "auto"),
                safe=bool(ctx.consumers),
            )
            yield self.at_node(
                ctx,
                src.root,
                "Neither `train_batch_size` nor `train_micro_batch_size_per_gpu` is given: DeepSpeed "
                "stops with `Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided` (the HF "
                'Trainer fills only keys present as "auto")',
                fix=fix,
            )
            return
        concrete = values
        for key, value in zip(KEYS, concrete, strict=True):
            if isinstance(value, (int, float)) and not value > 0:  # NaN too: DeepSpeed asserts `> 0`
                yield self.at_entry(
                    ctx, src.root.get(key), f"`{key}` is {value}: DeepSpeed needs it to be greater than 0", on="value"
                )
                return
        worlds = [ctx.settings.gpus] if ctx.settings.gpus else list(PLAUSIBLE)
        error = _possible(concrete, worlds)
        world = pinned_world(*concrete) if not ctx.settings.gpus else None
        if not error and world is not None:
            yield self.at_entry(
                ctx,
                src.root.get("train_batch_size"),
                gpu_count_note(world, *concrete),
                on="value",
                severity=Severity.INFO,
            )
        if error:
            entry = src.root.get("train_batch_size") or src.root.get("train_micro_batch_size_per_gpu")
            scope = f"with {ctx.settings.gpus} GPUs" if ctx.settings.gpus else "for any GPU count"
            yield self.at_entry(
                ctx, entry, f"The batch sizes cannot agree {scope}: DeepSpeed fails with `{error}`", on="value"
            )
