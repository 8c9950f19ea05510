"""FSDP and plain DDP (an `accelerate launch --config_file X.yaml` job, `cfgopt.knowledge.accelerate_plan`): the
model states per GPU under FSDP's sharding, the units FSDP gathers, the unsharded gradients `no_sync` accumulates,
and DDP's gradient buckets. Read from the code (accelerate 1.11, torch 2.x FSDP and DDP, transformers 5.6's
Trainer, LLaMA-Factory 0.9.5's adapter setup), not measured: the estimate lists them as uncalibrated.
docs/memory.md, "FSDP and DDP", derives each term.
"""

from __future__ import annotations

from cfgopt.knowledge.accelerate_plan import AcceleratePlan
from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory.base import GIB, STATES, Component, embedding_params, layer_params
from cfgopt.memory.batch import Batch
from cfgopt.memory.config_values import get
from cfgopt.memory.method import Method
from cfgopt.memory.states import States, optimizer_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GATHERED_UNITS = 2  # the unit computing and the one prefetched (forward / backward prefetch)
_ACCELERATE = "accelerate 1.11"
_FSDP_SOURCE = f"read from the code, not measured: {_ACCELERATE} accelerator.py / utils/fsdp_utils.py, torch FSDP"
_RESHARDED = ("FULL_SHARD", "HYBRID_SHARD")  # free a unit's gathered weights after its forward


def mixed_precision(plan: AcceleratePlan, config: dict[str, Any]) -> str:
    """The Trainer's mixed precision: `fp16` or `bf16` when set, else accelerate's (transformers 5.6
    training_args.py: `ACCELERATE_MIXED_PRECISION`, which the launch exports from the config)."""
    if get(config, "fp16"):
        return "fp16"
    if get(config, "bf16") or get(config, "pure_bf16"):
        return "bf16"
    return plan.mixed_precision if plan.mixed_precision in ("bf16", "fp16", "fp8") else "no"


def shard_count(plan: AcceleratePlan, gpus: int) -> int:
    """The ranks FSDP shards over: every GPU (FULL_SHARD, SHARD_GRAD_OP), one machine's (HYBRID_*: replicated
    across machines), none (NO_SHARD)."""
    if plan.sharding == "NO_SHARD":
        return 1
    if plan.sharding.startswith("HYBRID"):
        return max(1, gpus // max(1, plan.machines))
    return gpus


def fsdp_states(
    shape: ModelShape,
    method: Method,
    ftype: str,
    plan: AcceleratePlan,
    config: dict[str, Any],
    gpus: int,
    unmodelled: list[str],
    notes: list[str],
) -> States:
    """Weights, gradients and optimizer states per GPU under FSDP. LLaMA-Factory upcasts the trainable parameters
    to fp32 (model/adapter.py: not ZeRO-3, not pure_bf16), and accelerate upcasts whatever mixed precision leaves
    in 16 bits: FSDP1 the trainable flat parameters (accelerator.py `prepare_model`), FSDP2 the whole model when
    its dtype is not fp32 (utils/fsdp_utils.py `fsdp2_prepare_model`: a LoRA base too). The sharded gradient is
    kept in the parameters' dtype; Adam's two states per trainable parameter. All of it over the shard group;
    with `fsdp_offload_params` on the host (torch `CPUOffload(offload_params=True)` moves the gradients too, and
    the optimizer steps there)."""
    total = shape.num_parameters
    trainable = min(method.trainable, total)
    frozen = total - trainable
    mixed = mixed_precision(plan, config)
    pure = bool(get(config, "pure_bf16")) and mixed == "no"
    trained_bytes = 2.0 if pure else 4.0
    whole_model_upcast = plan.fsdp_version == 2 and mixed != "no" and frozen > 0
    frozen_bytes = 4.0 if whole_model_upcast else 2.0
    n = shard_count(plan, gpus)
    per_param, known = optimizer_bytes(get(config, "optim"), pure, notes)
    if not known:
        unmodelled.append(f"optimizer {get(config, 'optim')}")
    weights = (frozen * frozen_bytes + trainable * trained_bytes) / n
    grads = trainable * trained_bytes / n
    optimizer = trainable * per_param / n
    offloaded = 0.0
    if plan.offload_params:
        offloaded, weights, grads, optimizer = weights + grads + optimizer, 0.0, 0.0, 0.0
    if whole_model_upcast:
        notes.append(f"FSDP2 with {mixed}: accelerate upcasts the whole model to fp32, frozen weights included")
    transient = ftype in ("full", "freeze")  # set to None after each step (the Trainer's zero_grad)
    return States(weights, grads, optimizer, offloaded, 0.0, transient, None, trainable, sharded_gradients=n > 1)


def fsdp_buffers(
    shape: ModelShape, method: Method, plan: AcceleratePlan, config: dict[str, Any], batch: Batch, gpus: int
) -> list[Component]:
    """What FSDP gathers beside its shards, at the loss and through the backward:
    - the root unit (embeddings, final norm, an untied lm_head: what the transformer auto-wrap policy leaves
      outside the decoder layers), gathered through the backward (its pre-backward hook runs first, its
      post-backward last); FSDP1 does not reshard it after the forward either (torch `_runtime_utils._post_forward`:
      `not state._is_root`), so it is there at the loss too; FSDP2 does only when `reshard_after_forward` is left
      unset (`_fully_shard.py`: `auto_reshard_after_forward`), and accelerate always sets it, so not at the loss;
    - FULL_SHARD / HYBRID_SHARD: one decoder layer computing and one prefetched (GATHERED_UNITS); SHARD_GRAD_OP,
      HYBRID_SHARD_ZERO2 and NO_SHARD keep every unit gathered from its forward to its backward: the whole model;
      in the mixed precision's 16 bits (accelerate `set_mixed_precision`: param_dtype), else in fp32;
    - with N > 1, one unit's unsharded gradient in the backward, before the reduce-scatter into its shard (torch
      FSDP1 `_post_backward_hook` / `_reduce_grad`; FSDP2 `foreach_reduce`);
    - with gradient accumulation, `no_sync` (the Trainer's, every micro-batch but the last) keeps each unit's
      unsharded gradient in param_dtype until the last micro-batch's backward reduces it (torch FSDP1
      `_post_backward_hook` returns before the reduce-scatter; FSDP2 `set_requires_gradient_sync(False)`)."""
    mixed = mixed_precision(plan, config)
    unit_bytes = 2.0 if mixed in ("bf16", "fp16", "fp8") else 4.0
    root = embedding_params(shape) + shape.hidden_size
    phases: tuple[str, ...] = ("loss", "backward")
    if plan.sharding in _RESHARDED:
        gathered = root + GATHERED_UNITS * layer_params(shape)
        counted = f"root unit + {GATHERED_UNITS} decoder layers, {unit_bytes:g}-byte"
        phases = ("backward",) if plan.fsdp_version == 2 else phases
    else:
        gathered = shape.num_parameters
        counted = f"every unit until its backward ({plan.sharding}), {unit_bytes:g}-byte"
    out = [Component("FSDP gathered parameters", gathered * unit_bytes / GIB, counted, phases, _FSDP_SOURCE)]
    trainable = min(method.trainable, shape.num_parameters)
    if shard_count(plan, gpus) > 1:
        # the unit whose backward just ran: its unsharded gradient, reduce-scattered into the shard, then freed
        unit_grad = min(layer_params(shape), trainable / shape.num_hidden_layers) * unit_bytes
        counted = f"one decoder layer's gradient before its reduce-scatter, {unit_bytes:g}-byte"
        out.append(Component("FSDP unit gradient", unit_grad / GIB, counted, ("backward",), _FSDP_SOURCE))
    if batch.accumulation > 1 and shard_count(plan, gpus) > 1:
        source = f"{_FSDP_SOURCE}; transformers 5.6 trainer.py (no_sync but on the last micro-batch)"
        counted = f"{trainable / 1e6:,.1f}M trainable, unsharded, {unit_bytes:g}-byte"
        grads = trainable * unit_bytes / GIB
        out.append(Component("FSDP no_sync gradients", grads, counted, ("loss", "backward"), source))
    return out


def ddp_buckets(config: dict[str, Any], states: States, gpus: int) -> list[Component]:
    """DDP's gradient buckets: the Reducer allocates one flat tensor per bucket over every trainable parameter at
    construction and keeps them (torch `reducer.cpp` `initialize_buckets`); without `gradient_as_bucket_view`
    (torch's default, and the Trainer's `DistributedDataParallelKwargs` never sets it) `.grad` is a second copy,
    so the buckets hold the gradients' bytes once more. `ddp_bucket_cap_mb` sizes each bucket, not their sum."""
    if gpus <= 1 or not states.gradients:
        return []
    cap = get(config, "ddp_bucket_cap_mb")
    counted = f"a second copy of the gradients (bucket_cap_mb {cap if cap is not None else 25})"
    source = "read from the code, not measured: torch DDP reducer (gradient_as_bucket_view off)"
    return [Component("DDP gradient buckets", states.gradients / GIB, counted, (STATES,), source)]
