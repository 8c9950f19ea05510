"""Before `cfgopt verify` / `cfgopt tune` build or run anything: are the packages there, is there a GPU, and
(without one) is `--mode synthetic` asked for a config whose CPU stand-in can run here (a known shape, small
enough for this machine's memory and disk)? Each failure is one line and exit code 2 ("could
not run"), within seconds: nothing is built first. A message suggests `--mode synthetic` only where it would
run. (Precision a CPU cannot train in, bf16 / fp16, is not a reason to stop: the runs override it to fp32
and say so, `runner.plan_assets`.)

torch is imported here (the lint path never comes here): `torch.cuda` answers for CUDA and ROCm builds alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from cfgopt.verify.options import default_cache_dir
from cfgopt.verify.synthetic_meta import unsupported_stage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PACKAGES = ("torch", "transformers", "llamafactory")


def _fail(command: str, message: str) -> int:
    sys.stderr.write(f"cfgopt {command}: {message}\n")
    return 2


def accelerator() -> str | None:
    """The name of the first GPU torch can use (CUDA or ROCm), None when there is none."""
    import torch

    if not torch.cuda.is_available():
        return None
    kind = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
    return f"{torch.cuda.get_device_name(0)} ({kind})"


def check(args: argparse.Namespace, command: str) -> int | None:
    """None when the runs can start; else the exit code (2), after one line on stderr."""
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        return _fail(
            command,
            f"needs {', '.join(PACKAGES)} installed (missing: {', '.join(missing)}); "
            "see the README's verify / tune prerequisites",
        )
    from cfgopt.job.settings import Settings
    from cfgopt.project.loader import JobError, load_job

    try:
        config = load_job(args.config, Settings()).values()
    except JobError as exc:
        return _fail(command, str(exc))
    if not config.get("model_name_or_path"):
        return _fail(command, f"{args.config}: not a LLaMA-Factory training config (no `model_name_or_path`)")
    if reason := unsupported_stage(config):  # in every mode: the measurement itself cannot be made
        return _fail(command, f"{args.config}: {reason}")
    try:
        if accelerator() is not None:
            return None
    except Exception as exc:  # noqa: BLE001 - a broken torch install (missing shared library, driver mismatch)
        return _fail(command, f"torch cannot look for a GPU here ({type(exc).__name__}: {exc})")
    cache_dir = getattr(args, "cache_dir", None) or default_cache_dir()
    blocker = cpu_blocker(config, args.config, cache_dir)
    if args.mode == "synthetic":
        return None if blocker is None else _fail(command, f"no GPU here, and {blocker}")
    if blocker is not None:  # --mode synthetic cannot stand in either: do not suggest it
        return _fail(
            command, f"no GPU here (torch sees no CUDA or ROCm device) to run the real trainer on, and {blocker}"
        )
    return _fail(
        command,
        "no GPU here (torch sees no CUDA or ROCm device) to run the real trainer on; "
        "--mode synthetic runs a random-init stand-in of the model on the CPU instead",
    )


def cpu_only() -> bool:
    """True when the runs will go to the CPU (torch sees no GPU, or cannot look for one)."""
    try:
        return accelerator() is None
    except Exception:  # noqa: BLE001 - as `check`: a torch that cannot look for a GPU uses none
        return True


def cpu_blocker(config: dict[str, Any], config_path: Path, cache_dir: Path) -> str | None:
    """Why a CPU run of this config's synthetic stand-in cannot work here (None when it can), found before
    anything is built: the model's shape, this machine's memory and disk. (DeepSpeed runs on a CPU: its CPU
    accelerator with gloo, ZeRO-2 measured with a tiny model.)"""
    from cfgopt.verify import cache, runner

    try:
        assets = runner.plan_assets(config, config_path, "synthetic", cache_dir, on_cpu=True)
    except ValueError as exc:
        return str(exc)
    if memory := _cpu_memory_problem(config, config_path):
        return memory
    needed = runner.bytes_to_build(assets)
    free = cache.free_bytes(cache_dir)
    if free is not None and needed > free:
        return (
            f"building its stand-in needs about {cache.human(needed)} in {cache_dir}, "
            f"{cache.human(free)} free there (--cache-dir puts it elsewhere)"
        )
    return None


def _cpu_memory_problem(config: dict[str, Any], config_path: Path) -> str | None:
    """`--mode synthetic` without a GPU: only for a model whose CPU run fits this machine's memory."""
    from cfgopt.knowledge.model_shapes import shape_for
    from cfgopt.loaders.model_config import local_model
    from cfgopt.verify.synthetic import available_memory_bytes, cpu_bytes_needed

    ref = config.get("model_name_or_path")
    shape = shape_for(ref, local_model(ref, config_path.parent)) if isinstance(ref, str) else None
    if shape is None:
        return None  # a local config.json without a known shape: planning sized it
    needed = cpu_bytes_needed(shape.num_parameters, str(config.get("finetuning_type", "lora")))
    available = available_memory_bytes()
    if available is not None and needed > available:
        return (
            f"a CPU run of {shape.name} ({shape.num_parameters / 1e9:.1f}B parameters) needs "
            f"about {needed / 1024**3:.0f} GiB of memory, {available / 1024**3:.0f} GiB available: run it on a "
            "GPU machine"
        )
    return None
