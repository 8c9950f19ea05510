"""The memory rules' access to the memory model, through the job (`Job.estimate`): one estimate per (config,
variant), only where it is sound.

An estimate is made only for a training run (`do_train`) of a known model (`model_shapes.shape_for`: a local
config.json or the built-in table) on a target with memory, whose DeepSpeed file (if any) was read and whose
settings the model covers (`MemoryEstimate.unmodelled` empty). Otherwise None, and every memory rule stays
silent: the real corpus mostly names hub models the table does not hold.

GPU count: `--gpus` when given, else the launch line's. Unstated, a rule that warns of out-of-memory assumes a full
node of 8 (ZeRO shards the most: fewer false alarms) and a rule that spends memory assumes 1 (it then fits on any
count).
"""

from __future__ import annotations

from cfgopt.job.job import GPUS_IF_UNSTATED_OOM, GPUS_IF_UNSTATED_SPEND
from cfgopt.rules.base import Context

TYPE_CHECKING = False
if TYPE_CHECKING:  # the memory model is imported by `Job.estimate`, only where an estimate is sound
    from typing import Any

    from cfgopt.memory import estimate as memory

__all__ = ["GPUS_IF_UNSTATED_OOM", "GPUS_IF_UNSTATED_SPEND", "estimate_ctx", "gpus", "gpus_stated", "top3"]


def gpus(ctx: Context, unstated: int) -> int:
    """The job's GPU count (`Job.hardware`): `--gpus`, else its launch line's (`num_processes` of the accelerate
    config, `--nproc_per_node`, `NPROC_PER_NODE=8`), else `unstated`."""
    return ctx.job.hardware(unstated).gpus


def gpus_stated(ctx: Context) -> bool:
    """Was the GPU count stated (`--gpus`, the project config or the launch line), not assumed?"""
    return ctx.job.hardware(0).gpus_stated


def estimate_ctx(ctx: Context, n_gpus: int, **changes: Any) -> memory.MemoryEstimate | None:
    """The estimate of this LLaMA-Factory config's job on `n_gpus` GPUs, with `changes` to its keys."""
    return ctx.job.estimate(n_gpus, **changes)


def top3(est: memory.MemoryEstimate) -> str:
    """The three largest components on the GPU, for a message (what is offloaded to the host is no part of it)."""
    parts = sorted((c for c in est.components if "host" not in c.phases and c.gib > 0), key=lambda c: -c.gib)
    return ", ".join(f"{c.name} {c.gib:.0f}" for c in parts[:3])
