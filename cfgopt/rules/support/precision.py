"""Where a precision switch stops the run on the judged target: LF008's error, and what LF001's mapping of the
WebUI's `compute_type` checks before it writes that switch (a fix writes nothing that stops the run)."""

from __future__ import annotations

from cfgopt.rules.base import Context
from cfgopt.rules.support.llamafactory import on


def stops_on_target(ctx: Context, key: str) -> str | None:
    """Why `key: true` (`bf16`, `pure_bf16`) stops the run at start-up on the judged target, in the real tool's
    words; None where it starts. Only a stated target without a GPU: HF `TrainingArguments` refuses `bf16` there
    unless `use_cpu` is set (transformers 5.6.0 training_args.py L1732-1738), LLaMA-Factory refuses `pure_bf16`
    whatever `use_cpu` says (hparams/parser.py L380-382). A GPU without bf16 hardware emulates it (LF008 warns)."""
    target = ctx.settings.target
    if not target.stated or target.platform in ("cuda", "rocm"):
        return None
    if key == "bf16" and not on(ctx, "use_cpu"):
        return "TrainingArguments stops at start-up with `Your setup doesn't support bf16/gpu`"
    if key == "pure_bf16":
        return "get_train_args stops at start-up with `This device does not support `pure_bf16``"
    return None
