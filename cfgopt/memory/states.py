"""The model states per GPU (`States`): weights (16-bit, the fp32 trainable share, a quantized base), gradients and
optimizer states, partitioned by the ZeRO stage and the GPU count, less what DeepSpeed offloads or a paged
optimizer keeps in unified memory; ZeRO's step buffers (`ZERO12_STEP_BYTES`, `ZERO3_STEP_BYTES`); and the input
embedding's gradient where the backward makes it last. Bytes unless named otherwise; docs/memory.md, "Model
states" and "Calibration", says where each constant comes from.
"""

from __future__ import annotations

from cfgopt.knowledge.bitsandbytes import is_bnb_optimizer
from cfgopt.knowledge.deepspeed_plan import DeepSpeedPlan
from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory.base import linear_params, quantized_bytes_per_param
from cfgopt.memory.batch import Batch
from cfgopt.memory.buffers import bucket_elements
from cfgopt.memory.config_values import get, integer_at
from cfgopt.memory.method import Method
from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ZERO12_STEP_BYTES = 6  # per trainable parameter / N: ZeRO-1/2's fp32 gradient partition and copies at the step
ZERO3_STEP_BYTES = 6  # per parameter of one sub-group: ZeRO-3's fp32 gradients and step temporaries
ZERO3_SUB_GROUP = 1e9  # DeepSpeed's default sub_group_size (the step runs one sub-group at a time)
# (compiled for a name holding one of the words: most model names hold none)
_PREQUANTIZED = (
    (lazy(r"(?:^|[^a-z])(aqlm|2bit)(?:[^a-z]|$)", needs=("aqlm", "2bit")), 2),
    (
        lazy(
            r"(?:^|[^a-z])(awq|gptq|int4|4bit|bnb-4bit|nf4|exl2)(?:[^a-z]|$)",
            needs=("awq", "gptq", "int4", "4bit", "nf4", "exl2"),
        ),
        4,
    ),
    (lazy(r"(?:^|[^a-z])(int8|8bit)(?:[^a-z]|$)", needs=("int8", "8bit")), 8),
)


def _quantized_bytes(config: dict[str, Any], bits: int) -> float:
    """Bytes per quantized linear parameter: bitsandbytes' layouts for `quantization_bit` (its default method,
    nf4 with double quantization unless `double_quantization: false`), bits/8 plus scales for a checkpoint
    quantized by name (AWQ, GPTQ, AQLM) or another `quantization_method`."""
    if integer_at(config, "quantization_bit") != bits:
        return quantized_bytes_per_param(bits, "pre-quantized")
    method = str(get(config, "quantization_method") or "bnb")
    return quantized_bytes_per_param(bits, method, get(config, "double_quantization") is not False)


def quantization_bits(config: dict[str, Any]) -> int | None:
    """Bits of the frozen base: `quantization_bit`, else a pre-quantized checkpoint named so (AWQ, GPTQ, AQLM)."""
    bit = integer_at(config, "quantization_bit")
    if bit in (2, 3, 4, 5, 6, 8):
        return bit
    name = str(config.get("model_name_or_path") or "").lower()
    for pattern, bits in _PREQUANTIZED:
        if pattern.search(name):
            return bits
    return None


def optimizer_bytes(optim: Any, pure_bf16: bool, notes: list[str]) -> tuple[float, bool]:
    """Optimizer state bytes per trainable parameter, and whether the optimizer is modelled at all."""
    name = str(optim or "adamw_torch")
    if any(k in name for k in ("galore", "apollo", "lomo")):
        return 0.0, False
    if "8bit" in name:
        return (1.0 if "lion" in name else 2.0), True
    if "4bit" in name:
        return 1.0, True
    if name in ("sgd",):
        return 0.0, True
    if name == "adafactor":
        notes.append("adafactor: factored second moments counted as 0")
        return 0.0, True
    one_state = "lion" in name or "rmsprop" in name or name == "adagrad"
    per = 4.0 if one_state else 8.0
    return (per / 2 if pure_bf16 else per), True


class States(Record):
    """Model states per GPU, in bytes."""

    weights: float
    gradients: float
    optimizer: float
    offloaded: float
    step: float  # optimizer-step temporaries (ZeRO's gradient partitions)
    gradients_transient: bool  # gradients exist only from backward to the step (full/freeze)
    zero: int | None  # the ZeRO stage, None without DeepSpeed
    trainable: int
    # FSDP: the gradients are shards, made at the last micro-batch's backward (`memory.sharding`): not held from
    # earlier micro-batches at the loss (its `no_sync` gradients are their own component)
    sharded_gradients: bool = False


def model_states(
    shape: ModelShape,
    method: Method,
    ftype: str,
    plan: DeepSpeedPlan,
    config: dict[str, Any],
    gpus: int,
    bits: int | None,
    unmodelled: list[str],
    notes: list[str],
) -> States:
    """Weights, gradients and optimizer states per GPU (docs/memory.md, "Model states")."""
    zero, total = plan.stage, shape.num_parameters
    trainable = min(method.trainable, total)
    frozen = total - trainable
    pure_bf16 = bool(get(config, "pure_bf16"))
    half = pure_bf16 or bool(get(config, "bf16")) or bool(get(config, "fp16"))
    # DeepSpeed keeps its optimizer states in fp32 whatever the trainer's precision.
    opt_bytes, opt_known = optimizer_bytes(get(config, "optim"), pure_bf16 and zero is None, notes)
    if not opt_known:
        unmodelled.append(f"optimizer {get(config, 'optim')}")
    step = 0.0
    if zero is None:
        n_params = n_opt = 1
        upcast = not pure_bf16  # LLaMA-Factory casts trainable parameters to fp32 (model/adapter.py)
        p_bytes = 4.0 if upcast else 2.0  # autocast's 16-bit copies of fp32 weights: `buffers.autocast_copies`
        weights_trainable = trainable * p_bytes
        grads = trainable * p_bytes
        master = 0.0
    else:
        n_opt = gpus if zero >= 1 else 1
        n_grads = gpus if zero >= 2 else 1
        n_params = gpus if zero == 3 else 1
        p_bytes = 2.0 if plan.half else 4.0  # the DeepSpeed engine casts the module to bf16/fp16
        weights_trainable = trainable * p_bytes / n_params
        grads = trainable * p_bytes / n_grads
        master = trainable * (4.0 if plan.half else 0.0) / n_opt
        if zero == 3:
            # ZeRO-3 keeps a 16-bit gradient partition from the start and builds the fp32 gradients of one
            # sub-group (sub_group_size, 1e9 by default) at the step (measured: Qwen3-4B 16 + 1.5 bytes/param)
            step = ZERO3_STEP_BYTES * min(trainable / gpus, ZERO3_SUB_GROUP)
        elif zero in (1, 2):
            # The step holds the fp32 gradient partition and the 16-bit gradients next to the states
            # (measured on one H200: 22 bytes per parameter at the peak, bench/memory/results.md)
            step = ZERO12_STEP_BYTES * trainable / n_grads
    optimizer, paged = _optimizer_on_gpu(
        config, shape, method, ftype, zero, trainable * opt_bytes / n_opt + master, opt_bytes, notes
    )
    # Frozen weights: bf16, or quantized linears with bf16 embeddings (bitsandbytes keeps those in 16 bits).
    if bits:
        frozen_linear = max(0, min(frozen, linear_params(shape)))
        frozen_bytes = frozen_linear * _quantized_bytes(config, bits) + (frozen - frozen_linear) * 2.0
    else:
        frozen_bytes = frozen * 2.0
    weights = frozen_bytes / n_params + weights_trainable
    weights, grads, optimizer, step, offloaded = _offload(plan, shape, weights, grads, optimizer, step)
    offloaded += paged
    if zero is None and not half and ftype in ("full", "freeze"):
        notes.append("no bf16/fp16: activations in fp32")
    # Full/freeze: gradients are set to None after each step and rebuilt by the backward; ZeRO-3 keeps its
    # 16-bit gradient partition from the start (measured: 8 bytes/parameter before the first step).
    # ZeRO-3 with only the optimizer offloaded: its gradient bucket is not there at the loss (measured: Qwen2.5-1.5B
    # 10.3 GiB, 1.1 GiB under an estimate holding it); with the parameters offloaded too it is (Llama-3.2-1B and
    # Qwen3-1.7B, 5-7% under without it). Measured, the mechanism in stage3.py not traced.
    bucket_transient = zero == 3 and plan.offload_optimizer and not plan.offload_param
    transient = ftype in ("full", "freeze") and ((zero != 3 and not plan.offload_optimizer) or bucket_transient)
    return States(weights, grads, optimizer, offloaded, step, transient, zero, trainable)


def _optimizer_on_gpu(
    config: dict[str, Any],
    shape: ModelShape,
    method: Method,
    ftype: str,
    zero: int | None,
    optimizer: float,
    state_bytes: float,
    notes: list[str],
) -> tuple[float, float]:
    """The optimizer states on the GPU and those paged out (bitsandbytes' paged optimizers), in bytes
    (`state_bytes`: per trainable parameter, as `optimizer_bytes` counts them)."""
    name = str(get(config, "optim") or "")
    if zero is None and is_bnb_optimizer(name) and "8bit" in name and (ftype == "full" or method.embedding_trained):
        # The Trainer registers every nn.Embedding for 32-bit states under a bitsandbytes 8-bit optimizer
        # (transformers trainer.py, `register_module_override(module, "weight", {"optim_bits": 32})`): 8 bytes per
        # trained embedding parameter, not 2 (measured: Qwen3-1.7B full, 21.4 GiB; bench/memory/results.md)
        optimizer += shape.vocab_size * shape.hidden_size * state_bytes * 3  # 32-bit states: four times 8-bit
    if name.startswith("paged_") and zero is None:
        # bitsandbytes' paged optimizers keep their states in CUDA unified memory: outside the allocator's count
        # and paged out to the host under pressure, so they cannot stop the run (measured: Mistral-7B
        # paged_adamw_8bit 54.8 GiB allocated against 68.6 with adamw_bnb_8bit; bench/memory/results.md)
        notes.append("paged optimizer: its states live in unified memory, paged to the host under pressure")
        return 0.0, optimizer
    return optimizer, 0.0


def _offload(
    plan: DeepSpeedPlan, shape: ModelShape, weights: float, grads: float, optimizer: float, step: float
) -> tuple[float, float, float, float, float]:
    """DeepSpeed's offload: (weights, gradients, optimizer states, step buffers) left on the GPU, and the bytes
    moved to the host."""
    zero, offloaded = plan.stage, 0.0
    if plan.offload_optimizer:
        offloaded += optimizer
        optimizer, step = 0.0, 0.0
        if zero is not None and zero >= 2:
            # gradients stream to the host in reduce buckets: under ZeRO-3 a bucket stays on the GPU (measured:
            # ZeRO-3 + optimizer offload, 1.5B full, 10.3 GiB on the H200); ZeRO-2 copies each gradient to its
            # host partition as the backward makes it (measured: Llama-3.2-1B 9.0 and Qwen3-1.7B 11.3 GiB, within
            # 2% of the estimate with no gradient held; bench/memory/results.md)
            bucket = 2.0 * bucket_elements(plan, shape) if zero == 3 else 0.0
            offloaded += max(0.0, grads - bucket)
            grads = min(grads, bucket)
        if zero in (1, 2):
            offloaded += grads * 2  # the fp32 gradient partition lives on the host as well
    if plan.offload_param:
        offloaded += weights
        weights = 0.0
    return weights, grads, optimizer, step, offloaded


def late_embedding_gradient(shape: ModelShape, ftype: str, method: Method, states: States, batch: Batch) -> float:
    """Bytes of the input embedding's gradient where the backward makes it last, so that it is not there at the
    backward's peak: untied and trained, with no gradient held from an earlier micro-batch. Measured: Llama-3-8B
    full SFT, 2x1, GC on, 78.1 GiB allocated against 80.1 estimated with it (its 1.96 GiB)."""
    held = batch.accumulation > 1
    trained = ftype == "full" or method.embedding_trained
    if not states.gradients_transient or states.zero is not None or states.sharded_gradients or held:
        return 0.0
    if shape.tie_word_embeddings or not trained:
        return 0.0
    return shape.vocab_size * shape.hidden_size * states.gradients / max(states.trainable, 1)
