from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_precision, lf_value
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
        "deepspeed 0.19.8 runtime/config.py L511-512 (`bfloat16 and fp16 modes cannot be simultaneously enabled`)",
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
            yield from self._both_filled(ctx, consumer)

    def _both_filled(self, ctx: Context, consumer) -> Iterator[Diagnostic]:
        """`"auto"` filled true in both blocks: `fp16` with `bf16_full_eval` (or `bf16` with `fp16_full_eval`), which
        TrainingArguments accepts, turns both DeepSpeed modes on, and the engine refuses them together. Both flags
        themselves on is LF004's (TrainingArguments stops first); both blocks explicitly on is DS006's."""
        src, lf = ctx.source, ctx.settings.lf_schema
        entries = {block: src.find((block, "enabled")) for block in ("fp16", "bf16")}
        if any(e is None for e in entries.values()) or all(e.node.value is True for e in entries.values()):
            return
        if lf_value(consumer, "fp16", lf) and lf_value(consumer, "bf16", lf):
            return
        filled = {
            b: e.node.value is True or (e.node.value == "auto" and lf_precision(consumer, b, lf))
            for b, e in entries.items()
        }
        if not all(filled.values()):
            return
        auto = next(b for b, e in entries.items() if e.node.value == "auto")
        yield self.at_entry(
            ctx,
            entries[auto],
            f"`{auto}.enabled: auto` is filled true from `{auto}` or `{auto}_full_eval` in "
            f"{consumer.document.path.name}, and the other mode is on too: DeepSpeed stops when the engine is built, "
            "after data and model loading (`bfloat16 and fp16 modes cannot be simultaneously enabled`)",
            on="value",
        )


def _shown(value: object) -> str:
    """The JSON value as the user wrote it: a string is named one (`"true"` is not the boolean true)."""
    return f"the string {value!r}" if isinstance(value, str) else str(value).lower()
