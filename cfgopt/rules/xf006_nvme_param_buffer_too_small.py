from __future__ import annotations

import math
from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import consumer_entry
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, training
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_number

# DeepSpeed's default `offload_param.buffer_size` (runtime/zero/offload_config.py: `pp_int(1e8)` elements)
DEFAULT_BUFFER = 100_000_000


def _largest_parameter(shape) -> int:
    """The most elements of one parameter: the embedding (or an untied lm_head, the same size), else an MLP or
    attention projection."""
    h = shape.hidden_size
    return max(shape.vocab_size * h, shape.intermediate_size * h, shape.num_attention_heads * shape.head_size * h)


def _gpus(hardware) -> str:
    """The GPU count judged, in words, saying when it is assumed."""
    count = f"{hardware.gpus} GPU{'s' if hardware.gpus != 1 else ''}"
    return count if hardware.gpus_stated else f"{count} (GPU count assumed; --gpus)"


class NvmeParamBufferTooSmall(Rule):
    code = "XF006"
    name = "nvme-param-buffer-too-small"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"deepspeed"})
    summary = "ZeRO-3 NVMe parameter offload whose swap buffer is smaller than the largest parameter's partition"
    why = (
        "Confidence: certain for the code. With `offload_param.device: nvme`, `zero.Init` gives each parameter's "
        "partition (its elements over the GPUs) a swap buffer of `offload_param.buffer_size` elements (default "
        "1e8) and asserts the partition fits. A Llama-3-8B embedding has 525M elements: its partition is 131M on "
        "4 GPUs, more than the default buffer, so the run stops while the model is built. Judged with the GPU count "
        "and the model's shape (the largest of the embedding, the MLP and attention projections)."
    )
    fails_when = "At model load (inside `deepspeed.zero.Init`): `AssertionError: More elements X than buffer size Y`."
    evidence = (
        "deepspeed 0.19.8 runtime/swap_tensor/partitioned_param_swapper.py L357 (`get_buffer`), "
        "runtime/zero/partition_parameters.py L1816-1823 (partition size = aligned numel / world); the same in "
        "0.14.5 and 0.16.4",
        "deepspeed 0.19.8 runtime/zero/offload_config.py L36 (`buffer_size` default 1e8)",
    )
    example = (
        'Llama-3-8B, 4 GPUs, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}  ->  '
        '"buffer_size": 2e8 (or 8 GPUs)'
    )
    fix_safety = "No fix: the buffer is pinned host memory the user sizes (x `buffer_count`)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx):
            return
        job = ctx.job
        known, ds = job.deepspeed
        zero = ds.get("zero_optimization") if known and isinstance(ds, dict) else None
        offload = zero.get("offload_param") if isinstance(zero, dict) else None
        if not isinstance(offload, dict) or offload.get("device") != "nvme" or job.zero_stage != 3:
            return
        shape = job.shape
        buffer = offload.get("buffer_size", DEFAULT_BUFFER)
        if shape is None or not is_number(buffer) or buffer <= 0:
            return
        hardware = job.hardware(1)
        largest = _largest_parameter(shape)
        per_gpu = math.ceil(largest / hardware.gpus)
        if per_gpu <= buffer:
            return
        needed = math.ceil(largest / buffer)
        entry = consumer_entry(ctx.source, "deepspeed")
        if entry is None:
            return
        yield self.at_entry(
            ctx,
            entry,
            f"ZeRO-3 NVMe parameter offload on {_gpus(hardware)}: {shape.name}'s largest parameter "
            f"({largest:,} elements) is {per_gpu:,} per GPU, more than `offload_param.buffer_size` "
            f"({buffer:,.0f}); {ctx.ds_label}'s `zero.Init` stops at model load (`More elements ... than buffer "
            f"size`). Set `buffer_size` to at least {per_gpu:,}, or train on {needed} GPUs or more",
            severity=Severity.ERROR if hardware.gpus_stated else Severity.WARNING,
        )
