from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_value
from cfgopt.source import Kind

# DeepSpeed key -> the TrainingArguments field the HF Trainer fills it from (must match when explicit).
MATCHED = {
    ("train_micro_batch_size_per_gpu",): "per_device_train_batch_size",
    ("gradient_accumulation_steps",): "gradient_accumulation_steps",
    ("gradient_clipping",): "max_grad_norm",
    ("optimizer", "params", "lr"): "learning_rate",
    ("optimizer", "params", "eps"): "adam_epsilon",
    ("optimizer", "params", "weight_decay"): "weight_decay",
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
            "train_batch_size",
        }
    )
    summary = "A DeepSpeed batch size, clipping or optimizer value contradicts the LLaMA-Factory config"
    why = (
        'The HF Trainer fills these DeepSpeed keys from TrainingArguments when they are "auto"; when they are '
        "explicit and differ it stops at train start. `train_batch_size` must equal micro batch x accumulation "
        "x GPUs (checked with `--gpus`, or for divisibility without it)."
    )
    fails_when = (
        "At `trainer.train()`, after data and model loading: `Please correct the following DeepSpeed config values`."
    )
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py `trainer_config_process` (fill_match must_match=True)",
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
                ds_value, hf_value = entry.node.value, lf_value(consumer, hf_key, lf)
                if ds_value is None or _same(ds_value, hf_value):  # fill_match skips a null
                    continue
                yield self._mismatch(
                    ctx,
                    entry,
                    f"`{entry.dotted}` is {ds_value!r} here but `{hf_key}` is {hf_value!r} in {name}",
                )
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

    def _mismatch(self, ctx: Context, entry, what: str) -> Diagnostic:
        return self.at_entry(
            ctx,
            entry,
            f"{what}: the HF Trainer stops at train start (`Please correct the "
            "following DeepSpeed config values that mismatch TrainingArguments values`)",
            on="value",
            fix=self.fix('Set it to "auto"', edits.replace_value(ctx.source, entry, "auto"), safe=True),
        )


def _same(a: object, b: object) -> bool:
    """fill_match's `ds_val != hf_val`, negated: Python's own equality, exact between ints and floats (4 == 4.0,
    NaN equals nothing), and no float conversion that a 400-digit integer would overflow."""
    return a == b
