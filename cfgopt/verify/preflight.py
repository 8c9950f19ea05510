"""Before `cfgopt verify` / `cfgopt tune` build or run anything: are the packages there, is there a GPU, and
(without one) is `--mode synthetic` asked for a model small enough for this machine's memory? Each failure
is one line and exit code 2 ("could not run"), within seconds: nothing is built first.

torch is imported here (the lint path never comes here): `torch.cuda` answers for CUDA and ROCm builds alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
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
    from cfgopt.job_loader import JobError, load_job
    from cfgopt.settings import Settings

    try:
        config = load_job(args.config, Settings()).values()
    except JobError as exc:
        return _fail(command, str(exc))
    if not config.get("model_name_or_path"):
        return _fail(command, f"{args.config}: not a LLaMA-Factory training config (no `model_name_or_path`)")
    try:
        if accelerator() is not None:
            return None
    except Exception as exc:  # noqa: BLE001 - a broken torch install (missing shared library, driver mismatch)
        return _fail(command, f"torch cannot look for a GPU here ({type(exc).__name__}: {exc})")
    if args.mode != "synthetic":
        return _fail(
            command,
            "no GPU here (torch sees no CUDA or ROCm device); it runs the real trainer on a GPU "
            "(--mode synthetic runs a small model on the CPU)",
        )
    return _check_cpu_memory(config, args.config, command)


def _check_cpu_memory(config: dict[str, Any], config_path: Path, command: str) -> int | None:
    """`--mode synthetic` without a GPU: only for a model whose CPU run fits this machine's memory."""
    from cfgopt.model_shapes import shape_for
    from cfgopt.verify.synthetic import available_memory_bytes, cpu_bytes_needed

    ref = config.get("model_name_or_path")
    shape = shape_for(ref, config_path.parent) if isinstance(ref, str) else None
    if shape is None:
        return None  # planning says why it cannot build this model
    needed = cpu_bytes_needed(shape.num_parameters, str(config.get("finetuning_type", "lora")))
    available = available_memory_bytes()
    if available is not None and needed > available:
        return _fail(
            command,
            f"no GPU here, and a CPU run of {shape.name} ({shape.num_parameters / 1e9:.1f}B parameters) needs "
            f"about {needed / 1024**3:.0f} GiB of memory, {available / 1024**3:.0f} GiB available: run it on a "
            "GPU machine",
        )
    return None
