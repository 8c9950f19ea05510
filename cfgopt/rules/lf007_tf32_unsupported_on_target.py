from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group
from cfgopt.text.diagnostics import Diagnostic, Severity


class Tf32UnsupportedOnTarget(Rule):
    code = "LF007"
    name = "tf32-unsupported-on-target"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"tf32"})
    summary = "`tf32: true` on a ROCm, CPU or pre-Ampere (V100, T4) target: TrainingArguments refuses it"
    why = (
        "Confidence: certain. HF `TrainingArguments.__post_init__` raises when `tf32` is true and "
        "`is_torch_tf32_available()` is false, and that function returns false whenever `torch.version.cuda` is "
        "None, and checks NVIDIA's compute capability otherwise. So it is refused on every ROCm build for a "
        "software reason, not a hardware one: CDNA3 GPUs (MI300X, MI325X, MI300A) do have TF32 (XF32) matrix "
        "math, CDNA2 (MI250X, MI210) has none and CDNA4 (MI355X) dropped it, and transformers refuses all of them "
        "because ROCm torch sets `torch.version.hip`, not `torch.version.cuda`. It is also refused without a CUDA "
        "GPU and on NVIDIA GPUs below compute capability 8.0 (V100, T4), which have no TF32. On GPUs with TF32 "
        "it only affects fp32 matmuls, so it is a no-op for bf16 work. Judged for the target (quiet when there is "
        "none)."
    )
    fails_when = "At start-up: `ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7`."
    evidence = (
        "transformers 5.6.0 training_args.py L1641-1646 (`raise ValueError('--tf32 requires Ampere ...')`)",
        "transformers 5.6.0 utils/import_utils.py L583-599 (`is_torch_tf32_available`: False when "
        "`torch.version.cuda is None` or the device's major capability is below 8)",
        "docs/evidence/rocm_perf.md §2.2 and R01 (certain). No ROCm failure report was found: the ROCm verdict "
        "rests on the code above (LLaMA-Factory issue #3718, cited before, is a CUDA report)",
        "AMD MI300X data sheet (TF32 matrix throughput; "
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html); LLVM AMDGPU `FeatureXF32Insts` "
        "(the XF32 MFMA instructions: gfx942 only, not gfx90a nor gfx950)",
    )
    example = "tf32: true   ->  (removed)   # --target mi300x"
    fix_safety = (
        "Unsafe: removes the key. It is what the target needs, but it depends on `--target` being the hardware "
        "the job really runs on (with no target stated the rule is quiet)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if (target.is_cuda and target.tf32) or not target.stated or not is_train_group(ctx):
            return
        entry = entry_of(ctx, "tf32")
        if entry is None or not entry.node.value:
            return
        if target.is_cuda:
            where = f"{target.device}: no TF32, compute capability below 8.0"
        else:
            where = "a host without a CUDA GPU"
            arch = f" ({target.arch.upper()})" if target.arch not in ("", "custom") else ""
            if target.is_rocm and target.tf32:
                where = f"it has TF32 hardware{arch}, but ROCm torch has no torch.version.cuda"
            elif target.is_rocm:
                where = f"no TF32 hardware{arch}, and ROCm torch has no torch.version.cuda"
        yield self.at_entry(
            ctx,
            entry,
            f"`tf32: true` on {target.name} ({where}): TrainingArguments stops at start-up with "
            "`--tf32 requires Ampere or a newer GPU arch`",
            fix=self.fix("Remove `tf32`", edits.delete_entry(ctx.source, entry), safe=False),
        )
