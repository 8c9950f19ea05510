"""The memory rules' access to `cfgopt.memory`: one estimate per (config, variant), only where it is sound.

An estimate is made only for a training run (`do_train`) of a known model (`model_shapes.shape_for`: a local
config.json or the built-in table) on a target with memory, whose DeepSpeed file (if any) was read and whose
settings the model covers (`MemoryEstimate.unmodelled` empty). Otherwise None, and every memory rule stays
silent: the real corpus mostly names hub models the table does not hold.

GPU count: `--gpus` when given. Unstated, a rule that warns of out-of-memory assumes a full node of 8 (ZeRO
shards the most: fewer false alarms) and a rule that spends memory assumes 1 (it then fits on any count).
"""

from __future__ import annotations

import json
from typing import Any

from cfgopt import memory
from cfgopt.rules._xf import lf_value, model_shape
from cfgopt.rules.base import Context
from cfgopt.source import Kind, Source
from cfgopt.targets import Target

GPUS_IF_UNSTATED_OOM = 8
GPUS_IF_UNSTATED_SPEND = 1
_TRAIN = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})


def gpus(ctx: Context, unstated: int) -> int:
    return ctx.settings.gpus if ctx.settings.gpus else unstated


def deepspeed_of(ctx: Context) -> tuple[bool, dict[str, Any] | None]:
    """(known, the DeepSpeed config as a dict or None) for a LLaMA-Factory config's `deepspeed` value."""
    data = ctx.source.data if isinstance(ctx.source.data, dict) else {}
    value = data.get("deepspeed")
    if not value:
        return True, None
    if isinstance(value, dict):
        return True, value
    ds = ctx.deepspeed
    if ds is None or ds.error is not None or not isinstance(ds.data, dict):
        return False, None
    return True, ds.data


def _training(consumer: Source, settings) -> bool:
    if consumer.kind not in _TRAIN or not isinstance(consumer.data, dict):
        return False
    if consumer.kind == Kind.LF_CLI and consumer.command.get("group", "train") != "train":
        return False
    return bool(lf_value(consumer, "do_train", settings.lf_schema))


def estimate_source(
    consumer: Source,
    settings,
    deepspeed: dict[str, Any] | None,
    n_gpus: int,
    memo: dict[str, Any] | None = None,
    **changes: Any,
) -> memory.MemoryEstimate | None:
    """The estimate for a LLaMA-Factory config (with `changes` applied to its keys), or None where unsound."""
    target: Target = settings.target
    if not target.memory_gib or not _training(consumer, settings):
        return None
    ds_key = json.dumps(deepspeed, sort_keys=True, default=str)
    key = f"mem:{id(consumer)}:{n_gpus}:{ds_key}:{sorted(changes.items())!r}"
    if memo is not None and key in memo:
        return memo[key]
    shape = model_shape(consumer, settings.lf_schema)
    est = None
    if shape is not None:
        config = memory.with_changes(consumer.data, **changes)
        est = memory.estimate(config, shape, target, n_gpus, deepspeed)
        if est.unmodelled or (deepspeed is not None and est.zero_stage is None):
            est = None
    if memo is not None:
        memo[key] = est
    return est


def estimate_ctx(ctx: Context, n_gpus: int, **changes: Any) -> memory.MemoryEstimate | None:
    known, ds = deepspeed_of(ctx)
    if not known:
        return None
    return estimate_source(ctx.source, ctx.settings, ds, n_gpus, ctx.memo, **changes)


def top3(est: memory.MemoryEstimate) -> str:
    """The three largest parts of a peak, for a message."""
    parts = [(label, gib) for label, gib, _ in est.rows() if not label.startswith("=") and gib > 0]
    parts.sort(key=lambda p: -p[1])
    return ", ".join(f"{label} {gib:.0f}" for label, gib in parts[:3])
