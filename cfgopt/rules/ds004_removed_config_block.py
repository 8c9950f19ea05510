from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge import versions
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class RemovedConfigBlock(Rule):
    code = "DS004"
    name = "removed-config-block"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "A block DeepSpeed removed and now rejects (compression, sparse attention, PLD, amp, ...)"
    why = (
        "DeepSpeed 0.19.8 removed several features and refuses configs that still carry their blocks, rather "
        "than silently ignoring them (a compression block that is ignored would train the model unquantized). "
        "Older configs, and the HF docs' `amp` block, fail as they are."
    )
    fails_when = "At `deepspeed.initialize` / DeepSpeedConfig construction: `DeepSpeedConfigError`."
    evidence = (
        "deepspeed 0.19.8 runtime/config.py `_reject_removed_config_keys`",
        "https://github.com/deepspeedai/DeepSpeed/issues/8489",
    )
    example = '"sparse_attention": {...}   ->  remove, or pin an older DeepSpeed'
    fix_safety = "Unsafe: removing the block changes what the run does (the feature is gone)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.settings.ds_schema
        if src.root is None:
            return
        for entry in src.root.entries or ():
            if entry.key in ds.removed_top_level:
                yield self._report(ctx, entry, ds.removed_top_level[entry.key])
        zero = src.root.get("zero_optimization")
        for entry in (zero.node.entries or []) if zero is not None else []:
            if entry.key in ds.removed_zero:
                yield self._report(ctx, entry, ds.removed_zero[entry.key])

    def _report(self, ctx: Context, entry, upstream: str) -> Diagnostic:
        version = ctx.settings.ds_schema.version
        history = versions.ds_removed_history(entry.dotted, version)
        when = f" {history}" if history else ""
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.dotted}` was removed from DeepSpeed{when}; DeepSpeed {version} stops with: {upstream.strip()}",
            fix=self.fix(f"Remove `{entry.dotted}`", edits.delete_entry(ctx.source, entry), safe=False),
        )
