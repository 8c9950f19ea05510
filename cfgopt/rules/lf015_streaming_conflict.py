from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, number, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class StreamingConflict(Rule):
    code = "LF015"
    name = "streaming-conflict"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"streaming"})
    summary = "`streaming: true` without `max_steps`, with `max_samples`, or with a fractional `val_size`"
    why = (
        "Confidence: certain. A streamed dataset has no length: get_train_args needs `max_steps`, and "
        "DataArguments refuses `max_samples` and a fractional `val_size` (an integer count of examples is fine)."
    )
    fails_when = "At start-up (DataArguments / get_train_args)."
    evidence = ("llamafactory 0.9.5 hparams/data_args.py L176-180", "llamafactory 0.9.5 hparams/parser.py L356-357")
    example = "streaming: true\nnum_train_epochs: 3   ->  max_steps: 10000"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not on(ctx, "streaming"):
            return
        val_size = number(value_of(ctx, "val_size"))
        if val_size is not None and 1e-6 < val_size < 1:
            yield report(
                self,
                ctx,
                ("val_size",),
                "`val_size` below 1 in streaming mode: LLaMA-Factory stops at start-up with `Streaming mode "
                "should have an integer val size.`",
            )
        samples = entry_of(ctx, "max_samples")
        if samples is not None and samples.node.value is not None:
            yield self.at_entry(
                ctx,
                samples,
                "`max_samples` with `streaming`: LLaMA-Factory stops at start-up with `max_samples is "
                "incompatible with streaming`",
            )
        if is_train_group(ctx) and value_of(ctx, "max_steps") == -1:
            yield report(
                self,
                ctx,
                ("streaming",),
                "`streaming: true` without `max_steps`: LLaMA-Factory stops at start-up with `Please specify "
                "max_steps in streaming mode.`",
            )
