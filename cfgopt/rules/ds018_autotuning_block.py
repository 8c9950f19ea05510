from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class AutotuningBlock(Rule):
    code = "DS018"
    name = "autotuning-block"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"autotuning"})
    summary = "An `autotuning` block with `enabled: true`: the engine exits after the profiling steps"
    why = (
        "Confidence: certain. With `autotuning.enabled` true the DeepSpeed engine times steps "
        "`start_profile_step`..`end_profile_step` (3..5 by default), writes a metrics file and calls `exit()` at "
        "the next step: outside a `deepspeed --autotuning` experiment, a training run stops after six steps with "
        "exit status 0 and nothing saved. The autotuner itself needs `arg_mappings` for HF scripts, models bf16 as "
        "fp32 and does not tune offload. A block with `enabled` false is inert (info)."
    )
    fails_when = "At global step `end_profile_step` + 1 (6 by default): the process exits, status 0, no checkpoint."
    evidence = (
        "deepspeed 0.19.8 runtime/engine.py:3657-3658 (exit at end_profile_step + 1), :3705-3727 `_autotuning_exit`",
        "deepspeed 0.19.8 autotuning/constants.py:44, :59-62 (enabled false; profile steps 3..5)",
        "https://github.com/deepspeedai/DeepSpeed/issues/4759",
    )
    example = '"autotuning": {"enabled": true, ...}   ->  remove the block for training runs'
    fix_safety = "Unsafe: removing the block lets the run train to the end instead of profiling."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        entry = src.find(("autotuning",))
        if entry is None or not entry.node.is_mapping:
            return
        fix = self.fix("Remove the `autotuning` block", edits.delete_entry(src, entry), safe=False)
        enabled = entry.node.get("enabled")
        if enabled is not None and enabled.node.value is True:
            end = entry.node.get("end_profile_step")
            last = end.node.value if end is not None and isinstance(end.node.value, int) else 5
            yield self.at_entry(
                ctx,
                enabled,
                f"`autotuning.enabled` is true: the DeepSpeed engine calls exit() at step {last + 1} (after "
                "profiling); a training run ends there with status 0 and nothing saved (fine only for a "
                "`deepspeed --autotuning` experiment)",
                on="value",
                fix=fix,
            )
        else:
            yield self.at_entry(
                ctx,
                entry,
                "`autotuning` block with autotuning off: inert (it is used only by `deepspeed --autotuning`)",
                severity=Severity.INFO,
                fix=fix,
            )
