from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, model_params_billion, training, value_of
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_int


class QuantizationWhenFits(Rule):
    code = "PF011"
    name = "quantization-when-fits"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "not measured here, and quantization may be chosen for reasons other than memory"
    kinds = TRAIN_KINDS
    summary = "On-the-fly quantization (QLoRA) of a model whose bf16 weights fit the GPU several times over"
    why = (
        "Confidence: likely (not measured here). On-the-fly quantization (`quantization_bit` with bnb, HQQ or "
        "EETQ) only saves weight memory; every forward and backward pass dequantizes the weights, so a QLoRA "
        "step is slower than the same LoRA step in bf16. When 2 bytes per parameter take less than a third of "
        "the target's memory (an 8B model is 16 GB against 192 GB on an MI300X), plain bf16 LoRA is the faster "
        "choice. The model size is read from its name; an A/B step-time comparison settles it."
    )
    fails_when = "Never fails: slower steps than needed."
    evidence = (
        "docs/evidence/rocm_perf.md R15 and §5.1 (bytes per parameter)",
        "docs/evidence/llamafactory.md §2 (`quantization_bit`: QLoRA slower per step, only worth it when memory-bound)",
    )
    example = "quantization_bit: 4   # Llama-3-8B on mi300x  ->  remove it (bf16 LoRA)"
    fix_safety = "No fix: dropping quantization raises memory use and changes numerics."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx):
            return
        entry = entry_of(ctx, "quantization_bit")
        if entry is None or not is_int(entry.node.value):
            return
        if value_of(ctx, "quantization_method") not in ("bnb", "hqq", "eetq"):
            return
        memory = ctx.settings.target.memory_gib
        params = model_params_billion(value_of(ctx, "model_name_or_path"))
        if not memory or params is None:
            return
        bf16_gib = params * 2e9 / 2**30
        if bf16_gib * 3 > memory:
            return
        yield self.at_entry(
            ctx,
            entry,
            f"`quantization_bit: {entry.node.value}` for {a(format(params, 'g') + 'B')} model: its bf16 weights "
            f"({bf16_gib:.0f} GiB) fit {a(format(memory, 'g'))} GiB {ctx.settings.target.name} easily, and "
            "quantized steps are slower (dequantization)",
        )
