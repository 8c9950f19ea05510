from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class MissingZeroOptimization(Rule):
    code = "DS003"
    name = "missing-zero-optimization"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "No `zero_optimization` block, in a config the HF Trainer (LLaMA-Factory) will use"
    why = (
        "DeepSpeed alone treats a missing block as ZeRO-0, but accelerate's `DeepSpeedPlugin` (the HF Trainer "
        "path LLaMA-Factory takes) refuses it. It is an error when a LLaMA-Factory config points to this file; "
        "for a DeepSpeed JSON seen on its own cfgopt cannot know the launcher, and notes it (info) only when "
        "DS003 is selected by name: DeepSpeed's own examples leave the block out on purpose."
    )
    fails_when = (
        "At start-up under the HF Trainer: `Please specify the ZeRO optimization config in the DeepSpeed config`."
    )
    evidence = (
        "accelerate 1.11.0 utils/dataclasses.py L1240 (`DeepSpeedPlugin.__post_init__`)",
        "https://github.com/zjunlp/KnowLM/issues/87",
    )
    example = '{"train_batch_size": "auto"}   ->  add "zero_optimization": {"stage": 0}'
    fix_safety = 'Safe: adds `{"stage": 0}`, which is what DeepSpeed alone would have run.'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None or not isinstance(src.data, dict) or "zero_optimization" in src.data:
            return
        if any(k.startswith("zero_optimi") for k in src.data):
            return  # a misspelling: DS002 proposes the rename, which is the better fix
        fix = self.fix(
            'Add "zero_optimization": {"stage": 0}',
            edits.insert_entry(src, None, "zero_optimization", {"stage": 0}),
            safe=True,
        )
        if ctx.consumers:
            names = ", ".join(c.document.path.name for c in ctx.consumers)
            yield self.at_node(
                ctx,
                src.root,
                f"No `zero_optimization` block: under the HF Trainer (used by {names}) "
                "accelerate stops with `Please specify the ZeRO optimization config`",
                fix=fix,
            )
        elif ctx.settings.named(self.code):  # a JSON seen on its own may be for the deepspeed launcher: opt-in
            yield self.at_node(
                ctx,
                src.root,
                "No `zero_optimization` block: fine for the `deepspeed` launcher "
                "(ZeRO-0), but the HF Trainer / LLaMA-Factory path refuses it",
                severity=Severity.INFO,
                fix=fix,
            )
