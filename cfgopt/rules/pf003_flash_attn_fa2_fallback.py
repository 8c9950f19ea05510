from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of
from cfgopt.source import Kind


class FlashAttnFa2Fallback(Rule):
    code = "PF003"
    name = "flash-attn-fa2-fallback"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "whether the image that runs the job has flash-attn is unknown where cfgopt runs"
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "`flash_attn: fa2` silently falls back to the default attention when flash-attn is not importable"
    why = (
        "Confidence: certain (the fallback), contested (whether the job's image has flash-attn). LLaMA-Factory "
        "checks `is_flash_attn_2_available()` and, if it is false, only logs 'FlashAttention-2 is not installed.' "
        "and keeps transformers' default (SDPA). `pip install flash-attn` gives a CUDA build; on ROCm it must be a "
        "ROCm build (CK, `GPU_ARCHS=gfx942`), or the Triton backend, which also needs "
        "`FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE` at run time; LLaMA-Factory's ROCm Dockerfile does not install "
        "it by default. The log line 'Using FlashAttention-2' / 'Using torch SDPA' settles what ran; at Alpaca "
        "lengths SDPA was as fast (bench/h200/measurements.md), so the gain shows only at long or packed "
        "sequences."
    )
    fails_when = "Never fails: the run uses SDPA instead of FlashAttention-2 and says so only in a warning line."
    evidence = (
        "llamafactory 0.9.5 model/model_utils/attention.py L76-83 (warning and return when not available)",
        "docs/evidence/rocm_perf.md §1.1-1.3, R02, R03 (ROCm builds, FLASH_ATTENTION_TRITON_AMD_ENABLE)",
        "LLaMA-Factory issues #7979, #8793",
    )
    example = "flash_attn: fa2   # check the log for 'Using FlashAttention-2', or use sdpa"
    fix_safety = "No fix: whether the image has flash-attn is not visible from the config."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "flash_attn")
        if entry is None or entry.node.value != "fa2":
            return
        target = ctx.settings.target
        if target.is_rocm:
            extra = (
                f"; on {target.name} it needs a ROCm build (CK), or the Triton build with "
                "FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE set at run time"
            )
        else:
            extra = ""
        yield self.at_entry(
            ctx,
            entry,
            "`flash_attn: fa2` falls back to SDPA with only a warning when the flash-attn package is not importable"
            + extra,
            on="value",
        )
