"""Launcher environment variables that slow a ROCm (or any) training run, judged the same way where a launch
script sets them (ENV010) and where `cfgopt doctor` finds them set."""

from __future__ import annotations

from collections.abc import Callable

from cfgopt.knowledge.targets import Target
from cfgopt.text.diagnostics import Severity
from cfgopt.text.record import Record
from cfgopt.text.user_text import integer


class DebugSwitch(Record):
    """A logging or debugging variable: on which platform it acts, which values turn it on, what it costs."""

    platform: str  # "rocm" (judged on a ROCm target or none stated), "cuda" (not on ROCm), "any"
    level: Callable[[str], Severity | None]  # the value (stripped, lower case) -> how much it costs (None: off)
    cost: str  # what it does to the run, for the message
    source: str  # the upstream document that says so
    confidence: str  # certain (the documentation says it slows) / likely (what it does implies it)


def _number_at_least(floor: int) -> Callable[[str], Severity | None]:
    def level(value: str) -> Severity | None:
        number = integer(value, strip=True)  # the runtimes read a decimal level (AMD_LOG_LEVEL=4)
        return Severity.WARNING if number is not None and number >= floor else None

    return level


def _one_of(*values: str, severity: Severity = Severity.WARNING) -> Callable[[str], Severity | None]:
    return lambda value: severity if value in values else None


def _nccl_debug(value: str) -> Severity | None:
    """INFO logs mostly the set-up (info); TRACE a line per call (a warning)."""
    return {"info": Severity.INFO, "trace": Severity.WARNING}.get(value)


_HIP_DEBUGGING = "https://rocm.docs.amd.com/projects/HIP/en/latest/reference/env_variables.html (debug variables)"
# The logging and debugging switches of ROCm, CUDA, NCCL/RCCL and torch.distributed that cost training speed.
# Not listed, because they cost nothing until something fails: TORCH_SHOW_CPP_STACKTRACES (a C++ stack on an
# error), TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_DUMP_ON_TIMEOUT; NCCL_DEBUG=WARN / VERSION.
DEBUG_SWITCHES: dict[str, DebugSwitch] = {
    "ROCBLAS_LAYER": DebugSwitch(
        "rocm",
        _number_at_least(1),
        "rocBLAS logging: trace (1) and bench (2) write a line for every rocBLAS call, profile (4) records each "
        "call; rocBLAS's documentation warns that performance degrades while logging is on",
        "https://rocm.docs.amd.com/projects/rocBLAS/en/latest/reference/logging.html",
        "certain",
    ),
    "AMD_LOG_LEVEL": DebugSwitch(
        "rocm",
        _number_at_least(3),
        "HIP runtime logging at info (3) or debug (4): API calls, kernel and copy commands are logged as they "
        "happen (levels 1-2, errors and warnings, cost nothing)",
        "https://rocm.docs.amd.com/projects/HIP/en/docs-5.7.1/developer_guide/logging.html (AMD_LOG_LEVEL, "
        "AMD_LOG_MASK)",
        "likely",
    ),
    "HIP_LAUNCH_BLOCKING": DebugSwitch(
        "rocm",
        _one_of("1", "true", "yes", "on"),
        "every kernel launch waits for the kernel to finish (no overlap of host and GPU work), a debugging switch",
        _HIP_DEBUGGING,
        "certain",
    ),
    "AMD_SERIALIZE_KERNEL": DebugSwitch(
        "rocm",
        _one_of("1", "2", "3"),
        "the HIP runtime waits for kernels before and/or after each launch (serialized execution), a debugging switch",
        _HIP_DEBUGGING,
        "certain",
    ),
    "AMD_SERIALIZE_COPY": DebugSwitch(
        "rocm",
        _one_of("1", "2", "3"),
        "the HIP runtime waits for copies before and/or after each one (serialized transfers), a debugging switch",
        _HIP_DEBUGGING,
        "certain",
    ),
    "CUDA_LAUNCH_BLOCKING": DebugSwitch(
        "cuda",
        _one_of("1", "true", "yes", "on"),
        "every CUDA kernel launch is synchronous (CUDA's programming guide: for debugging only); with NCCL it "
        "can also hang collectives",
        "https://docs.nvidia.com/cuda/cuda-c-programming-guide/ (asynchronous concurrent execution), "
        "https://discuss.pytorch.org/t/cuda-launch-blocking-1-reduces-the-training-speed/160924, "
        "https://github.com/NVIDIA/nccl/issues/750",
        "certain",
    ),
    "NCCL_DEBUG": DebugSwitch(
        "any",
        _nccl_debug,
        "NCCL/RCCL logging on every rank: INFO writes the set-up of each communicator (many lines per rank at "
        "scale, mostly at start), TRACE a replayable line for every call; WARN is the production level",
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/logging.html",
        "likely",
    ),
    "TORCH_NCCL_BLOCKING_WAIT": DebugSwitch(
        "any",
        _one_of("1", "true", "yes", "on"),
        "`wait()` on every collective blocks the host until it completes (the default is non-blocking: the host "
        "runs ahead while NCCL/RCCL works), a timeout-debugging switch",
        "https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html",
        "likely",
    ),
    "NCCL_BLOCKING_WAIT": DebugSwitch(  # the pre-2.2 spelling of TORCH_NCCL_BLOCKING_WAIT, still read
        "any",
        _one_of("1", "true", "yes", "on"),
        "`wait()` on every collective blocks the host until it completes (the old spelling of "
        "TORCH_NCCL_BLOCKING_WAIT), a timeout-debugging switch",
        "https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html",
        "likely",
    ),
    "TORCH_DISTRIBUTED_DEBUG": DebugSwitch(
        "any",
        _one_of("detail"),
        "DETAIL wraps every process group to check each collective's consistency across ranks (extra "
        "communication per collective), a debugging level",
        "https://docs.pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications",
        "likely",
    ),
}

JUDGED = frozenset(
    {
        "TORCH_BLAS_PREFER_HIPBLASLT",
        "PYTORCH_TUNABLEOP_ENABLED",
        "PYTORCH_NO_HIP_MEMORY_CACHING",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "HSA_DISABLE_FRAGMENT_ALLOCATOR",
    }
    | set(DEBUG_SWITCHES)
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
    *sorted({f"{name}: {switch.source} ({switch.confidence})" for name, switch in DEBUG_SWITCHES.items()}),
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
    return _debug_switch(name, value, target)


def _debug_switch(name: str, value: str, target: Target | None) -> tuple[Severity, str] | None:
    switch = DEBUG_SWITCHES.get(name)
    severity = switch.level(value) if switch is not None else None
    if switch is None or severity is None:
        return None
    if switch.platform == "rocm" and target is not None and not target.is_rocm:
        return None  # a ROCm runtime variable does nothing on NVIDIA
    if switch.platform == "cuda" and target is not None and target.is_rocm:
        return None  # the HIP runtime reads HIP_LAUNCH_BLOCKING
    return severity, f"{switch.cost}; remove it for a performance run"
