from __future__ import annotations

from collections.abc import Iterator

from cfgopt.plan.priors import PRIORS
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, number, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class EagerAttention(Rule):
    code = "PF004"
    name = "eager-attention"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"flash_attn=disabled"})  # `check` reports on the file's own `flash_attn: disabled` entry
    summary = "`flash_attn: disabled` (eager attention) for training: O(L^2) memory, no fused kernel"
    why = (
        "Confidence: likely at cutoff_len > 1024 (warning), contested below (info). `disabled` selects the "
        "`eager` implementation, which materialises the full attention matrix. On an H200 (8B LoRA), eager at "
        "4x2048 tokens ran out of 139 GiB where SDPA used 82 GiB; at Alpaca lengths (longest batch 832 tokens) "
        "eager and SDPA ran at the same speed. A few models need eager (LLaMA-Factory forces it where so). Gemma 2 "
        "soft-caps its attention logits, which SDPA drops: without flash-attn eager is what LLaMA-Factory runs it "
        "with (quiet there); with flash-attn the faster kernel that keeps the soft-capping is `fa2`. KTO is the "
        "exception measured: eager ran 1.06-1.25x SDPA's speed in each of seven runs (3B, 4B and 7B LoRA, cutoff_len "
        "1024 and 2048, H200 and H100) at the same peak (unpacked, padded batches: SDPA takes its memory-efficient "
        "kernel), so the speed plan chooses it there and this rule is quiet on KTO up to the cutoff measured (2048)."
    )
    fails_when = "Never fails by itself: slower, and out of memory at long sequences."
    evidence = (
        "llamafactory 0.9.5 model/model_utils/attention.py L67-68 (`disabled` -> eager), L46-58 (Gemma 2: eager "
        "where flash-attn is missing; SDPA 'does not support' its soft-capping)",
        "docs/evidence/rocm_perf.md §1.4 (H200: eager OOM at 4x2048, SDPA 82 GiB)",
        "bench/h200/measurements.md (eager vs SDPA: no difference at Alpaca lengths)",
        "bench/planner/README.md 'KTO's attention' (eager 1.06-1.25x SDPA in seven KTO runs of seven)",
    )
    example = "flash_attn: disabled   ->  flash_attn: sdpa"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. Unsafe: changes the attention kernel (numerically close, not identical)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx):
            return
        entry = entry_of(ctx, "flash_attn")
        if entry is None or entry.node.value != "disabled":
            return
        faster = "SDPA"
        if ctx.job.soft_capped_attention:
            if not ctx.job.has_package("flash_attn"):
                return  # Gemma 2: eager keeps its soft-capping, which SDPA drops; fa2 needs flash-attn
            faster = "fa2 (which keeps Gemma 2's soft-capping; SDPA drops it)"
        cutoff = number(value_of(ctx, "cutoff_len")) or 0
        if value_of(ctx, "stage") == "kto" and cutoff <= PRIORS["attn_by_stage_up_to"]["kto"]:
            return  # eager measured faster than SDPA on KTO, at the same peak (the speed plan chooses it)
        long = cutoff > 1024
        yield self.at_entry(
            ctx,
            entry,
            f"`flash_attn: disabled` trains with eager attention (full L x L matrix) at cutoff_len {cutoff:g}: "
            + (f"much more memory and slower than {faster}" if long else "little difference at this length"),
            on="value",
            severity=None if long else Severity.INFO,
        )
