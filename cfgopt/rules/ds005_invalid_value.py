from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules._ds import DS, locate, section_errors
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind

# Top-level keys DeepSpeed reads loosely but then uses as numbers (batch assertion, clipping).
# (`steps_per_print` is not among them: accelerate overwrites it with inf before DeepSpeed reads it.)
INT_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
NUMBER_KEYS = ("gradient_clipping",)


class InvalidValue(Rule):
    code = "DS005"
    name = "invalid-value"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "A value DeepSpeed rejects: wrong type, out of range, or not one of the allowed values"
    why = (
        'DeepSpeed validates its strict sections with pydantic (lax mode: `"500"` is accepted for an int, '
        '`"5e8"` and `15099494.4` are not; `stage` must be 0-3; offload `device` is case-sensitive). Batch '
        'sizes and clipping are read loosely and then compared as numbers, so a quoted `"8"` fails there (and '
        "the HF Trainer reports `ds gradient_accumulation_steps=8 vs hf ...=8`)."
    )
    fails_when = "At `deepspeed.initialize` (after data and model loading) or at the first batch-size check."
    evidence = (
        "deepspeed 0.19.8 runtime/zero/config.py, runtime/precision_config.py (pydantic fields and constraints)",
        'https://github.com/hiyouga/LlamaFactory/issues/1116 (`"gradient_accumulation_steps": "8"`)',
        "https://github.com/hiyouga/LlamaFactory/issues/5252 (`int_from_float` for a fractional bucket size)",
    )
    example = '"gradient_accumulation_steps": "8"   ->  "gradient_accumulation_steps": 8'
    fix_safety = "Safe: unquoting a quoted integer. Other values: no fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        for err in section_errors(ctx):
            if err.type == "extra_forbidden":
                continue
            entry = locate(err.section, err.loc)
            yield self.at_entry(ctx, entry, f"`{entry.dotted}`: {DS} rejects this value ({err.message})", on="value")
        if src.root is None:
            return
        for key in INT_KEYS + NUMBER_KEYS:
            entry = src.root.get(key)
            if entry is None:
                continue
            value = entry.node.value
            if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool)):
                continue  # null is read as absent (get_scalar_param)
            if key in NUMBER_KEYS and isinstance(value, bool):
                continue  # Python compares True as 1.0: clipping at 1.0, as written
            if key in NUMBER_KEYS and isinstance(value, float):
                continue
            if isinstance(value, float) and value.is_integer():
                continue
            fix = None
            if isinstance(value, str) and value.strip().isdigit():
                fix = self.fix(
                    f"Write the number {value.strip()}",
                    edits.replace_value(src, entry, int(value)),
                    safe=True,
                )
            kind = "an integer" if key in INT_KEYS else "a number"
            yield self.at_entry(
                ctx,
                entry,
                f'`{key}` must be {kind} or "auto", not {value!r}: DeepSpeed compares it as a number and fails',
                on="value",
                fix=fix,
            )
