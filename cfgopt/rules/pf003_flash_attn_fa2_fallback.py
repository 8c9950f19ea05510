from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class FlashAttnFa2Fallback(Rule):
    code = "PF003"
    name = "flash-attn-fa2-fallback"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "whether the image that runs the job has flash-attn is unknown where cfgopt runs"
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "`flash_attn: fa2` falls back to SDPA only when flash-attn is absent; a wrong build fails at model load"
    why = (
        "Confidence: certain (what transformers checks), contested (what the job's image has). LLaMA-Factory asks "
        "`is_flash_attn_2_available()`, and if it is false only logs 'FlashAttention-2 is not installed.' and keeps "
        "transformers' default (SDPA). That check looks at the package alone: the `flash-attn` distribution is "
        "installed, at version >= 2.3.3, and torch sees a GPU. It does not import flash-attn, so a present but "
        "wrong build is selected and fails when the model loads its attention: a CUDA wheel on ROCm (`pip install "
        "flash-attn` from the default index builds for CUDA), a CK build for another GPU architecture "
        "(`GPU_ARCHS=gfx942` for MI300X, gfx90a for MI250X/MI210), or a Triton build imported without "
        "`FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE` in releases before flash-attention's automatic Triton fallback "
        "(PR #2343, March 2026). Only an absent package falls back. LLaMA-Factory's ROCm Dockerfile does not "
        "install it by default. The log line 'Using FlashAttention-2' / 'Using torch SDPA' settles what ran; at "
        "Alpaca lengths SDPA was as fast (bench/h200/measurements.md), so the gain shows only at long or packed "
        "sequences. `cfgopt doctor` reads the installed build on the node. Where the job's environment states a "
        "flash-attn the target cannot run (before Ampere, a CUDA build on ROCm), LF049 reports it instead."
    )
    fails_when = (
        "Absent package: never fails, the run uses SDPA and says so in a warning line. A wrong build: at model load."
    )
    evidence = (
        "llamafactory 0.9.5 model/model_utils/attention.py:76-83 (warning and return when not available)",
        "transformers 5.6.0 utils/import_utils.py:947-961 (`is_flash_attn_2_available`: distribution present, "
        "version >= 2.3.3, a CUDA-or-ROCm torch device; no import)",
        "https://github.com/Dao-AILab/flash-attention/pull/2343 (ROCm: Triton backend chosen automatically when the "
        "C++ extension is missing), https://github.com/Dao-AILab/flash-attention/issues/1538 (the variable needed "
        "at run time before it)",
        "docs/evidence/rocm_perf.md §1.1-1.3, R02, R03 (ROCm builds, FLASH_ATTENTION_TRITON_AMD_ENABLE)",
        "LLaMA-Factory issues #7979, #8793",
    )
    example = "flash_attn: fa2   # check the log for 'Using FlashAttention-2', or use sdpa"
    fix_safety = "No fix: whether the image has flash-attn, and which build, is not visible from the config."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "flash_attn")
        if entry is None or entry.node.value != "fa2":
            return
        if ctx.job.fa2_outcome.stops:
            return  # the job's flash-attn cannot run on the target: LF049's error says it
        target = ctx.settings.target
        if target.is_rocm:
            extra = (
                f"; on {target.name} a CUDA wheel or a CK build for another architecture is still selected and fails "
                "at model load: it needs a ROCm build (CK for "
                f"{'gfx942' if target.arch == 'cdna3' else 'gfx90a' if target.arch == 'cdna2' else 'this GPU'}), or "
                "the Triton build with FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE"
            )
        else:
            extra = ""
        yield self.at_entry(
            ctx,
            entry,
            "`flash_attn: fa2` falls back to SDPA with only a warning when the flash-attn package is absent" + extra,
            on="value",
        )
