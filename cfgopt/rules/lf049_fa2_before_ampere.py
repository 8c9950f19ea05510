from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Fa2BeforeAmpere(Rule):
    code = "LF049"
    name = "fa2-before-ampere"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"flash_attn"})
    summary = "`flash_attn: fa2` on a GPU older than Ampere (V100, T4): flash-attn's kernels refuse it"
    why = (
        "Confidence: certain. FlashAttention-2's CUDA kernels run on compute capability 8.0 and newer only: its "
        "forward checks the device on every call and raises `FlashAttention only supports Ampere GPUs or newer.` "
        "on a V100 (7.0) or T4 (7.5). Nothing before that call looks at the GPU: LLaMA-Factory asks "
        "`is_flash_attn_2_available()`, which checks that the package is installed (>= 2.3.3) and that torch sees "
        "a CUDA device, and transformers checks the compute capability for FlashAttention-3 and -4 only. So where "
        "the job's environment has flash-attn the model loads and the first forward pass stops (an error); where "
        "it does not, LLaMA-Factory logs 'FlashAttention-2 is not installed.' and keeps SDPA, and the setting "
        "only waits to fail on the day flash-attn is installed (a warning). Judged for the target (quiet with "
        "none, and on Ampere or newer, where PF003 speaks of the package)."
    )
    fails_when = (
        "With flash-attn installed: at the first forward pass, after tokenisation and model load, with "
        "`RuntimeError: FlashAttention only supports Ampere GPUs or newer.` Without it: never (SDPA runs)."
    )
    evidence = (
        "Dao-AILab/flash-attention csrc/flash_attn/flash_api.cpp (commit 00979f57) `mha_fwd` and `mha_varlen_fwd`: "
        '`TORCH_CHECK(is_sm90 || is_sm8x, "FlashAttention only supports Ampere GPUs or newer.")`',
        "transformers 5.6.0 modeling_flash_attention_utils.py L73-99 (FLASH_ATTENTION_COMPATIBILITY_MATRIX: a "
        "`cuda_min_major_version` for FlashAttention-3 (8) and -4 (9), none for -2), modeling_utils.py L1660",
        "transformers 5.6.0 utils/import_utils.py L947-961 (`is_flash_attn_2_available`: package and version, a "
        "CUDA device; no capability)",
        "llamafactory 0.9.5 model/model_utils/attention.py L77-84 (fa2: a warning and SDPA when not available, "
        "else `flash_attention_2`)",
    )
    example = "flash_attn: fa2   # --target v100  ->  flash_attn: sdpa"
    fix_safety = (
        "Unsafe: `sdpa` is what runs there anyway while flash-attn is absent, and runs once it is installed; it "
        "depends on `--target` being the GPU the job really runs on."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not target.is_cuda or target.runs_fa2:
            return
        entry = entry_of(ctx, "flash_attn")
        if entry is None or entry.node.value != "fa2":
            return
        env = ctx.job.environment
        installed = ctx.job.has_package("flash_attn")
        stops = "`FlashAttention only supports Ampere GPUs or newer.`"
        before = f"`flash_attn: fa2` on {target.name} ({target.device}, older than Ampere)"
        if installed:
            message = (
                f"{before} with flash-attn in {env.where}: the model loads with FlashAttention-2 and its first "
                f"forward pass stops with {stops}; use `sdpa`"
            )
        else:
            message = (
                f"{before}: without flash-attn ({env.where} does not name it) LLaMA-Factory keeps SDPA with a "
                f"warning; once flash-attn is installed the first forward pass stops with {stops}; use `sdpa`"
            )
        yield self.at_entry(
            ctx,
            entry,
            message,
            on="value",
            severity=Severity.ERROR if installed else Severity.WARNING,
            fix=self.fix("Use `sdpa`", edits.replace_value(ctx.source, entry, "sdpa"), safe=False),
        )
