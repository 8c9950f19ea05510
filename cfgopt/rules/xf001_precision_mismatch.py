from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_precision
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class PrecisionMismatch(Rule):
    code = "XF001"
    name = "precision-mismatch"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"fp16", "bf16"})  # the HF Trainer fills/compares only these spellings (not bfloat16)
    summary = "The DeepSpeed JSON's fp16/bf16 setting contradicts the LLaMA-Factory config that uses it"
    why = (
        'The HF Trainer fills `fp16.enabled` / `bf16.enabled` from `fp16`/`bf16` when they are "auto", and '
        "records a mismatch when they are explicit and differ; the mismatch is raised when training starts, "
        'after data and model loading. "auto" lets the training config decide, once.'
    )
    fails_when = (
        "At `trainer.train()`: `Please correct the following DeepSpeed config values that mismatch "
        "TrainingArguments values: - ds bf16.enabled=True vs hf bf16|bf16_full_eval=False`."
    )
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py `trainer_config_process` (fill_match) and "
        "`trainer_config_finalize` (raises the mismatches)",
    )
    example = 'LLaMA-Factory `bf16: true`, DeepSpeed "fp16": {"enabled": true}   ->  "enabled": "auto"'
    fix_safety = 'Safe: "auto" takes the value the training config already states.'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        for consumer in ctx.consumers:
            for block, keys in (("fp16", ("fp16", "fp16_full_eval")), ("bf16", ("bf16", "bf16_full_eval"))):
                entry = src.find((block, "enabled"))
                if entry is None or entry.node.value == "auto" or entry.node.value is None:
                    continue  # "auto" is filled from the training config; null is skipped by fill_match
                hf = lf_precision(consumer, block, ctx.settings.lf_schema)
                if entry.node.value != hf:  # fill_match compares with != (1 == True, "true" != True)
                    yield self.at_entry(
                        ctx,
                        entry,
                        f"`{block}.enabled` is {_shown(entry.node.value)} here but `{keys[0]}` is "
                        f"{str(hf).lower()} in {consumer.document.path.name}: the HF Trainer stops at train start "
                        f"(`ds {block}.enabled={entry.node.value} vs hf {'|'.join(keys)}={hf}`)",
                        on="value",
                        fix=self.fix('Set it to "auto"', edits.replace_value(src, entry, "auto"), safe=True),
                    )


def _shown(value: object) -> str:
    """The JSON value as the user wrote it: a string is named one (`"true"` is not the boolean true)."""
    return f"the string {value!r}" if isinstance(value, str) else str(value).lower()
