from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.methods import neat_fa2_refused_model
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, is_train_group, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_int


class NeatPackingBatchSize(Rule):
    code = "LF019"
    name = "neat-packing-batch-size"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"neat_packing"})
    summary = "`neat_packing` with `flash_attn: fa2` needs `per_device_train_batch_size: 1` (and not gemma4/gpt-oss)"
    why = (
        "Confidence: certain when flash-attn is installed (a warning, not an error: without the flash-attn "
        "package LLaMA-Factory falls back to SDPA and the collator never asserts). With FlashAttention-2, "
        "LLaMA-Factory's collator "
        "feeds neat-packed rows through the varlen path and asserts one row per micro-batch; it also refuses "
        "gemma4 and gpt-oss models. (Without an importable flash-attn, `fa2` silently falls back to SDPA and "
        "neither check runs, see PF003; the message says so where the job's environment has no flash-attn, and "
        "the speed plan keeps the micro-batch there.) Pack more tokens per row instead: `cutoff_len` sets the row "
        "length."
    )
    fails_when = (
        "At the first batch, after tokenisation and model load: `AssertionError: bsz should be 1 for neat packing`."
    )
    evidence = (
        "llamafactory 0.9.5 data/collator.py L527-528 (assert), L489-493 (gemma4, gpt_oss)",
        "LLaMA-Factory commit 833f6027b (2026-03-20) added the assertion",
    )
    example = (
        "neat_packing: true\nflash_attn: fa2\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 2\n"
        "  ->  per_device_train_batch_size: 1, gradient_accumulation_steps: 8"
    )
    fix_safety = "No fix: the tokens per step should be kept with `gradient_accumulation_steps` or `cutoff_len`."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx) or not on(ctx, "neat_packing") or value_of(ctx, "flash_attn") != "fa2":
            return
        if value_of(ctx, "stage") != "sft":
            return  # LF010
        bsz = value_of(ctx, "per_device_train_batch_size")
        if is_int(bsz) and bsz > 1:
            yield report(
                self,
                ctx,
                ("per_device_train_batch_size",),
                f"`neat_packing` with `fa2` and `per_device_train_batch_size: {bsz}`: the first batch fails with "
                f"`AssertionError: bsz should be 1 for neat packing` (when flash-attn is installed){_judged(ctx)}",
            )
        if neat_fa2_refused_model(value_of(ctx, "model_name_or_path")):
            yield report(
                self,
                ctx,
                ("neat_packing",),
                "`neat_packing` with `fa2` on a gemma4/gpt-oss model: the collator stops with `Neat packing is not "
                "supported for gemma4, gpt_oss models for now.`",
            )


def _judged(ctx: Context) -> str:
    """The environment the finding is judged for: where the job's lacks flash-attn, `fa2` runs SDPA there and the
    speed plan does not hold the micro-batch at one row (one environment for every judgement)."""
    env = ctx.job.environment
    if env.has("flash_attn"):
        return ""
    return f"; {env.where} has no flash-attn, where `fa2` falls back to SDPA and the run does not stop"
