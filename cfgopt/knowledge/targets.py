"""The hardware a config is judged for: the table of targets users train on, and custom targets.

The target is resolved once per run (`cfgopt.environment.gpus.resolve_target`), in this order: `--target` > the
project config's `target` (a name, or a custom table) > the GPUs of the machine cfgopt runs on, read from the
operating system (`cfgopt.environment.gpus`, without importing torch) > none. `--target none` (or `target = "none"`)
turns detection off. Whatever was chosen, the run says which and where it came from (`cfgopt.job.job.judged_for`).

Figures are per GPU (per GCD for MI250X) from the vendors' data sheets; docs/targets.md cites each one.
"""

from __future__ import annotations

from cfgopt.text.document import shown
from cfgopt.text.record import Record
from cfgopt.text.user_text import is_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The most GPUs a run is judged for (`--gpus`, a project config's `gpus`, a launcher's count): the memory model
# counts up to it, and every command refuses more alike (a launcher stating more is read as not stated).
MAX_GPUS = 2**20


class Target(Record):
    name: str
    platform: str  # "rocm", "cuda" or "cpu" ("unknown": no target stated)
    device: str
    memory_gib: float  # per GPU (per GCD for MI250X)
    # Native bf16 arithmetic (NVIDIA compute capability >= 8.0, every AMD Instinct since MI200). V100 and T4 have
    # none: torch >= 2.3 emulates it (LF008 says what that costs).
    bf16: bool
    # Dense tensor rate, per GPU, in the 16-bit format the GPU trains in: bf16, or fp16 where it has no bf16.
    peak_bf16_tflops: float
    arch: str = ""  # "cdna2", "cdna3", "cdna4", "volta", "turing", "ampere", "ada", "hopper", "blackwell"
    fp8: bool = False  # FP8 tensor/matrix cores (Ada, Hopper, Blackwell; CDNA3/4: not CDNA2)
    tf32: bool = False  # TF32 matrix math in hardware (NVIDIA Ampere+; CDNA3 (XF32), where torch does not use it)
    # Ships as 8 GPUs in one fully connected xGMI mesh (MI300X, MI325X, MI355X platforms): a collective among 2 or
    # 4 of them uses only their share of the links (PF052). MI250X nodes are not fully connected (4 cards, 8 GCDs,
    # uneven links) and MI210 / MI300A nodes hold 4 devices or fewer.
    xgmi_mesh: bool = False

    @property
    def stated(self) -> bool:
        return self.platform != "unknown"

    @property
    def is_rocm(self) -> bool:
        return self.platform == "rocm"

    @property
    def is_cuda(self) -> bool:
        return self.platform == "cuda"

    @property
    def runs_fa2(self) -> bool:
        """Can FlashAttention-2's kernels run here? NVIDIA: compute capability 8.0 or newer, the line native bf16
        draws too (flash-attn's `mha_fwd`: `TORCH_CHECK(is_sm90 || is_sm8x, "FlashAttention only supports Ampere
        GPUs or newer.")`), so not V100 / T4; AMD Instinct: with AMD's build (ENV001 judges the one installed);
        no target (it may be either) or a CPU: no."""
        return self.is_rocm or (self.is_cuda and self.bf16)

    @property
    def runs_triton(self) -> bool:
        """Does Triton (Liger's kernels) support this GPU? Its README: "NVIDIA GPUs (Compute Capability 8.0+)",
        "AMD GPUs (ROCm 6.2+)" (triton-lang/triton README.md, Compatibility); not V100 / T4, nor an unstated GPU."""
        return self.is_rocm or (self.is_cuda and self.bf16)

    @property
    def vendor(self) -> str:
        return {"rocm": "amd", "cuda": "nvidia"}.get(self.platform, self.platform)


def _nvidia(name: str, device: str, gib: float, tflops: float, arch: str) -> Target:
    modern = arch not in ("volta", "turing")
    return Target(name, "cuda", device, gib, modern, tflops, arch, arch in ("ada", "hopper", "blackwell"), modern)


def _amd(name: str, device: str, gib: float, tflops: float, arch: str, *, mesh: bool = False) -> Target:
    # TF32 (XF32) matrix instructions exist on CDNA3 (gfx942) only: CDNA2 has none and CDNA4 (gfx950) dropped them
    return Target(name, "rocm", device, gib, True, tflops, arch, arch != "cdna2", arch == "cdna3", mesh)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _amd("mi300x", "AMD Instinct MI300X", 192, 1307.4, "cdna3", mesh=True),
        _amd("mi325x", "AMD Instinct MI325X", 256, 1307.4, "cdna3", mesh=True),
        _amd("mi300a", "AMD Instinct MI300A", 128, 980.6, "cdna3"),
        _amd("mi355x", "AMD Instinct MI355X", 288, 2500.0, "cdna4", mesh=True),
        _amd("mi250x", "AMD Instinct MI250X (one GCD)", 64, 191.5, "cdna2"),
        _amd("mi210", "AMD Instinct MI210", 64, 181.0, "cdna2"),
        _nvidia("b200", "NVIDIA B200", 180, 2250.0, "blackwell"),
        _nvidia("h200", "NVIDIA H200", 141, 989.4, "hopper"),
        _nvidia("h100", "NVIDIA H100 SXM", 80, 989.4, "hopper"),
        _nvidia("h100-pcie", "NVIDIA H100 PCIe", 80, 756.0, "hopper"),
        _nvidia("h800", "NVIDIA H800 SXM", 80, 989.4, "hopper"),
        _nvidia("h20", "NVIDIA H20", 96, 148.0, "hopper"),
        _nvidia("a100", "NVIDIA A100 80GB", 80, 312.0, "ampere"),
        _nvidia("a100-40gb", "NVIDIA A100 40GB", 40, 312.0, "ampere"),
        _nvidia("a800", "NVIDIA A800 80GB", 80, 312.0, "ampere"),
        _nvidia("l40s", "NVIDIA L40S", 48, 362.05, "ada"),
        _nvidia("l4", "NVIDIA L4", 24, 121.0, "ada"),
        _nvidia("a10", "NVIDIA A10", 24, 125.0, "ampere"),
        _nvidia("a10g", "NVIDIA A10G", 24, 125.0, "ampere"),
        _nvidia("rtx4090", "NVIDIA GeForce RTX 4090", 24, 165.2, "ada"),
        _nvidia("rtx3090", "NVIDIA GeForce RTX 3090", 24, 71.0, "ampere"),
        _nvidia("v100", "NVIDIA V100 32GB", 32, 125.0, "volta"),
        _nvidia("v100-16gb", "NVIDIA V100 16GB", 16, 125.0, "volta"),
        _nvidia("t4", "NVIDIA T4", 16, 65.0, "turing"),
        Target("cpu", "cpu", "CPU only", 0, False, 0.0),
    )
}

# No target: a config written for 80 GB NVIDIA GPUs judged as if for a 192 GiB MI300X gets advice about the
# wrong machine (ROCm communication dtype, memory headroom). So with no target, hardware-specific rules stay
# quiet: no platform (neither ROCm nor CUDA), no memory size; bf16 is taken as supported so nothing fails on it.
UNSTATED = Target("unstated", "unknown", "an unstated GPU", 0, True, 0.0)
NONE = "none"  # `--target none`: no target, and no detection

# Rules that say nothing without a target (they need its platform, memory or precision support): the summary
# line counts the selected ones as skipped. tests/knowledge/test_targets.py holds each to silence with no target.
HARDWARE_CHECKS: frozenset[str] = frozenset(
    {
        "LF007",
        "LF008",
        "LF049",
        "DS023",
        "MEM001",
        "MEM002",
        "MEM003",
        "MEM004",
        "MEM005",
        "PF001",
        "PF007",
        "PF009",
        "PF011",
        "PF012",
        "PF013",
        "PF052",
        "ENV001",
        "ENV003",
    }
)

VENDORS = {"nvidia": "cuda", "amd": "rocm", "cpu": "cpu"}
CUSTOM_KEYS = {
    "name": "a name",
    "memory-gib": "GiB per GPU, a number > 0",
    "bf16": "true or false (native bf16)",
    "vendor": "nvidia, amd or cpu",
    "fp8": "true or false (default false)",
    "tf32": "true or false (default: as bf16 on nvidia, false elsewhere)",
    "peak-bf16-tflops": "dense 16-bit tensor TFLOP/s (default 0: unknown)",
}


class TargetError(ValueError):
    """A target that cannot be used (unknown name, bad custom table): exit code 2."""


def custom_target(table: dict[str, Any], where: str) -> Target:
    """A target from a project config's table: `{ name = "my-gpu", memory-gib = 48, bf16 = true,
    vendor = "nvidia" }` (fp8, tf32 and peak-bf16-tflops optional)."""
    unknown = sorted(set(table) - set(CUSTOM_KEYS))
    if unknown:
        keys = ", ".join(CUSTOM_KEYS)
        raise TargetError(f"{where}: unknown key(s) {', '.join(unknown)} in a custom target; keys: {keys}")
    missing = [k for k in ("name", "memory-gib", "bf16", "vendor") if k not in table]
    if missing:
        what = "; ".join(f"{k}: {CUSTOM_KEYS[k]}" for k in missing)
        raise TargetError(f"{where}: a custom target needs {', '.join(missing)} ({what})")
    name, memory, vendor = table["name"], table["memory-gib"], table["vendor"]
    if not isinstance(name, str) or not name.strip() or name == NONE:
        raise TargetError(f"{where}: name: expected a name, got {name!r}")
    if not is_number(memory) or not 0 < memory < 1e6:
        raise TargetError(f"{where}: memory-gib: expected {CUSTOM_KEYS['memory-gib']}, got {memory!r}")
    if vendor not in VENDORS:
        raise TargetError(f"{where}: vendor: expected {CUSTOM_KEYS['vendor']}, got {vendor!r}")
    flags = {}
    for key in ("bf16", "fp8", "tf32"):
        value = table.get(key, table["bf16"] and vendor == "nvidia" if key == "tf32" else False)
        if not isinstance(value, bool):
            raise TargetError(f"{where}: {key}: expected true or false, got {value!r}")
        flags[key] = value
    peak = table.get("peak-bf16-tflops", 0.0)
    if not is_number(peak) or not 0 <= peak < 1e7:
        raise TargetError(f"{where}: peak-bf16-tflops: expected a number >= 0, got {peak!r}")
    platform = VENDORS[vendor]
    gib = 0.0 if platform == "cpu" else float(memory)
    name = shown(name.strip())  # a user's string, printed in every summary and message: escaped once, here
    return Target(
        name,
        platform,
        f"{name} (custom)",
        gib,
        flags["bf16"],
        float(peak),
        "custom",
        flags["fp8"],
        flags["tf32"],
    )


def check_name(value: Any, where: str) -> None:
    """A target name as a project config or `--config` gives it: a known target or `none`."""
    if isinstance(value, str) and (value in TARGETS or value == NONE):
        return
    from cfgopt.text.suggest import closest

    hint = closest(str(value), [*TARGETS, NONE]) if isinstance(value, str) else None
    raise TargetError(
        f"{where}: {value!r} is not a target; one of {', '.join(TARGETS)}, none, or a custom table "
        '{ name = "my-gpu", memory-gib = 48, bf16 = true, vendor = "nvidia" }'
        + (f" (did you mean {hint!r}?)" if hint else "")
    )


# Reported names -> targets, most specific first (`torch.cuda.get_device_name()`, nvidia-smi, /proc).
_DEVICE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bMI355X?\b", "mi355x"),
    (r"\bMI325X\b", "mi325x"),
    (r"\bMI300A\b", "mi300a"),
    (r"\bMI300X?\b", "mi300x"),
    (r"\bMI250X?\b", "mi250x"),
    (r"\bMI210\b", "mi210"),
    (r"\bB200\b", "b200"),
    (r"\bH200\b", "h200"),
    (r"\bH800\b", "h800"),
    (r"\bH20\b", "h20"),
    (r"\bH100\b.*\bPCIE\b", "h100-pcie"),
    (r"\bH100\b", "h100"),
    (r"\bA800\b", "a800"),
    (r"\bA100\b.*\b40GB\b", "a100-40gb"),
    (r"\bA100\b", "a100"),
    (r"\bA10G\b", "a10g"),
    (r"\bA10\b", "a10"),
    (r"\bL40S\b", "l40s"),
    (r"\bL4\b", "l4"),
    (r"\bRTX 4090\b", "rtx4090"),
    (r"\bRTX 3090\b", "rtx3090"),
    (r"\bV100S?\b.*\b16GB\b", "v100-16gb"),
    (r"\bV100S?\b", "v100"),
    (r"\bT4\b", "t4"),
)


def target_for_device(device_name: str) -> Target | None:
    """The target an accelerator is, from the name it reports (`torch.cuda.get_device_name()`, e.g.
    "NVIDIA H200", "AMD Instinct MI300X", "Tesla V100-SXM2-16GB"); None for a device cfgopt has no target for."""
    import re

    reported = re.sub(r"[-_/]", " ", device_name.upper())
    return next((TARGETS[name] for pattern, name in _DEVICE_PATTERNS if re.search(pattern, reported)), None)
