from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

KEYS = ("communication_data_type", "seq_parallel_communication_data_type")
VALID = ("fp16", "bf16", "fp32")
# Spellings people mean; DeepSpeed lower-cases the value first, so `FP32` is already fine.
ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
}


class InvalidCommunicationDataType(Rule):
    code = "DS010"
    name = "invalid-communication-data-type"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"communication_data_type", "seq_parallel_communication_data_type"})
    summary = "`communication_data_type` is not one of fp16, bf16, fp32"
    why = (
        "Confidence: certain. `communication_data_type` (and `seq_parallel_communication_data_type`) is a plain "
        "top-level key, but DeepSpeed converts it while building its config: the value is lower-cased and must "
        "be `fp16`, `bf16` or `fp32`; anything else (`float32`, `bfloat16`, a number) raises. "
        '"auto" is reported by DS011 (no layer fills it).'
    )
    fails_when = (
        "At DeepSpeedConfig construction (`deepspeed.initialize`, after data and model loading): `ValueError: "
        "Invalid communication_data_type. Supported data types: ['fp16', 'bf16', 'fp32']`."
    )
    evidence = ("deepspeed 0.19.8 runtime/config.py:216-230 `get_communication_data_type`",)
    example = '"communication_data_type": "float32"   ->  "communication_data_type": "fp32"'
    fix_safety = "Safe: `float32`/`bfloat16`/`float16` are rewritten to the spelling DeepSpeed accepts."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        for key in KEYS:
            entry = src.find((key,))
            if entry is None or entry.node.value is None or entry.node.value == "auto":
                continue
            value = entry.node.value
            if isinstance(value, str) and value.lower() in VALID:
                continue
            meant = ALIASES.get(value.lower()) if isinstance(value, str) else None
            fix = self.fix(f'Write "{meant}"', edits.replace_value(src, entry, meant), safe=True) if meant else None
            yield self.at_entry(
                ctx,
                entry,
                f"`{key}` is {value!r}: {ctx.ds_label} accepts only fp16, bf16 or fp32 and stops with "
                "`Invalid communication_data_type`",
                on="value",
                fix=fix,
            )
