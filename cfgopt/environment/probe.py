"""What the machine `verify` and `tune` run on offers (CUDA, the GPUs, flash-attn, Liger, DeepSpeed, bitsandbytes,
torchao), asked of a child Python process that imports them: never on the lint path, which judges the job's
stated environment (`cfgopt.environment.stated`). `Platform` (defined beside `Environment`, so that the planner's
input costs the lint path no import of this module) is what `probe_platform` answers;
`environment_of` gives what it offers as the one `Environment` type (`Origin.PROBED`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

from cfgopt.environment import Environment, Origin, Platform, package_key

__all__ = ["Platform", "environment_of", "importable_packages", "probe_platform", "probed_environment"]


def importable_packages(platform: Platform) -> dict[str, bool]:
    """The optional packages a plan may use, by import name, and whether the probed platform can import them."""
    return {
        "liger_kernel": platform.liger,
        "flash_attn": platform.flash_attn,
        "bitsandbytes": platform.bitsandbytes,  # the planner's 8-bit AdamW
        "torchao": platform.torchao,  # 8-bit AdamW with bf16 stochastic rounding
    }


PROBED = "this machine, probed"


def probed_environment(importable: Iterable[str]) -> Environment:
    """The environment `verify` and `tune` plan for: the packages (import names) found importable on the machine
    they run on, the node itself; the probe asks no versions."""
    return Environment(
        {package_key(name): "" for name in importable}, f"{PROBED} (verify/tune run on the node)", Origin.PROBED
    )


def environment_of(platform: Platform) -> Environment:
    """What a probed platform offers a plan, as the one `Environment` type."""
    return probed_environment(name for name, ok in importable_packages(platform).items() if ok)


_PROBE = r"""
import importlib, json, sys
out = {"cuda": False, "device": "cpu", "gpu_count": 0}
try:
    import torch
    out["cuda"] = bool(torch.cuda.is_available())
    if out["cuda"]:
        out["gpu_count"] = torch.cuda.device_count()
        out["device"] = torch.cuda.get_device_name()
        out["memory_gib"] = torch.cuda.get_device_properties(0).total_memory / 2**30
except Exception as exc:
    out["torch_error"] = repr(exc)
for name, module in (("flash_attn", "flash_attn"), ("liger", "liger_kernel.transformers"), ("deepspeed", "deepspeed"),
                     ("bitsandbytes", "bitsandbytes"), ("torchao", "torchao.optim")):
    try:
        importlib.import_module(module)
        out[name] = True
    except Exception as exc:
        out[name] = False
        out[name + "_error"] = f"{type(exc).__name__}: {exc}"[:200]
print("CFGOPT-PROBE " + json.dumps(out))
"""


def probe_platform(python: str | None = None, timeout: float = 300) -> Platform:
    """Ask a child Python (the one the runs use) what it can import; the lint path never does this."""
    import subprocess  # here: the planner imports this module on the lint path

    try:
        proc = subprocess.run(
            [python or sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "DISABLE_VERSION_CHECK": "1"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Platform(notes=[f"platform probe failed ({exc}); searching sdpa/eager only, no Liger, no DeepSpeed"])
    line = next((x for x in proc.stdout.splitlines() if x.startswith("CFGOPT-PROBE ")), None)
    if line is None:
        return Platform(notes=[f"platform probe failed: {proc.stderr.strip()[-300:]}"])
    data = json.loads(line.split(" ", 1)[1])
    plat = Platform(
        cuda=data["cuda"],
        device=data["device"],
        gpu_count=data["gpu_count"],
        flash_attn=data["flash_attn"] and data["cuda"],
        liger=data["liger"] and data["cuda"],
        deepspeed=data["deepspeed"],
        bitsandbytes=bool(data.get("bitsandbytes")) and data["cuda"],
        torchao=bool(data.get("torchao")) and data["cuda"],
        memory_gib=float(data.get("memory_gib") or 0.0),
    )
    for name, what in (
        ("flash_attn", "fa2"),
        ("liger", "Liger kernels"),
        ("deepspeed", "DeepSpeed"),
        ("bitsandbytes", "8-bit AdamW"),
        ("torchao", "torchao's 8-bit AdamW with bf16 stochastic rounding"),
    ):
        if not data.get(name):
            plat.notes.append(f"{what} not searched: {data.get(name + '_error', 'not importable')}")
        elif not data["cuda"] and name != "deepspeed":
            plat.notes.append(f"{what} not searched: no CUDA device")
    return plat
