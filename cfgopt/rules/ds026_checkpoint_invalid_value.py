from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

TAG_VALIDATION = ("WARN", "IGNORE", "FAIL")


class CheckpointInvalidValue(Rule):
    code = "DS026"
    name = "checkpoint-invalid-value"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"checkpoint"})
    summary = "`checkpoint.tag_validation` not Warn/Ignore/Fail, or `parallel_write.pipeline_stage` not a boolean"
    why = (
        "Confidence: certain. The `checkpoint` block is read key by key, outside DeepSpeed's strict sections: "
        "`tag_validation` is upper-cased and must be one of WARN, IGNORE, FAIL, and "
        "`parallel_write.pipeline_stage` must be true or false; anything else stops the config (every release "
        "0.14-0.19)."
    )
    fails_when = "When DeepSpeed builds its config (DeepSpeedConfigError)."
    evidence = (
        "deepspeed 0.19.8 runtime/config.py `get_checkpoint_tag_validation_mode`, "
        "`get_checkpoint_parallel_write_pipeline`",
    )
    example = '"checkpoint": {"tag_validation": "strict"}   ->  "Fail"'
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        block = ctx.source.find(("checkpoint",))
        if block is None or not block.node.is_mapping:
            return
        tag = block.node.get("tag_validation")
        if tag is not None:
            value = tag.node.value
            if not isinstance(value, str) or value.upper() not in TAG_VALIDATION:
                yield self.at_entry(
                    ctx,
                    tag,
                    f"`checkpoint.tag_validation: {value!r}`: {ctx.ds_label} accepts only Warn, Ignore or "
                    "Fail and stops when it builds its config",
                    on="value",
                )
        write = block.node.get("parallel_write")
        stage = write.node.get("pipeline_stage") if write is not None and write.node.is_mapping else None
        if stage is not None and stage.node.value not in (True, False):
            yield self.at_entry(
                ctx,
                stage,
                f"`checkpoint.parallel_write.pipeline_stage: {stage.node.value!r}`: {ctx.ds_label} "
                "accepts only true or false and stops when it builds its config",
                on="value",
            )
