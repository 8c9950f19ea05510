from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on


class Bf16UnsupportedOnTarget(Rule):
    code = "LF008"
    name = "bf16-unsupported-on-target"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"bf16", "pure_bf16"})
    summary = "`bf16` / `pure_bf16` on a target without bf16 support (`--target cpu`)"
    why = (
        "Confidence: certain. HF `TrainingArguments` refuses `bf16: true` unless a bf16-capable GPU is present "
        "or `use_cpu: true` is set; LLaMA-Factory refuses `pure_bf16` unless `is_torch_bf16_gpu_available()` "
        "(or an NPU with bf16) says yes, whatever `use_cpu` says. Every GPU target cfgopt knows supports bf16; "
        "`--target cpu` does not. This is why a config that is fine on the cluster fails on a login node."
    )
    fails_when = (
        "At start-up: `Your setup doesn't support bf16/gpu` (HF) or `This device does not support `pure_bf16`` "
        "(LLaMA-Factory)."
    )
    evidence = (
        "transformers 5.6.0 training_args.py L1732-1738 (bf16 without a bf16 GPU and without use_cpu)",
        "llamafactory 0.9.5 hparams/parser.py L380-382 (`This device does not support `pure_bf16``)",
    )
    example = "bf16: true   # --target cpu  ->  fp32 on CPU, or lint for the GPU target"
    fix_safety = "No fix: the config is usually right for the cluster; lint it with the real `--target`."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if ctx.settings.target.bf16 or not is_train_group(ctx):
            return
        bf16 = entry_of(ctx, "bf16")
        if bf16 is not None and bf16.node.value and not on(ctx, "use_cpu"):
            yield self.at_entry(
                ctx,
                bf16,
                f"`bf16: true` on target {ctx.settings.target.name}: TrainingArguments stops at start-up with "
                "`Your setup doesn't support bf16/gpu` (set `use_cpu: true` to train on CPU)",
            )
        pure = entry_of(ctx, "pure_bf16")
        if pure is not None and pure.node.value:
            yield self.at_entry(
                ctx,
                pure,
                f"`pure_bf16: true` on target {ctx.settings.target.name}: get_train_args stops at start-up with "
                "`This device does not support `pure_bf16``",
            )
