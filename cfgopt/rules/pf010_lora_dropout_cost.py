from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, number, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class LoraDropoutCost(Rule):
    code = "PF010"
    name = "lora-dropout-cost"
    severity = Severity.INFO
    default_on = False
    opt_in_because = (
        "`lora_dropout` is a regulariser the author may want; the cost is measured, the benefit to the model "
        "is not for cfgopt to judge"
    )
    kinds = TRAIN_KINDS
    summary = "`lora_dropout` > 0 stores a dropout output per adapted module: more memory, slower"
    why = (
        "Confidence: likely (measured). LLaMA-Factory 0.9.5 defaults `lora_dropout` to 0. A non-zero value makes "
        "PEFT keep a dropped-out copy of every adapted module's input for the backward pass: measured on an "
        "H200 (8B LoRA, all linear layers, 8192 tokens) +9.4 GiB (+11%) and -6.8% throughput. It is a "
        "regularisation choice; keep it if it was chosen for quality."
    )
    fails_when = "Never fails."
    evidence = ("docs/evidence/rocm_perf.md §5.3 and R28 (H200 probe: +11% memory, -6.8% tokens/s)",)
    example = "lora_dropout: 0.05   ->  lora_dropout: 0.0"
    fix_safety = "Unsafe: changes the regularisation."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or value_of(ctx, "finetuning_type") != "lora":
            return
        entry = entry_of(ctx, "lora_dropout")
        value = number(entry.node.value) if entry is not None else None
        if not value or value <= 0:
            return
        yield self.at_entry(
            ctx,
            entry,
            f"`lora_dropout: {value:g}` costs memory and speed (H200, 8B: +11% memory, -6.8% tokens/s); the "
            "default is 0",
            on="value",
            fix=self.fix("Set `lora_dropout: 0.0`", edits.replace_value(ctx.source, entry, 0.0), safe=False),
        )
