from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, fa2_written, report
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Fa2CannotRun(Rule):
    code = "LF049"
    name = "fa2-cannot-run"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"flash_attn", "model_name_or_path"})  # `auto`, the default, runs fa2 on Gemma 2
    summary = (
        "`flash_attn: fa2` (or `auto` on Gemma 2) where the job's flash-attn cannot run: a GPU older than Ampere "
        "(V100, T4), or a CUDA build on ROCm"
    )
    why = (
        "Confidence: certain. LLaMA-Factory asks `is_flash_attn_2_available()`, which checks that the flash-attn "
        "package is installed (>= 2.3.3) and that torch sees a GPU (`torch.cuda.is_available()`, true on ROCm "
        "torch too), and imports nothing: where it is true `flash_attention_2` is requested whatever the build, "
        "and only an absent package falls back (to SDPA, with a warning). Two builds the target cannot run are "
        "judged from the job's environment (the speed plan ranks by the same answer, `Job.fa2_outcome`). Before "
        "Ampere: FlashAttention-2's CUDA kernels run on compute capability 8.0 and newer only, its forward checks "
        "the device on every call and raises `FlashAttention only supports Ampere GPUs or newer.` on a V100 (7.0) "
        "or T4 (7.5), and transformers checks the capability for FlashAttention-3 and -4 only; so the model loads "
        "and the first forward pass stops. A CUDA build on ROCm (a `+cu` wheel, ENV001): its extension "
        "`flash_attn_2_cuda` links CUDA's runtime and torch's CUDA libraries, which ROCm torch does not ship, so "
        "`import flash_attn` fails; transformers 4.56 and later import it when the model loads (4.55 at the first "
        "forward pass, where it asks on stdin whether to fetch a kernel from the Hub instead). flash-attn 2.7.1 "
        "and later skip that extension when FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE is set where the job runs "
        "(their Triton backend, shipped in every wheel): the message names that way out. An error where the "
        "environment has such a flash-attn; a warning before Ampere where it has none (LLaMA-Factory keeps SDPA, "
        "and the setting waits to fail on the day flash-attn is installed). Quiet with no target, on Ampere or "
        "newer, and on ROCm with AMD's build, a build that cannot be told (the default index builds for the torch "
        "present: ENV001 warns on the requirement) or a node's installed packages (`cfgopt doctor`, DOC001); PF003 "
        "speaks of the package there. `flash_attn: auto` (or unset) on Gemma 2 is fa2 where flash-attn is "
        "installed (LLaMA-Factory turns it so, model/model_utils/attention.py L46-53): the same error there; "
        "without flash-attn it runs eager, and nothing is said."
    )
    fails_when = (
        "Before Ampere with flash-attn installed: at the first forward pass, after tokenisation and model load, "
        "with `RuntimeError: FlashAttention only supports Ampere GPUs or newer.` Without it: never (SDPA runs). "
        "A CUDA build of flash-attn on ROCm: at model load, with an ImportError from `import flash_attn` "
        "(transformers 4.56 and later; 4.55: at the first forward pass)."
    )
    evidence = (
        "Dao-AILab/flash-attention csrc/flash_attn/flash_api.cpp (commit 00979f57) `mha_fwd` and `mha_varlen_fwd`: "
        '`TORCH_CHECK(is_sm90 || is_sm8x, "FlashAttention only supports Ampere GPUs or newer.")`',
        "Dao-AILab/flash-attention v2.7.4.post1 flash_attn/flash_attn_interface.py L11-15 (`import "
        "flash_attn_2_cuda` unless FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE; the variable since v2.7.1), setup.py "
        "L529-541 (every package, flash_attn_triton_amd included, in the wheel)",
        "transformers 5.6.0 modeling_flash_attention_utils.py L73-99 (FLASH_ATTENTION_COMPATIBILITY_MATRIX: a "
        "`cuda_min_major_version` for FlashAttention-3 (8) and -4 (9), none for -2), L153-157 (`from flash_attn "
        "import ...`), modeling_utils.py L1660, L1908-1915 (`lazy_import_flash_attention` when the model loads; "
        "transformers 4.56.2 modeling_utils.py L2810-2812 the same; 4.55.0 `_lazy_imports` at the first forward)",
        "transformers 5.6.0 utils/import_utils.py L947-961 (`is_flash_attn_2_available`: package and version, a "
        "CUDA device; no capability, no import)",
        "llamafactory 0.9.5 model/model_utils/attention.py L77-84 (fa2: a warning and SDPA when not available, "
        "else `flash_attention_2`)",
        "cfgopt doctor's DOC001 (cfgopt/doctor/checks.py): the same CUDA-build-on-ROCm-torch failure on the node",
    )
    example = "flash_attn: fa2   # --target v100  ->  flash_attn: sdpa"
    fix_safety = (
        "Unsafe: `sdpa` (eager attention, `disabled`, for Gemma 2, whose soft-capping SDPA drops) is what runs "
        "there without flash-attn; it depends on `--target` being the GPU the job really runs on and on the "
        "environment stated."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not (target.is_cuda or target.is_rocm):
            return
        written = fa2_written(ctx)  # `fa2`, or `auto` on Gemma 2, which LLaMA-Factory turns into fa2
        if written is None:
            return
        stops = ctx.job.fa2_outcome.stops
        if (target.is_rocm or written == "auto") and stops is None:
            return  # AMD's build, one that cannot be told, or none; `auto` without flash-attn runs eager
        if target.is_cuda and target.runs_fa2:
            return
        fallback = ctx.job.fa2_fallback
        env = ctx.job.environment
        if target.is_rocm:
            message = (
                f"{_subject(ctx, written)} on {target.name} with the CUDA build of flash-attn in {env.where}: "
                "transformers selects it (it checks only that the package is installed) and the model load stops "
                f"with an ImportError, as its CUDA extension does not load with ROCm torch; use {_use(fallback)}, or "
                "install AMD's build (ENV001); flash-attn 2.7.1 and later run their Triton "
                "backend instead where FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE is set"
            )
        else:
            message = self._before_ampere(ctx, stops is not None, fallback, written)
        entry = entry_of(ctx, "flash_attn")
        change = (
            edits.replace_value(ctx.source, entry, fallback)
            if entry is not None
            else edits.insert_top(ctx.source, "flash_attn", fallback)
        )
        yield report(
            self,
            ctx,
            ("flash_attn",),
            message,
            on="value",
            severity=Severity.ERROR if stops else Severity.WARNING,
            fix=self.fix(f"Use `{fallback}`", change, safe=False),
        )

    @staticmethod
    def _before_ampere(ctx: Context, installed: bool, fallback: str, written: str) -> str:
        target, env = ctx.settings.target, ctx.job.environment
        stops = "`FlashAttention only supports Ampere GPUs or newer.`"
        before = f"{_subject(ctx, written)} on {target.name} ({target.device}, older than Ampere)"
        if installed:
            return (
                f"{before} with flash-attn in {env.where}: the model loads with FlashAttention-2 and its first "
                f"forward pass stops with {stops}; use {_use(fallback)}"
            )
        kept = "SDPA" if fallback == "sdpa" else "eager attention"
        return (
            f"{before}: without flash-attn ({env.where} does not name it) LLaMA-Factory keeps {kept} with a "
            f"warning; once flash-attn is installed the first forward pass stops with {stops}; use {_use(fallback)}"
        )


def _subject(ctx: Context, written: str) -> str:
    """What the config asks for, in words: `flash_attn: fa2`, or `auto` (written or the default) on Gemma 2, which
    LLaMA-Factory turns into fa2 where flash-attn is installed (model/model_utils/attention.py L46-53)."""
    if written == "fa2":
        return "`flash_attn: fa2`"
    said = "`flash_attn: auto`" if entry_of(ctx, "flash_attn") is not None else "`flash_attn` left at `auto`"
    return f"{said} (LLaMA-Factory turns it into fa2 for Gemma 2 where flash-attn is installed)"


def _use(fallback: str) -> str:
    """The value to use instead, in words: eager attention keeps Gemma 2's soft-capping (`Job.fa2_fallback`)."""
    if fallback == "sdpa":
        return "`sdpa`"
    return f"`{fallback}` (eager attention, which keeps Gemma 2's soft-capping; SDPA drops it)"
