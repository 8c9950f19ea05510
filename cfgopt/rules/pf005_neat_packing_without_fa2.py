from __future__ import annotations

from collections.abc import Iterator

from cfgopt.environment.stated import fa2_refusal
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class NeatPackingWithoutFa2(Rule):
    code = "PF005"
    name = "neat-packing-without-fa2"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"neat_packing"})  # `check` reports on the file's own `neat_packing` entry, never without it
    summary = (
        "`neat_packing` without `flash_attn: fa2`: a dense 4-D block mask built per batch, SDPA off its flash kernel"
    )
    why = (
        "Confidence: likely (measured). Without FlashAttention-2, LLaMA-Factory's collator turns the packed "
        "segment ids into a `batch x 1 x L x L` block-diagonal mask on the CPU for every batch, and SDPA with an "
        "explicit mask cannot use its flash kernel. Measured on an H200 (8B LoRA, 16 packs of 2048 tokens): "
        "neat_packing with SDPA was 11.3% slower than plain packing (8,296 vs 9,284 tokens/s). With `fa2` "
        "(flash-attn installed) neat packing uses the varlen path instead; plain `packing: true` is faster but "
        "lets packed samples attend to each other. Reported only where the job's environment has flash-attn "
        "(`--environment`, its requirement files) and the target can run it (not before Ampere, LF049; not a "
        "CUDA build on ROCm, ENV001): otherwise the mask is the price of keeping samples apart."
    )
    fails_when = "Never fails: slower steps (and O(L^2) mask memory at long cutoff_len)."
    evidence = (
        "llamafactory 0.9.5 data/collator.py L524-525 (`prepare_4d_attention_mask` unless flash_attention_2)",
        "bench/planner/README.md, 'The plan obeys its own environment' (H200, 2026-12-05: 0.84x / 0.84x / 0.92x)",
        "bench/h200/measurements.md V13 vs V7 (-11.3%, the first measurement)",
        "LLaMA-Factory PR #7272 (18.7 s per collator call at 26k tokens before optimisation)",
    )
    example = "neat_packing: true   ->  add flash_attn: fa2 (with a flash-attn build), or use packing: true"
    fix_safety = "No fix: `fa2` needs the flash-attn package; plain packing changes what the model sees."
    # quiet where the job's environment has no flash-attn (cfgopt.environment.stated): the mask is then the cost of
    # keeping packed samples apart, which is what the speed plan writes

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or value_of(ctx, "stage") != "sft":
            return
        entry = entry_of(ctx, "neat_packing")
        if entry is None or not entry.node.value or value_of(ctx, "flash_attn") == "fa2":
            return
        if not ctx.job.has_package("flash_attn"):
            return  # without flash-attn in the job's environment the mask is the price of keeping samples apart
        if ctx.settings.target.stated and fa2_refusal(ctx.job.environment, ctx.settings.target):
            return  # fa2 cannot run there (before Ampere: LF049; a CUDA build on ROCm: ENV001): no advice to use it
        yield self.at_entry(
            ctx,
            entry,
            f"`neat_packing` with `flash_attn: {value_of(ctx, 'flash_attn')}` builds a dense block mask per batch "
            "(measured 8-16% slower than plain packing with SDPA on an H200); use `fa2` (flash-attn is in "
            f"{ctx.job.environment.where})",
        )
