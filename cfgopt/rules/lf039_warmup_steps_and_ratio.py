from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, number
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import version_key


class WarmupStepsAndRatio(Rule):
    code = "LF039"
    name = "warmup-steps-and-ratio"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"warmup_steps"})  # both must be written: the rarer one says whether to look
    summary = "Both `warmup_steps` and `warmup_ratio` set: one of them is silently ignored"
    why = (
        "Confidence: certain. The HF Trainer warms up by one of the two. transformers 4.x (LLaMA-Factory 0.9.0-0.9.4) "
        "uses `warmup_steps` when it is above 0 and ignores `warmup_ratio`; transformers 5 (0.9.5) deprecates "
        "`warmup_ratio` and copies it over `warmup_steps`, so the ratio wins. The same config warms up differently "
        "by release. Peers (Axolotl's config validation) refuse the pair."
    )
    fails_when = "Never: the run warms up for a length the config does not say."
    evidence = (
        "transformers 5.6.0 training_args.py `__post_init__` (warmup_ratio copied into warmup_steps) and "
        "`get_warmup_steps`",
        "transformers 4.57.1 training_args.py `get_warmup_steps` (warmup_steps > 0 wins)",
    )
    example = "warmup_steps: 100\nwarmup_ratio: 0.1   ->  keep one"
    fix_safety = "No fix: which warm-up was meant is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        steps_entry, ratio_entry = entry_of(ctx, "warmup_steps"), entry_of(ctx, "warmup_ratio")
        if steps_entry is None or ratio_entry is None or not is_train_group(ctx):
            return
        steps, ratio = number(steps_entry.node.value), number(ratio_entry.node.value)
        if not steps or not ratio or steps <= 0 or ratio <= 0:
            return
        lf = ctx.settings.lf_schema
        if version_key(lf.transformers or "5")[0] >= 5:
            used, ignored = f"`warmup_ratio: {ratio:g}`", f"`warmup_steps: {steps:g}`"
        else:
            used, ignored = f"`warmup_steps: {steps:g}`", f"`warmup_ratio: {ratio:g}`"
        yield self.at_entry(
            ctx,
            ratio_entry,
            f"`warmup_steps` and `warmup_ratio` are both set: with transformers {lf.transformers} (LLaMA-Factory "
            f"{lf.version}) the run warms up by {used} and ignores {ignored}; keep one",
        )
