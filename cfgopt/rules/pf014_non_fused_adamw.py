from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class NonFusedAdamw(Rule):
    code = "PF014"
    name = "non-fused-adamw"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "not measured here"
    kinds = TRAIN_KINDS
    summary = "`optim: adamw_torch` (not fused) for full or freeze fine-tuning"
    why = (
        "Confidence: likely (not measured here). transformers 5.6.0 defaults to `adamw_torch_fused` on torch >= "
        "2.8; an explicit `adamw_torch` brings back the foreach implementation. With every parameter trainable the "
        "optimizer step is a visible part of each step; on ROCm (MI250X) foreach AdamW was even slower than a "
        "plain loop and fused the fastest (pytorch#120308). For LoRA the optimizer state is tiny, so no report."
    )
    fails_when = "Never fails."
    evidence = (
        "cfgopt/knowledge/schemas/llamafactory-0.9.5.json (`optim` default adamw_torch_fused under transformers 5.6.0)",
        "docs/evidence/rocm_perf.md §2.3 and R14 (pytorch#120308)",
    )
    example = "optim: adamw_torch   ->  optim: adamw_torch_fused"
    fix_safety = "Unsafe: a different optimizer implementation (same algorithm, different rounding)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or value_of(ctx, "finetuning_type") not in ("full", "freeze"):
            return
        entry = entry_of(ctx, "optim")
        if entry is None or entry.node.value != "adamw_torch":
            return
        yield self.at_entry(
            ctx,
            entry,
            "`optim: adamw_torch` is the unfused AdamW; `adamw_torch_fused` (the default) is faster for full "
            "fine-tuning",
            on="value",
            fix=self.fix(
                "Use `adamw_torch_fused`", edits.replace_value(ctx.source, entry, "adamw_torch_fused"), safe=False
            ),
        )
