from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on
from cfgopt.text.diagnostics import Diagnostic, Severity


class GradientCheckpointingKeyIgnored(Rule):
    code = "LF022"
    name = "gradient-checkpointing-key-ignored"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"gradient_checkpointing"})
    summary = "HF's `gradient_checkpointing` key does not control LLaMA-Factory's gradient checkpointing"
    why = (
        "Confidence: certain. LLaMA-Factory turns gradient checkpointing on at model load for every model that "
        "supports it unless `disable_gradient_checkpointing: true`; HF's `gradient_checkpointing` only makes the "
        "Trainer call `gradient_checkpointing_enable()` again. So `gradient_checkpointing: false` leaves it on "
        "(LLaMA-Factory #6232 saw no memory change), `gradient_checkpointing: true` is redundant, and with "
        "`disable_gradient_checkpointing: true` it switches checkpointing back on (HF's reentrant default)."
    )
    fails_when = (
        "Never fails: the run is slower (checkpointing measured 1.14-1.51x slower on an H200) or not what was meant."
    )
    evidence = (
        "llamafactory 0.9.5 model/model_utils/checkpointing.py L164-178 (GC on unless disable_gradient_checkpointing)",
        "transformers 5.6.0 trainer.py L1378-1379 (`if args.gradient_checkpointing: ...gradient_checkpointing_enable`)",
        "LLaMA-Factory issue #6232; bench/h200/measurements.md (GC off 1.37x, V10 vs V7); 1.14-1.51x over the H200 "
        "runs (cfgopt/plan/priors.py)",
    )
    example = "gradient_checkpointing: false   ->  disable_gradient_checkpointing: true"
    fix_safety = (
        "Safe: removing a redundant `gradient_checkpointing: true` (unsafe when `use_reentrant_gc: false` or "
        "`gradient_checkpointing_kwargs` is set: the Trainer's second call re-applies its kwargs). "
        "Unsafe: `gradient_checkpointing: false` -> "
        "`disable_gradient_checkpointing: true` (what was meant, but it needs more memory), and removing "
        "`gradient_checkpointing: true` next to `disable_gradient_checkpointing: true`."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        entry = entry_of(ctx, "gradient_checkpointing")
        if entry is None:
            return
        src = ctx.source
        disabled = on(ctx, "disable_gradient_checkpointing")
        if not entry.node.value:
            if disabled:
                return
            if entry_of(ctx, "disable_gradient_checkpointing") is None:
                fix_edits = edits.rename_key(src, entry, "disable_gradient_checkpointing")
                replaced = edits.replace_value(src, entry, True)
                fix_edits = fix_edits + replaced if replaced else None
            else:
                fix_edits = None
            yield self.at_entry(
                ctx,
                entry,
                "`gradient_checkpointing: false` does not turn it off: LLaMA-Factory enables gradient checkpointing "
                "unless `disable_gradient_checkpointing: true`",
                fix=self.fix("Use `disable_gradient_checkpointing: true`", fix_edits, safe=False),
            )
        elif disabled:
            yield self.at_entry(
                ctx,
                entry,
                "`gradient_checkpointing: true` switches checkpointing back on despite "
                "`disable_gradient_checkpointing: true` (the HF Trainer enables it after model load)",
                fix=self.fix("Remove `gradient_checkpointing`", edits.delete_entry(src, entry), safe=False),
            )
        else:
            yield self.at_entry(
                ctx,
                entry,
                "`gradient_checkpointing: true` is redundant: LLaMA-Factory already enables gradient checkpointing",
                severity=Severity.INFO,
                fix=self.fix(
                    "Remove `gradient_checkpointing`",
                    edits.delete_entry(src, entry),
                    safe=on(ctx, "use_reentrant_gc") and entry_of(ctx, "gradient_checkpointing_kwargs") is None,
                ),
            )
