"""Launcher environment variables that slow a ROCm (or any) training run, judged the same way where a launch
script sets them (ENV010) and where `cfgopt doctor` finds them set."""

from __future__ import annotations

from cfgopt.diagnostics import Severity
from cfgopt.targets import Target

JUDGED = frozenset(
    {
        "TORCH_BLAS_PREFER_HIPBLASLT",
        "PYTORCH_TUNABLEOP_ENABLED",
        "PYTORCH_NO_HIP_MEMORY_CACHING",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "HSA_DISABLE_FRAGMENT_ALLOCATOR",
    }
)
EVIDENCE = (
    "PyTorch aten/src/ATen/Context.h (hipBLASLt the preferred BLAS on gfx90a / gfx942, gfx950 from ROCm 6.5, "
    "`TORCH_BLAS_PREFER_HIPBLASLT` overrides it): https://github.com/ROCm/pytorch/pull/2053, "
    "https://github.com/pytorch/pytorch/pull/122106",
    "https://docs.pytorch.org/docs/stable/cuda.tunable.html (TunableOp: `PYTORCH_TUNABLEOP_TUNING` defaults to 1, "
    "every new GEMM shape is tuned during the run; record once, then replay with tuning off)",
    "https://docs.pytorch.org/docs/stable/notes/cuda.html#memory-management (`PYTORCH_NO_CUDA_MEMORY_CACHING=1`: "
    "caching off, for debugging; on ROCm also spelled `PYTORCH_NO_HIP_MEMORY_CACHING`)",
    "ROCr runtime environment variables (`HSA_DISABLE_FRAGMENT_ALLOCATOR`, a debugging switch): "
    "https://rocm.docs.amd.com/projects/ROCR-Runtime/en/latest/",
)
_OFF = ("0", "false", "off", "no", "n")
_ON = ("1", "true", "on", "yes", "y")


def judge_variable(
    name: str, value: str | None, target: Target | None, tuning: str | None = None
) -> tuple[Severity, str] | None:
    """(severity, why) for a variable set to `value` (None: not a literal) for a job on `target` (None: not
    known); `tuning` is `PYTORCH_TUNABLEOP_TUNING` where the same place sets it. None: nothing to say."""
    if value is None:
        return None
    value = value.strip().lower()
    rocm = target is None or target.is_rocm
    if name == "TORCH_BLAS_PREFER_HIPBLASLT" and value in _OFF and rocm:
        if target is not None and target.arch not in ("cdna2", "cdna3", "cdna4"):
            return None
        return (
            Severity.WARNING,
            "forces rocBLAS for every GEMM where PyTorch prefers hipBLASLt on MI200/MI300 (gfx90a/gfx942); a "
            "debugging switch that usually costs speed: remove it unless a measured run shows a gain",
        )
    if name == "PYTORCH_TUNABLEOP_ENABLED" and value in _ON and (tuning is None or tuning.strip() not in _OFF):
        return (
            Severity.INFO,
            "TunableOp with tuning on (PYTORCH_TUNABLEOP_TUNING defaults to 1) tunes each new GEMM shape during "
            "training: the first steps are slow and a short run may spend most of its time tuning; tune once, "
            "then replay the results with PYTORCH_TUNABLEOP_TUNING=0",
        )
    hip_only = name == "PYTORCH_NO_HIP_MEMORY_CACHING"
    if (
        name in ("PYTORCH_NO_HIP_MEMORY_CACHING", "PYTORCH_NO_CUDA_MEMORY_CACHING")
        and value in _ON
        and (rocm or not hip_only)
    ):
        return (
            Severity.WARNING,
            "turns PyTorch's caching allocator off (a debugging switch): every tensor allocation goes to the "
            "driver, which slows training many times over; remove it for a performance run",
        )
    if name == "HSA_DISABLE_FRAGMENT_ALLOCATOR" and value in _ON and rocm:
        return (
            Severity.WARNING,
            "turns the ROCm runtime's fragment allocator off (a debugging switch): small allocations go to the "
            "driver; remove it for a performance run",
        )
    return None
