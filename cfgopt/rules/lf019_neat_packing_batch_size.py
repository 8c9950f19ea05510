from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.methods import fa3_kernel_model, neat_fa2_checked_in, neat_fa2_refused_model
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import (
    TRAIN_KINDS,
    checking_releases,
    fa2_words,
    fa2_written,
    is_train_group,
    on,
    report,
    value_of,
)
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_int


class NeatPackingBatchSize(Rule):
    code = "LF019"
    name = "neat-packing-batch-size"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"neat_packing"})
    summary = (
        "`neat_packing` with `flash_attn: fa2` needs `per_device_train_batch_size: 1` (and not gemma4) from "
        "LLaMA-Factory 0.9.5"
    )
    why = (
        "Confidence: certain when flash-attn is installed (a warning, not an error: without the flash-attn "
        "package LLaMA-Factory falls back to SDPA and the collator never asserts). With FlashAttention-2, "
        "LLaMA-Factory's collator "
        "feeds neat-packed rows through the varlen path and asserts one row per micro-batch; it also refuses "
        "gemma4 models. Both checks test the model's attention for `flash_attention_2`: gpt-oss, which they also "
        "name, always runs the hub's FlashAttention-3 kernel in LLaMA-Factory (whatever `flash_attn` says), so "
        "neither check runs for it and the rule is quiet there. (Without an importable flash-attn, `fa2` silently "
        "falls back to SDPA and "
        "neither check runs, see PF003; the message says so where the job's environment has no flash-attn, and "
        "there the speed plan, where it packs neatly with several rows per micro-batch, writes what runs, "
        "`flash_attn: sdpa` (`disabled` for Gemma 2, whose soft-capping SDPA drops), and no stop once flash-attn "
        "is installed.) Both checks came "
        "with LLaMA-Factory 0.9.5: 0.9.3 and 0.9.4 run neat packing with fa2 at any micro-batch, so the rule fires "
        "only where a release judged (the pin, `--llamafactory-version`, or every release the project's range "
        "allows) is 0.9.5 or later, and names it where the range is wider. Pack more tokens per row instead: "
        "`cutoff_len` sets the row length."
    )
    fails_when = (
        "At the first batch, after tokenisation and model load: `AssertionError: bsz should be 1 for neat packing`."
    )
    evidence = (
        "llamafactory 0.9.5 data/collator.py L527-528 (assert), L489-493 (gemma4, gpt_oss)",
        "llamafactory 0.9.5 model/model_utils/attention.py L34-44 (gpt_oss: `_attn_implementation` set to "
        "`kernels-community/vllm-flash-attn3`), train/sft/workflow.py L69 (the collator gets "
        "`model.config._attn_implementation`); transformers 5.6.0 models/gpt_oss/modeling_gpt_oss.py L408 (the "
        "kernel among `_compatible_flash_implementations`: kept)",
        "LLaMA-Factory commit 833f6027b (2026-03-20) added the assertion",
        "llamafactory 0.9.3 / 0.9.4 wheels: data/collator.py L242-251 / L252-261 (`SFTDataCollatorWith4DAttentionMask"
        ".__call__`: no assertion, no model check; fa2 only skips the 4-D mask), model/model_utils/packing.py "
        "L110-116 (neat-packed rows of any micro-batch through the `_get_unpad_data` patch)",
    )
    example = (
        "neat_packing: true\nflash_attn: fa2\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 2\n"
        "  ->  per_device_train_batch_size: 1, gradient_accumulation_steps: 8"
    )
    fix_safety = "No fix: the tokens per step should be kept with `gradient_accumulation_steps` or `cutoff_len`."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        written = fa2_written(ctx)  # `fa2`, or `auto` on Gemma 2, which LLaMA-Factory turns into fa2
        if not is_train_group(ctx) or not on(ctx, "neat_packing") or written is None:
            return
        if value_of(ctx, "stage") != "sft":
            return  # LF010
        if fa3_kernel_model(value_of(ctx, "model_name_or_path")):
            return  # gpt-oss runs the FA3 kernel, never `flash_attention_2`: neither check runs
        checked = neat_fa2_checked_in(ctx.settings.llamafactory_releases)
        if not checked:
            return  # no release judged checks (0.9.3, 0.9.4): neat packing runs with fa2 at any micro-batch
        where = checking_releases(ctx, checked)
        bsz = value_of(ctx, "per_device_train_batch_size")
        if is_int(bsz) and bsz > 1:
            yield report(
                self,
                ctx,
                ("per_device_train_batch_size",),
                f"`neat_packing` with {fa2_words(written)} and `per_device_train_batch_size: {bsz}`: the first batch "
                "fails with "
                f"`AssertionError: bsz should be 1 for neat packing` (when flash-attn is installed){where}"
                f"{_judged(ctx, written)}",
            )
        if neat_fa2_refused_model(value_of(ctx, "model_name_or_path")):
            yield report(
                self,
                ctx,
                ("neat_packing",),
                f"`neat_packing` with {fa2_words(written)} on a gemma4 model: the collator stops with `Neat packing "
                "is not supported "
                f"for gemma4, gpt_oss models for now.` (when flash-attn is installed){where}",
            )


def _judged(ctx: Context, written: str) -> str:
    """The environment the finding is judged for: where the job's lacks flash-attn, `fa2` runs SDPA there (eager
    for Gemma 2) and the speed plan does not hold the micro-batch at one row (one environment for every judgement)."""
    env = ctx.job.environment
    if env.has("flash_attn"):
        return ""
    runs = "SDPA" if ctx.job.fa2_fallback == "sdpa" else "eager attention"
    return f"; {env.where} has no flash-attn, where `{written}` falls back to {runs} and the run does not stop"
