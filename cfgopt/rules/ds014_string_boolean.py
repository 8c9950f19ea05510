from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Entry, Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# pydantic 2 lax-mode bool strings (what DeepSpeed's strict sections accept), case-insensitive.
TRUE_WORDS = {"true", "yes", "on", "1", "t", "y"}
FALSE_WORDS = {"false", "no", "off", "0", "f", "n"}
# Top-level switches DeepSpeed reads with `get_scalar_param` and tests for truth: a string is always true.
# (`wall_clock_breakdown` is not one: DeepSpeed computes `wall_clock_breakdown | ...` and fails on a string, DS005.)
PLAIN_BOOL_KEYS = {
    "prescale_gradients",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    "memory_breakdown",
    "dataloader_drop_last",
    "disable_allgather",
}
HF_MATCHED = {("fp16", "enabled"), ("bf16", "enabled")}


def _bool_field(ds: Any, path: tuple) -> bool:
    """Whether `path` is a bool field of one of DeepSpeed's strict sections."""
    model = ds.sections.get(path[0]) if path else None
    for part in path[1:]:
        if model is None:
            return False
        fields = ds.raw_models.get(model, {}).get("fields", {})
        spec = fields.get(part) or next((f for f in fields.values() if f.get("alias") == part), None)
        if spec is None:
            return False
        if part == path[-1]:
            return "bool" in (spec.get("types") or ())
        model = spec.get("model")
    return False


class StringBoolean(Rule):
    code = "DS014"
    name = "string-boolean"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = 'A true/false switch written as a string (`"false"`): DeepSpeed and HF read it differently'
    why = (
        'Confidence: certain. In DeepSpeed\'s strict sections pydantic turns `"false"` into False, but the HF '
        'layer tests the raw value: `is_true()` is `bool(value)`, so `"false"` is true there, and the Trainer\'s '
        'precision check compares `"false"` with a Python bool, which never matches. In plain top-level switches '
        "(`prescale_gradients`, `zero_force_ds_cpu_optimizer`, ...) DeepSpeed itself tests the string for truth: "
        '`"false"` means true.'
    )
    fails_when = (
        "`fp16.enabled` / `bf16.enabled` as a string with a LLaMA-Factory config: at `trainer.train()`, "
        "`Please correct the following DeepSpeed config values that mismatch TrainingArguments values: - ds "
        "bf16.enabled=false vs hf bf16|bf16_full_eval=False`. Elsewhere silently (the two layers disagree)."
    )
    evidence = (
        "accelerate 1.11.0 utils/deepspeed.py:226-241 `is_true`/`is_false` (`bool(value)`)",
        "transformers 5.6.0 integrations/deepspeed.py:180-188 (fill_match on fp16/bf16.enabled, `is_true` for the "
        "dtype)",
        "deepspeed 0.19.8 runtime/config_utils.py `DeepSpeedConfigModel` (pydantic lax bool parsing); "
        "runtime/config.py `get_scalar_param` reads for the plain keys",
        "https://github.com/hiyouga/LlamaFactory/issues/3493",
    )
    example = '"bf16": {"enabled": "false"}   ->  "bf16": {"enabled": false}'
    fix_safety = (
        "Safe in strict sections (writes the bool DeepSpeed already reads). Unsafe for plain top-level switches: "
        'DeepSpeed currently reads `"false"` as true there, so writing false changes the run.'
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.settings.ds_schema
        for entry in src.walk():
            value = entry.node.value
            if not isinstance(value, str) or value.strip().lower() not in TRUE_WORDS | FALSE_WORDS:
                continue
            if len(entry.path) == 1 and entry.key in PLAIN_BOOL_KEYS:
                yield self._plain(ctx, entry, value)
            elif _bool_field(ds, entry.path):
                yield self._strict(ctx, entry, value)

    def _strict(self, ctx: Context, entry: Entry, value: str) -> Diagnostic:
        meant = value.strip().lower() in TRUE_WORDS
        fix = self.fix(f"Write {str(meant).lower()}", edits.replace_value(ctx.source, entry, meant), safe=True)
        if entry.path in HF_MATCHED and ctx.consumers:
            return self.at_entry(
                ctx,
                entry,
                f"`{entry.dotted}` is the string {value!r}: the HF Trainer compares it with `{entry.path[0]}` from "
                f"{ctx.consumers[0].document.path.name} as a bool and stops at train start (`mismatch "
                "TrainingArguments values`)",
                on="value",
                severity=Severity.ERROR,
                fix=fix,
            )
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.dotted}` is the string {value!r}: DeepSpeed reads {meant}, but the HF/accelerate layer "
            f"tests `bool({value!r})`, which is {bool(value)}",
            on="value",
            fix=fix,
        )

    def _plain(self, ctx: Context, entry: Entry, value: str) -> Diagnostic:
        meant = value.strip().lower() in TRUE_WORDS
        fix = self.fix(f"Write {str(meant).lower()}", edits.replace_value(ctx.source, entry, meant), safe=False)
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.key}` is the string {value!r}: DeepSpeed reads this key without conversion, so any non-empty "
            "string is true" + ("" if meant else f" ({value!r} turns it on)"),
            on="value",
            fix=fix,
        )
