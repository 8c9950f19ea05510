from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_block
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind
from cfgopt.text.user_text import integer


class StageNotAnInteger(Rule):
    code = "DS015"
    name = "stage-not-an-integer"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})
    summary = '`zero_optimization.stage` written as a string (`"3"`) or "auto"'
    why = (
        'Confidence: certain. DeepSpeed\'s pydantic model turns `"3"` into stage 3, but transformers and '
        'accelerate compare the raw value (`HfDeepSpeedConfig.is_zero3`: `self._stage == 3`), so for them `"3"` '
        "is not ZeRO-3: no `zero.Init` at model load (every GPU loads the whole model), LLaMA-Factory's ZeRO-3 "
        "handling off, and at save accelerate takes `model.state_dict()` of the partitioned engine instead of "
        'gathering. `"auto"` is filled by accelerate\'s DeepSpeedPlugin with ACCELERATE_DEEPSPEED_ZERO_STAGE '
        "(default 2) under the HF Trainer, and dropped to stage 0 by the bare DeepSpeed launcher: the stage "
        "depends on how the file is launched."
    )
    fails_when = 'Silently for `"3"`: model loaded unpartitioned (more memory), ZeRO-3 save path skipped.'
    evidence = (
        "accelerate 1.11.0 utils/deepspeed.py:162-166 `set_stage_and_offload`, `is_zero3` (raw comparison)",
        "accelerate 1.11.0 utils/dataclasses.py:1201-1202 (zero_stage default 2), :1243-1255 (fills stage)",
        'deepspeed 0.19.8 runtime/config_utils.py `DeepSpeedConfigModel.__init__` (drops "auto"), '
        "runtime/zero/config.py `stage: ZeroStageEnum`",
    )
    example = '"stage": "3"   ->  "stage": 3'
    fix_safety = 'Safe for a quoted digit (DeepSpeed already runs that stage). No fix for "auto".'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        entry = zero.node.get("stage") if zero is not None else None
        if entry is None or not isinstance(entry.node.value, str):
            return
        value = entry.node.value
        stage = integer(value, strip=True)
        if stage in (0, 1, 2, 3):
            yield self.at_entry(
                ctx,
                entry,
                f"`stage` is the string {value!r}: DeepSpeed runs stage {stage}, but transformers/accelerate "
                "compare the raw value"
                + (" and do not treat it as ZeRO-3 (no zero.Init at load, wrong save path)" if stage == 3 else ""),
                on="value",
                severity=Severity.WARNING if stage == 3 else Severity.INFO,
                fix=self.fix(f"Write {stage}", edits.replace_value(src, entry, stage), safe=True),
            )
        elif value == "auto":
            yield self.at_entry(
                ctx,
                entry,
                '`stage` is "auto": the HF Trainer path runs stage 2 (accelerate\'s default, '
                "ACCELERATE_DEEPSPEED_ZERO_STAGE), the bare DeepSpeed launcher stage 0; write the stage you mean",
                on="value",
                severity=Severity.INFO,
            )
