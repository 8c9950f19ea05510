from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_block
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.source import Kind

# deprecated key -> (keys of the replacing field, both spellings), what DeepSpeed does with it
REPLACED = {
    "cpu_offload": (("offload_optimizer",), '`offload_optimizer: {"device": "cpu"}`'),
    "cpu_offload_param": (("offload_param",), '`offload_param: {"device": "cpu"}`'),
    "stage3_gather_fp16_weights_on_model_save": (
        ("gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"),
        "`stage3_gather_16bit_weights_on_model_save`",
    ),
}


class DeprecatedZeroKey(Rule):
    code = "DS013"
    name = "deprecated-zero-key"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    # the boolean form and the deprecated keys (cpu_offload, ...) are all in it
    triggers = frozenset({"zero_optimization"})
    summary = "A deprecated ZeRO key (cpu_offload, cpu_offload_param, ..., boolean zero_optimization)"
    why = (
        "Confidence: certain. DeepSpeed still migrates `cpu_offload` -> `offload_optimizer` (device cpu), "
        "`cpu_offload_param` -> `offload_param`, `stage3_gather_fp16_weights_on_model_save` -> "
        "`gather_16bit_weights_on_model_save`, with a warning; `cpu_offload_use_pin_memory` is not migrated at all "
        "(its value is ignored; `pin_memory` defaults to true since 0.19.5). Giving a deprecated key *and* its "
        'replacement is an AssertionError. `"zero_optimization": true` means stage 1 to DeepSpeed, but the '
        "HF/accelerate config reader calls `.get` on it and crashes when a LLaMA-Factory config uses the file."
    )
    fails_when = (
        "Deprecated key together with its replacement: at DeepSpeedConfig construction, `AssertionError: Cannot "
        "provide deprecated parameter 'cpu_offload' and replacing parameter 'offload_optimizer' together`. "
        "Boolean `zero_optimization` under the HF Trainer: at TrainingArguments creation (seconds), "
        "`AttributeError: 'bool' object has no attribute 'get'`. Otherwise never (a deprecation warning)."
    )
    evidence = (
        "deepspeed 0.19.8 runtime/config_utils.py:60-97 `_process_deprecated_field` (migration, assertion at :89)",
        "deepspeed 0.19.8 runtime/zero/config.py:188-214, :287-291 (deprecated fields), :60-77 (boolean form)",
        "accelerate 1.11.0 utils/deepspeed.py:181-192 `find_config_node` (config.get on the bool), reproduced with "
        "transformers 5.6.0 `HfDeepSpeedConfig({'zero_optimization': True})`",
    )
    example = '"cpu_offload": true   ->  "offload_optimizer": {"device": "cpu"}'
    fix_safety = (
        "Safe: each rewrite is exactly DeepSpeed's own migration (same defaults); `cpu_offload_use_pin_memory` and "
        "`cpu_offload: false` are removed (DeepSpeed ignores them); `zero_optimization: true` becomes "
        '`{"stage": 1}`. No fix when the replacement is also present (which value was meant is unclear).'
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        top = src.find(("zero_optimization",))
        if top is not None and isinstance(top.node.value, bool):
            stage = 1 if top.node.value else 0
            fix = self.fix(
                f'Write {{"stage": {stage}}}',
                [Edit(top.node.start, top.node.end, f'{{"stage": {stage}}}')],
                safe=True,
            )
            if ctx.consumers:
                yield self.at_entry(
                    ctx,
                    top,
                    f"`zero_optimization` is a boolean (deprecated form of stage {stage}): the HF Trainer's config "
                    "reader stops with `AttributeError: 'bool' object has no attribute 'get'`",
                    on="value",
                    severity=Severity.ERROR,
                    fix=fix,
                )
            else:
                yield self.at_entry(
                    ctx,
                    top,
                    f"`zero_optimization` is a boolean: the bare DeepSpeed launcher reads it as stage {stage} "
                    "(deprecated), but the HF Trainer / accelerate path (LLaMA-Factory) stops with "
                    "`AttributeError: 'bool' object has no attribute 'get'`",
                    on="value",
                    severity=Severity.ERROR,
                    fix=fix,
                )
            return
        zero = zero_block(src)
        if zero is None:
            return
        present = {e.key for e in zero.node.entries or ()}
        for entry in zero.node.entries or ():
            key = entry.key
            if key == "cpu_offload_use_pin_memory":
                yield self.at_entry(
                    ctx,
                    entry,
                    "`cpu_offload_use_pin_memory` is deprecated and not migrated: its value is ignored (set "
                    "`pin_memory` inside `offload_optimizer` / `offload_param`; it defaults to true)",
                    fix=self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=True),
                )
                continue
            if key not in REPLACED:
                continue
            new_keys, new_text = REPLACED[key]
            clash = next((k for k in new_keys if k in present), None)
            if clash:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{key}` is deprecated and `{clash}` is also set: {ctx.ds_label} stops with "
                    f"`Cannot provide deprecated parameter '{key}' and replacing parameter '{new_keys[0]}' together`",
                    severity=Severity.ERROR,
                )
                continue
            yield self.at_entry(
                ctx,
                entry,
                f"`{key}` is deprecated: DeepSpeed migrates it to {new_text}; write that instead",
                fix=self.fix(f"Migrate to {new_text}", self._migrate(src, entry), safe=True),
            )

    @staticmethod
    def _migrate(src, entry) -> list[Edit] | None:
        value = entry.node.value
        if entry.key == "stage3_gather_fp16_weights_on_model_save":
            return edits.rename_key(src, entry, "stage3_gather_16bit_weights_on_model_save")
        if not isinstance(value, bool):
            return None
        if not value:
            return edits.delete_entry(src, entry)
        new = "offload_optimizer" if entry.key == "cpu_offload" else "offload_param"
        return [Edit(entry.key_start, entry.node.end, f'"{new}": {{"device": "cpu"}}')]
