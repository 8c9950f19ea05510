from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_precision
from cfgopt.rules.support.deepspeed import readers_keep
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class RocmBf16CommunicationFp32(Rule):
    code = "DS023"
    name = "rocm-bf16-communication-fp32"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    # fires on a missing communication_data_type, but only with a bf16 block (either spelling)
    triggers = frozenset({"bf16", "bfloat16"})
    summary = "bf16 DeepSpeed training on ROCm without `communication_data_type: fp32`"
    why = (
        "Confidence: likely. Without `communication_data_type` DeepSpeed reduces gradients in the training dtype. "
        "accelerate 1.14 (PR #4025) started setting `communication_data_type: fp32` for bf16 on ROCm when unset, "
        "because 'bf16 DeepSpeed training can silently produce NaN weights' there; LLaMA-Factory 0.9.5 pins "
        "accelerate <= 1.11, which does not, so the file has to say it. fp32 doubles the reduction volume (small "
        "for LoRA gradients). Judged for `--target` on ROCm. The reason is the job's stack (its accelerate), so a "
        'JSON that no config of the run reads is only noted (with bf16 "auto" its precision is unknown too), its '
        "fix shown, not applied: the JSON a speed plan leaves unread (every config reading it drops `deepspeed:`) "
        "stays as it is, in that run and the next."
    )
    fails_when = "Silently: NaN weights reported with bf16 reductions on ROCm."
    evidence = (
        "https://github.com/huggingface/accelerate/pull/4025 (accelerate 1.14: fp32 communication for bf16 on ROCm)",
        "llamafactory 0.9.4 and 0.9.5 requirements.txt (`accelerate>=1.3.0,<=1.11.0`)",
        "accelerate 1.11.0 utils/dataclasses.py:1378-1413 `set_mixed_precision` (no such default in the pinned "
        "version)",
        "deepspeed 0.19.8 runtime/config.py:216-230 (`communication_data_type`, default None = training dtype)",
    )
    example = '"bf16": {"enabled": "auto"} on MI300X   ->  add "communication_data_type": "fp32"'
    fix_safety = (
        "Unsafe: fp32 reductions double the gradient communication volume. Display-only on a JSON that no config "
        "of the run reads. A JSON that a config of the project not judged in the run reads (not named, as a "
        "pre-commit run names only the changed files) is left as it is: no fix, and the message names that config."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        target = ctx.settings.target
        if not target.is_rocm or not isinstance(src.data, dict) or "communication_data_type" in src.data:
            return
        block = "bf16" if "bf16" in src.data else "bfloat16"
        entry = src.find((block, "enabled"))
        if entry is None:
            return
        value = entry.node.value
        if value == "auto":
            lf = ctx.settings.lf_schema
            if ctx.consumers and not any(lf_precision(c, "bf16", lf) for c in ctx.consumers):
                return
        elif value is not True:
            return
        message = (
            f"bf16 on {target.device} without `communication_data_type`: gradients are reduced in bf16; "
            f'set "fp32" (what accelerate >= 1.14 does on ROCm; {ctx.lf_label} pins accelerate <= 1.11)'
        )
        # a config of the project outside the run may read the JSON too: its job is not judged, so no edit
        kept = readers_keep(ctx) if ctx.consumers else ""
        if not ctx.consumers:
            message += f"; {_UNREAD}"
        yield self.at_entry(
            ctx,
            entry,
            message + kept,
            on="value",
            severity=Severity.WARNING if ctx.consumers else Severity.INFO,
            fix=None
            if kept
            else self.fix(
                'Add "communication_data_type": "fp32"',
                edits.insert_entry(src, None, "communication_data_type", "fp32"),
                safe=False,
                display_only=not ctx.consumers,
            ),
        )


# Why a JSON read by no config of the run is not fixed: the dtype is the job's (its accelerate) and no job is in view;
# a JSON the speed plan left unread (its configs dropped `deepspeed:`) stays as it is on every later run.
_UNREAD = (
    "no config of the run reads this JSON, so its fix is only shown (name the config that uses it; where a speed "
    "plan drops `deepspeed:`, the JSON is left as it is)"
)
