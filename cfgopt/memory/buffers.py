"""What a run allocates beside its states and activations, each a `Component` with the phases it lives in:
neat_packing's 4D mask, ZeRO's communication buffers (ZeRO-3's gathered parameters, ZeRO-1/2's reduce and
all-gather buckets), ZeRO-3's step moments (the clipping norm's fp64 copy, fp16's overflow check) and autocast's
16-bit copies of fp32 weights. Bytes unless named otherwise; docs/memory.md, "Model states" (ZeRO buffers),
"Logits, attention, masks", "ZeRO-3's step" and "Calibration", says where each constant comes from.
"""

from __future__ import annotations

import math

from cfgopt.knowledge.deepspeed_plan import DeepSpeedPlan
from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory.base import GIB, STATES, Component, embedding_params, layer_params
from cfgopt.memory.batch import Batch
from cfgopt.memory.config_values import get

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NEAT_MASK_BYTES = 8  # per (b, s, s) element: the 4D mask of neat_packing without fa2 (fit to V13 vs V7)
ISINF_BYTES = 3  # per 16-bit element: torch.isinf is `abs() == inf`, a 16-bit copy and a bool mask (H200: 3.0)
GRAD_NORM_BYTES = 8  # per element of the largest gradient partition: the clipping norm's fp64 copy (H200: 8.0)
AUTOCAST_COPIES = "autocast weight copies"


def bucket_elements(plan: DeepSpeedPlan, shape: ModelShape) -> float:
    """ZeRO's reduce + all-gather bucket elements; "auto" is hidden_size² (transformers' deepspeed.py)."""
    return (plan.bucket_elements or 0.0) + plan.auto_buckets * shape.hidden_size**2


def held_buffers(
    shape: ModelShape,
    config: dict[str, Any],
    plan: DeepSpeedPlan,
    gpus: int,
    gradient_bytes: float,
    batch: Batch,
    attention: str,
    notes: list[str],
) -> list[Component]:
    """Masks and ZeRO communication buffers: held throughout the step (a reference model: `memory.stages`)."""
    zero, out = plan.stage, []
    if batch.packing and bool(get(config, "neat_packing")) and attention != "fa2":
        mask = NEAT_MASK_BYTES * batch.seqs * batch.seq * batch.seq
        out.append(Component("neat_packing mask", mask / GIB, "4D mask, b x s x s", (STATES,), "fit to V13 vs V7"))
    if zero == 3 and gpus > 1:
        embed = embedding_params(shape)
        gathered = 2.0 * max(2 * layer_params(shape), embed // (1 if shape.tie_word_embeddings else 2))
        out.append(
            Component("ZeRO-3 gathered parameters", gathered / GIB, "2 layers or the embedding, 16-bit", (STATES,))
        )
    if zero in (1, 2) and gpus > 1:
        # bounded by the gradient partition's size in bytes, as calibrated (an element count against bytes)
        buckets = 2.0 * min(bucket_elements(plan, shape), gradient_bytes) * (2 if plan.overlap_comm else 1)
        counted = "reduce + all-gather buckets" + (", x2 overlap_comm" if plan.overlap_comm else "")
        out.append(Component("ZeRO buckets", buckets / GIB, counted, (STATES,)))
    return out


def autocast_copies(
    config: dict[str, Any], ftype: str, zero: int | None, gc: bool, half: bool, batch: Batch, trainable: int
) -> list[Component]:
    """Autocast's 16-bit copies of the trained fp32 weights (full/freeze without DeepSpeed under bf16 or fp16):
    - checkpointing off: the backward keeps every copy; counted throughout, as measured (18 bytes per parameter
      for a 1.24B full fine-tune, docs/evidence/rocm_perf.md §5.3);
    - checkpointing on, with gradients held from an earlier micro-batch (accumulation over 1): through the
      backward. Fitted, the mechanism not traced: Qwen2.5-7B full SFT (8-bit AdamW, packed 12000 tokens) at 1x8,
      2x4 and 4x2 measured 15.7, 14.9 and 13.3 GiB over an estimate without them (its copy is 14.2 GiB);
    - checkpointing on with accumulation 1: none at the peak (every such run fits without)."""
    upcast = zero is None and half and not bool(get(config, "pure_bf16")) and ftype in ("full", "freeze")
    copies, detail = 2.0 * trainable / GIB, "16-bit copy of the trained weights"
    if not upcast or (gc and batch.accumulation == 1):
        return []
    if not gc:
        return [Component(AUTOCAST_COPIES, copies, detail, (STATES,), "measured: rocm_perf §5.3")]
    source = "fit: Qwen2.5-7B full, GC on, accumulation 2-8 (bench/memory/results.md)"
    return [Component(AUTOCAST_COPIES, copies, detail, ("backward",), source)]


_STAGE3 = "deepspeed 0.19.8 runtime/zero/stage3.py"


def engine_fp16(deepspeed: dict[str, Any] | None, config: dict[str, Any]) -> bool:
    """DeepSpeed runs the model in fp16 (its `fp16` block enabled, or "auto" with the trainer's `fp16` on)."""
    block = deepspeed.get("fp16") if isinstance(deepspeed, dict) else None
    enabled = block.get("enabled") if isinstance(block, dict) else None
    return enabled is True or (enabled == "auto" and bool(get(config, "fp16")))


def zero3_buffers(
    config: dict[str, Any],
    deepspeed: dict[str, Any] | None,
    plan: DeepSpeedPlan,
    gpus: int,
    trainable: int,
    largest_trainable: int,
) -> list[Component]:
    """What ZeRO-3's step allocates beside the states it partitions, each at its own moment (read from DeepSpeed
    0.19.8's stage3.py; docs/memory.md, "ZeRO-3's step"): the fp64 copy of one parameter's gradient partition
    that the clipping norm makes (both precisions), and with fp16 the overflow check's copy and mask of the whole
    16-bit gradient partition (the loss scaler's inf/NaN test, every step). With the optimizer offloaded the
    gradient partition lives on the host (stage3.py:333) and neither happens on the GPU."""
    if plan.stage != 3 or plan.offload_optimizer:
        return []
    norm = GRAD_NORM_BYTES * math.ceil(largest_trainable / gpus)
    source = f"{_STAGE3}:2457 (get_grad_norm_direct: g.to(float64).norm() per parameter)"
    out = [Component("gradient norm (fp64)", norm / GIB, "largest trainable parameter", ("grad norm",), source)]
    if engine_fp16(deepspeed, config):
        check = ISINF_BYTES * trainable / gpus
        source = f"{_STAGE3}:2815-2816, 3013 (fp16: torch.isinf(grad_partitions_flat_buffer) = abs() == inf)"
        counted = "isinf over the 16-bit gradient partition: copy + mask"
        out.append(Component("fp16 overflow check", check / GIB, counted, ("overflow check",), source))
    return out
