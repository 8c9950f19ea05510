from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_value
from cfgopt.rules.support.ds_blocks import trainer_warmup
from cfgopt.rules.support.gpu_count import gpu_count_note, pinned_world
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Entry, Kind, Source
from cfgopt.text.user_text import is_int, is_number

# DeepSpeed key -> the TrainingArguments field the HF Trainer fills it from (must match when explicit).
MATCHED = {
    ("train_micro_batch_size_per_gpu",): "per_device_train_batch_size",
    ("gradient_accumulation_steps",): "gradient_accumulation_steps",
    ("gradient_clipping",): "max_grad_norm",
    ("optimizer", "params", "lr"): "learning_rate",
    ("optimizer", "params", "eps"): "adam_epsilon",
    ("optimizer", "params", "weight_decay"): "weight_decay",
    ("optimizer", "params", "betas"): "adam_beta1+adam_beta2",  # compared as the list [adam_beta1, adam_beta2]
    ("scheduler", "params", "warmup_max_lr"): "learning_rate",
}


class TrainerValueMismatch(Rule):
    code = "XF002"
    name = "trainer-value-mismatch"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset(
        {
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "gradient_clipping",
            "optimizer",
            "scheduler",
            "train_batch_size",
        }
    )
    summary = "A DeepSpeed batch size, clipping, optimizer or scheduler value contradicts the LLaMA-Factory config"
    why = (
        'The HF Trainer fills these DeepSpeed keys from TrainingArguments when they are "auto"; when they are '
        "explicit and differ it stops at train start: the batch keys, `gradient_clipping`, the optimizer's `lr`, "
        "`betas`, `eps` and `weight_decay`, the scheduler's `warmup_max_lr` (learning_rate), `warmup_num_steps` "
        "(the Trainer's warm-up: judged where the config gives a count, or none; a ratio depends on the step "
        "count) and `total_num_steps` (judged where `max_steps` is set). `train_batch_size` must equal micro "
        "batch x accumulation x GPUs (checked with `--gpus`, or for divisibility without it; without it, an info "
        "says which GPU count the value holds on when that is one count other than the 1 the advice assumes)."
    )
    fails_when = (
        "At `trainer.train()`, after data and model loading: `Please correct the following DeepSpeed config values`."
    )
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py `trainer_config_process` (fill_match must_match=True) "
        "L141-170, `trainer_config_finalize` L242-251 (total_num_steps, warmup_num_steps); the same keys in 4.41.2 "
        "L142-171, L251-260 (the releases LLaMA-Factory 0.9.0-0.9.5 pin)",
        "transformers 5.6.0 training_args.py `get_warmup_steps` (4.41.2: L2345)",
        "https://github.com/huggingface/transformers/pull/12021",
    )
    example = 'per_device_train_batch_size: 4 vs "train_micro_batch_size_per_gpu": 8   ->  "auto"'
    fix_safety = 'Safe: "auto" takes the value the training config already states.'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        lf = ctx.settings.lf_schema
        for consumer in ctx.consumers:
            name = consumer.document.path.name
            auto_batch = bool(lf_value(consumer, "auto_find_batch_size", lf))
            for path, hf_key in MATCHED.items():
                if auto_batch and hf_key == "per_device_train_batch_size":
                    continue
                entry = src.find(path)
                if entry is None or entry.node.value == "auto":
                    continue
                ds_value, hf_value = entry.node.value, _hf_value(consumer, hf_key, lf)
                if ds_value is None or _same(ds_value, hf_value):  # fill_match skips a null
                    continue
                yield self._mismatch(
                    ctx,
                    entry,
                    f"`{entry.dotted}` is {ds_value!r} here but `{hf_key}` is {hf_value!r} in {name}",
                )
            yield from self._schedule_steps(ctx, consumer)
            entry = src.find(("train_batch_size",))
            if entry is None or entry.node.value == "auto" or auto_batch:
                continue
            micro, accum = (
                lf_value(consumer, "per_device_train_batch_size", lf),
                lf_value(consumer, "gradient_accumulation_steps", lf),
            )
            if (
                not all(isinstance(v, int) and v > 0 for v in (micro, accum))
                or not isinstance(entry.node.value, (int, float))  # (true counts as 1, as in fill_match's !=)
            ):
                continue
            per_gpu = micro * accum
            gpus = ctx.settings.gpus
            if gpus and entry.node.value != per_gpu * gpus:
                yield self._mismatch(
                    ctx,
                    entry,
                    f"`train_batch_size` is {entry.node.value} but {name} gives "
                    f"{micro} x {accum} x {gpus} GPUs = {per_gpu * gpus}",
                )
            elif not gpus and entry.node.value % per_gpu:
                yield self._mismatch(
                    ctx,
                    entry,
                    f"`train_batch_size` {entry.node.value} is not a multiple of "
                    f"{micro} x {accum} from {name}, for any GPU count",
                )
            elif not gpus and not _states_batch_shape(src):  # else DS007 says it from the JSON's own values
                world = pinned_world(entry.node.value, micro, accum)
                if world is not None:
                    note = gpu_count_note(world, entry.node.value, micro, accum)
                    yield self.at_entry(
                        ctx, entry, f"{note}; {name} gives {micro} x {accum}", on="value", severity=Severity.INFO
                    )

    def _schedule_steps(self, ctx: Context, consumer: Source) -> Iterator[Diagnostic]:
        """`warmup_num_steps` and `total_num_steps`, compared in `trainer_config_finalize` with the step counts
        the Trainer computes: judged only where the config alone gives them."""
        lf, name = ctx.settings.lf_schema, consumer.document.path.name
        warmup = trainer_warmup(lf_value(consumer, "warmup_steps", lf), lf_value(consumer, "warmup_ratio", lf))
        entry = ctx.source.find(("scheduler", "params", "warmup_num_steps"))
        if _explicit(entry) and warmup.steps is not None and not _same(entry.node.value, warmup.steps):
            yield self._mismatch(
                ctx,
                entry,
                f"`{entry.dotted}` is {entry.node.value!r} here but the Trainer's warm-up is {warmup.steps} "
                f"({warmup.said_by} in {name})",
            )
        max_steps = lf_value(consumer, "max_steps", lf)
        entry = ctx.source.find(("scheduler", "params", "total_num_steps"))
        steps_known = is_int(max_steps) and max_steps > 0
        if _explicit(entry) and steps_known and not _same(entry.node.value, max_steps):
            yield self._mismatch(
                ctx, entry, f"`{entry.dotted}` is {entry.node.value!r} here but `max_steps` is {max_steps} in {name}"
            )

    def _mismatch(self, ctx: Context, entry, what: str) -> Diagnostic:
        return self.at_entry(
            ctx,
            entry,
            f"{what}: the HF Trainer stops at train start (`Please correct the "
            "following DeepSpeed config values that mismatch TrainingArguments values`)",
            on="value",
            fix=self.fix('Set it to "auto"', edits.replace_value(ctx.source, entry, "auto"), safe=True),
        )


def _states_batch_shape(src: Source) -> bool:
    """Does the JSON give both the micro batch and the accumulation as numbers (DS007 then judges the count)?"""
    return all(
        is_number(entry.node.value) if (entry := src.find((key,))) is not None else False
        for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    )


def _explicit(entry: Entry | None) -> bool:
    return entry is not None and entry.node.value not in ("auto", None)


def _hf_value(consumer: Source, hf_key: str, lf) -> object:
    """The value the Trainer compares with: one TrainingArguments field, or `[adam_beta1, adam_beta2]`."""
    fields = hf_key.split("+")
    values = [lf_value(consumer, field, lf) for field in fields]
    return values[0] if len(values) == 1 else values


def _same(a: object, b: object) -> bool:
    """fill_match's `ds_val != hf_val`, negated: Python's own equality, exact between ints and floats (4 == 4.0,
    NaN equals nothing), and no float conversion that a 400-digit integer would overflow."""
    return a == b
