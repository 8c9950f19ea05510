"""The hardware a config is judged for. Rules read the target, never the machine cfgopt runs on:
a laptop or a CI runner says nothing about the cluster the job will run on."""

from __future__ import annotations

from typing import NamedTuple


class Target(NamedTuple):
    name: str
    platform: str  # "rocm", "cuda" or "cpu"
    device: str
    memory_gib: float  # per GPU (per GCD for MI250X)
    bf16: bool
    peak_bf16_tflops: float  # dense, per GPU, vendor spec sheet

    @property
    def stated(self) -> bool:
        return self.platform != "unknown"

    @property
    def is_rocm(self) -> bool:
        return self.platform == "rocm"

    @property
    def is_cuda(self) -> bool:
        return self.platform == "cuda"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("mi300x", "rocm", "AMD Instinct MI300X", 192, True, 1307.4),
        Target("mi325x", "rocm", "AMD Instinct MI325X", 256, True, 1307.4),
        Target("mi250x", "rocm", "AMD Instinct MI250X (one GCD)", 64, True, 191.5),
        Target("h100", "cuda", "NVIDIA H100 SXM", 80, True, 989.4),
        Target("h200", "cuda", "NVIDIA H200", 141, True, 989.4),
        Target("a100", "cuda", "NVIDIA A100 80GB", 80, True, 312.0),
        Target("cpu", "cpu", "CPU only", 0, False, 0.0),
    )
}

# No stated target: a linter cannot know the cluster, and a config written for 80 GB NVIDIA GPUs judged as if
# for a 192 GiB MI300X gets advice about the wrong machine (ROCm communication dtype, memory headroom). So
# without `--target` / `target =`, hardware-specific rules stay quiet: no platform (neither ROCm nor CUDA),
# no memory size; bf16 is taken as supported (every GPU the targets list has it) so nothing fails on it.
UNSTATED = Target("unstated", "unknown", "an unstated GPU", 0, True, 0.0)
DEFAULT_TARGET: str | None = None
# `cfgopt estimate` needs a memory size to compare with: it says which one it assumed.
ESTIMATE_TARGET = "mi300x"


def target_for_device(device_name: str) -> Target | None:
    """The target an accelerator is, from the name it reports (`torch.cuda.get_device_name()`, e.g.
    "NVIDIA H200", "AMD Instinct MI300X"); None for a device cfgopt has no target for."""
    reported = device_name.upper()
    return next((t for t in TARGETS.values() if t.platform != "cpu" and t.name.upper() in reported), None)
