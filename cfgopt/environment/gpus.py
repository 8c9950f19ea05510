"""The target a run is judged for (`resolve_target`: `--target` > project config > the GPUs of this machine >
none), and those GPUs, read from the operating system without importing torch (a few file reads: `cfgopt lint`
start-up stays small).

- AMD: the KFD topology, `/sys/class/kfd/kfd/topology/nodes/*/properties` (`vendor_id 4098`, `device_id`,
  `gfx_target_version`; a CPU node has `simd_count 0`), else the DRM devices
  `/sys/class/drm/card*/device/{vendor,device}` with vendor 0x1002. MI250X shows one node per GCD, as its
  target counts.
- NVIDIA: `/proc/driver/nvidia/gpus/*/information` ("Model: NVIDIA H200"), one folder per GPU.

`CUDA_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` / `ROCR_VISIBLE_DEVICES`, when set, limit the count as they limit
the training job. `CFGOPT_SYSFS_ROOT` (tests only) reads a fake tree instead of `/`. Nothing found (a laptop, a
CI runner): None, and the run states that it has no target.
"""

from __future__ import annotations

import os

from cfgopt.knowledge.targets import NONE, TARGETS, Target, custom_target, target_for_device
from cfgopt.text.record import Record
from cfgopt.text.user_files import read_head
from cfgopt.text.user_text import integer, is_integer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ROOT_VARIABLE = "CFGOPT_SYSFS_ROOT"
AMD_VENDOR = 0x1002
# PCI device ids of AMD Instinct parts (amdgpu's pciidlist; a VF is the same part under SR-IOV).
AMD_DEVICES: dict[int, str] = {
    0x740C: "mi250x",  # MI250X / MI250, one id per GCD
    0x740F: "mi210",
    0x74A0: "mi300a",
    0x74A1: "mi300x",
    0x74B5: "mi300x",  # MI300X VF
    0x74A5: "mi325x",
    0x74B9: "mi325x",  # MI325X VF
    0x75A3: "mi355x",
}


class Detected(Record):
    """What the machine has: the target (None: a GPU cfgopt has no target for), how many, and its name."""

    target: Target | None
    count: int
    model: str


_CACHE: dict[str, Detected | None] = {}


class Resolved(Record):
    """The target a run is judged for, where it came from, and the GPU count (None: not stated)."""

    target: Target | None  # None: no target (UNSTATED)
    source: str  # "--target", "pyproject.toml", "cfgopt.toml", "--config target", "detected", "" (none)
    gpus: int | None
    gpus_source: str
    detected: str = ""  # what detection found when it gave no target ("2 x NVIDIA RTX A6000"), for the summary


def resolve_target(
    stated: str | dict[str, Any] | None,
    source: str,
    gpus: int | None,
    gpus_source: str,
    root: str | None = None,
) -> Resolved:
    """The one resolution of a run's target, for `lint`, `fix` and `estimate` (and what `verify` / `tune` should
    ask): `stated` is the highest layer that names one (a `--target` name, a project config's name or custom
    table) with `source` naming that layer; None falls back to the GPUs of this machine (`cfgopt.environment.gpus`,
    under `root` in tests), whose count fills `gpus` when no layer states it."""
    if isinstance(stated, dict):
        return Resolved(custom_target(stated, source), source, gpus, gpus_source)
    if stated == NONE:
        return Resolved(None, source, gpus, gpus_source)
    if stated is not None:
        return Resolved(TARGETS[stated], source, gpus, gpus_source)
    found = detect_gpus(root)
    if found is None:
        return Resolved(None, "", gpus, gpus_source)
    if found.target is None:
        return Resolved(None, "", gpus, gpus_source, f"{found.count} x {found.model}")
    if gpus is None:
        return Resolved(found.target, "detected", found.count, "detected")
    return Resolved(found.target, "detected", gpus, gpus_source)


def detect_gpus(root: str | None = None) -> Detected | None:
    """The GPUs of this machine (the most common model when they differ), or None when it has none that a
    training job could see. Read once per process."""
    base = root if root is not None else os.environ.get(ROOT_VARIABLE, "/")
    if base not in _CACHE:
        _CACHE[base] = _detect(base)
    return _CACHE[base]


def gpu_models(base: str) -> list[str]:
    """Every GPU the operating system shows under `base` (no `*_VISIBLE_DEVICES` limit): NVIDIA model names, or
    `target:NAME` / a readable name for AMD parts (`cfgopt doctor` compares the visible-devices lists with it)."""
    return _nvidia_models(base) or _kfd_models(base) or _drm_models(base)


def _detect(base: str) -> Detected | None:
    models = gpu_models(base)
    if not models:
        return None
    visible = _visible_limit()
    if visible is not None:
        models = models[:visible]
        if not models:
            return None
    model = max(set(models), key=lambda m: (models.count(m), m))
    if model.startswith("target:"):  # an AMD part known by its PCI id
        target = TARGETS[model[len("target:") :]]
        return Detected(target, models.count(model), target.device)
    # an NVIDIA model name, matched by name; an AMD one that got here has no target (unknown or partitioned)
    target = None if model.startswith("AMD ") else target_for_device(model)
    return Detected(target, models.count(model), model)


def _read(path: str) -> str:
    try:
        return read_head(path, 65536).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _entries(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _nvidia_models(base: str) -> list[str]:
    folder = os.path.join(base, "proc/driver/nvidia/gpus")
    models = []
    for bus in _entries(folder):
        for line in _read(os.path.join(folder, bus, "information")).splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model" and value.strip():
                models.append(value.strip())
                break
    return models


# XCDs of a whole MI300-class GPU: a partitioned one (CPX, DPX...) shows each partition as a KFD node with fewer
# (`num_xcc`), and a share of the memory the target's figure does not describe.
FULL_XCDS = {"mi300x": 8, "mi325x": 8, "mi300a": 6, "mi355x": 8}


def _amd_model(device_id: int, gfx: str, xcds: int | None = None) -> str:
    """`target:NAME` for a known, unpartitioned Instinct part, else a readable name for the summary."""
    name = AMD_DEVICES.get(device_id)
    if name and xcds and xcds < FULL_XCDS.get(name, 0):
        return f"AMD Instinct {name.upper()} partition ({xcds} of {FULL_XCDS[name]} XCDs)"
    return f"target:{name}" if name else f"AMD GPU {gfx or 'unknown'} (device 0x{device_id:04x})"


def _kfd_models(base: str) -> list[str]:
    folder = os.path.join(base, "sys/class/kfd/kfd/topology/nodes")
    models = []
    for node in _entries(folder):
        props: dict[str, int] = {}
        for line in _read(os.path.join(folder, node, "properties")).splitlines():
            key, _, value = line.strip().partition(" ")
            number = integer(value, signed=True, strip=True)
            if number is not None:
                props[key] = number
        if props.get("simd_count", 0) <= 0 or props.get("vendor_id", AMD_VENDOR) != AMD_VENDOR:
            continue  # a CPU node
        version = props.get("gfx_target_version", 0)
        gfx = f"gfx{version // 10000}{(version // 100) % 100:x}{version % 100:x}" if version else ""
        models.append(_amd_model(props.get("device_id", 0), gfx, props.get("num_xcc")))
    return models


def _drm_models(base: str) -> list[str]:
    folder = os.path.join(base, "sys/class/drm")
    models = []
    for card in _entries(folder):
        if not (card.startswith("card") and is_integer(card[4:])):
            continue  # connectors (card0-DP-1), render nodes
        device = os.path.join(folder, card, "device")
        try:
            vendor = int(_read(os.path.join(device, "vendor")).strip() or "0", 16)
            device_id = int(_read(os.path.join(device, "device")).strip() or "0", 16)
        except ValueError:
            continue
        if vendor == AMD_VENDOR and device_id in AMD_DEVICES:  # not an integrated or desktop Radeon
            models.append(_amd_model(device_id, ""))
    return models


def _visible_limit() -> int | None:
    """How many GPUs the `*_VISIBLE_DEVICES` variables leave a job (None: not set). As CUDA reads the list,
    it ends at the first entry that is not a device (`-1`)."""
    limits = []
    for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = os.environ.get(variable)
        if value is None:
            continue
        count = 0
        for entry in value.split(","):
            if not entry.strip() or entry.strip().startswith("-"):
                break
            count += 1
        limits.append(count)
    return min(limits) if limits else None
