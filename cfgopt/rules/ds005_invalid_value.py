from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import locate, section_errors
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind
from cfgopt.text.user_text import integer, is_int

# Top-level keys DeepSpeed reads loosely but then uses as numbers (batch assertion, clipping).
# Loose keys whose null DeepSpeed does not read as "absent": DeepSpeedConfig itself fails on them
# (probed: DeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, key: None}) for every plain key with a default).
NULL_FAILS = {
    "wall_clock_breakdown": "TypeError: unsupported operand type(s) for |: 'NoneType' and 'bool'",
    "gradient_allreduce_op": "ValueError: Invalid gradient_allreduce_op",
}
# Loose keys DeepSpeedConfig computes with at construction, so a value of another type fails there
# (probed: DeepSpeedConfig with "yes", [1] and {"a": 1} for every plain key of the 0.19.8 snapshot).
LOOSE_TYPES: dict[str, tuple[type, ...]] = {
    "vocabulary_size": (int,),
    "gradient_allreduce_op": (str,),
    "seq_parallel_communication_data_type": (str,),
}
# DeepSpeedConfig builds `wall_clock_breakdown | flops_profiler.enabled` (deepspeed 0.19.8 runtime/config.py
# L533, both read unconverted with `get_scalar_param`): each must be a bool or an integer. Probed with DeepSpeedConfig:
# 0, 1, 2 and true build; "false", "true", 1.0, null and a list fail with `TypeError: unsupported operand type(s)
# for |`. (A null `wall_clock_breakdown` is NULL_FAILS', with its fix.)
OR_OPERANDS = (("wall_clock_breakdown",), ("flops_profiler", "enabled"))
SWITCH_WORDS = {"true": True, "false": False}
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
            yield self.at_entry(
                ctx, entry, f"`{entry.dotted}`: {ctx.ds_label} rejects this value ({err.message})", on="value"
            )
        if src.root is None:
            return
        for key, failure in NULL_FAILS.items():
            entry = src.root.get(key)
            if entry is not None and entry.node.value is None:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{key}: null` is not read as absent: DeepSpeed fails with `{failure}`",
                    on="value",
                    fix=self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=True),
                )
        for key, types in LOOSE_TYPES.items():
            entry = src.root.get(key)
            value = entry.node.value if entry is not None else None
            if entry is None or value is None or value == "auto":
                continue
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                kind = " or ".join(t.__name__ for t in types)
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{key}` must be a {kind}, not {value!r}: DeepSpeedConfig fails on it when it is built",
                    on="value",
                )
        yield from self._or_operands(ctx)
        zero = src.root.get("zero_optimization")
        if zero is not None and not isinstance(zero.node.value, (dict, bool)):
            yield self.at_entry(
                ctx,
                zero,
                f"`zero_optimization` must be a block, not {zero.node.value!r}: the HF "
                "Trainer's config reader and DeepSpeed both fail on it",
                on="value",
            )
        yield from self._numbers(ctx)

    def _or_operands(self, ctx: Context) -> Iterator[Diagnostic]:
        """`wall_clock_breakdown` and `flops_profiler.enabled`, which DeepSpeed combines with `|` (OR_OPERANDS)."""
        src = ctx.source
        for path in OR_OPERANDS:
            entry = src.find(path)
            if entry is None or entry.node.is_mapping:
                continue
            value = entry.node.value
            if isinstance(value, int) or value == "auto" or (value is None and path == OR_OPERANDS[0]):
                continue  # a bool is an int; "auto" is DS011's; a null wall_clock_breakdown is NULL_FAILS'
            meant = SWITCH_WORDS.get(value.strip().lower()) if isinstance(value, str) else None
            fix = None
            if meant is not None:  # the file cannot run as written: the switch's one meaning is no change of run
                fix = self.fix(f"Write {str(meant).lower()}", edits.replace_value(src, entry, meant), safe=True)
            yield self.at_entry(
                ctx,
                entry,
                f"`{'.'.join(path)}` is {value!r}, not a bool or an integer: {ctx.ds_label} computes "
                "`wall_clock_breakdown | flops_profiler.enabled` when its config is built and fails with "
                "`TypeError: unsupported operand type(s) for |`",
                on="value",
                fix=fix,
            )

    def _numbers(self, ctx: Context) -> Iterator[Diagnostic]:
        """Top-level keys DeepSpeed compares as numbers (batch sizes, clipping), written as something else."""
        src = ctx.source
        assert src.root is not None
        for key in INT_KEYS + NUMBER_KEYS:
            entry = src.root.get(key)
            if entry is None:
                continue
            value = entry.node.value
            if value is None or value == "auto" or is_int(value):
                continue  # null is read as absent (get_scalar_param)
            if isinstance(value, bool):
                if key in INT_KEYS:
                    yield self.at_entry(
                        ctx,
                        entry,
                        f"`{key}` is the boolean {str(value).lower()}, which DeepSpeed "
                        f"accepts as {int(value)}; write the number",
                        on="value",
                        severity=Severity.WARNING,
                        fix=self.fix(f"Write {int(value)}", edits.replace_value(src, entry, int(value)), safe=True),
                    )
                continue  # for gradient_clipping Python compares True as 1.0: clipping at 1.0, as written
            if key in NUMBER_KEYS and isinstance(value, float):
                continue
            if isinstance(value, float) and value.is_integer():
                continue
            fix = None
            number = integer(value, strip=True)
            if number is not None:
                fix = self.fix(
                    f"Write the number {number}",
                    edits.replace_value(src, entry, number),
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
