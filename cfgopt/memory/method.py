"""What the fine-tuning method trains (`Method`): the trained linears and the trainable parameters of LoRA (with
DoRA's magnitudes, `cfgopt.memory.stages`), OFT, freeze and full fine-tuning, the activation bytes per layer an
adapter adds (`LORA_DROPOUT_BYTES`, `OFT_INPUT_BYTES`), and which layers, embedding and head train.
docs/memory.md, "Model states" (the trainable counts) and "Stages and methods".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory import stages as memory_stages
from cfgopt.memory.base import MODULES, layer_params, module_dims
from cfgopt.memory.config_values import get, integer_at, split_names
from cfgopt.text.user_text import is_number

LORA_DROPOUT_BYTES = 1  # per input feature of each adapted linear (measured +9.4 GiB at 8192 tokens, §5.3)
OFT_INPUT_BYTES = 2  # per input feature of each adapted linear: the rotated input (not measured)


def _targets(value: Any, notes: list[str], what: str) -> set[str]:
    names = split_names(value)
    if not names or any(n.lower() == "all" for n in names):
        return set(MODULES)
    known = {n for n in names if n in MODULES}
    if len(known) < len(names):
        notes.append(f"{what}: {', '.join(sorted(set(names) - known))} not modelled (counted as all linears)")
        return set(MODULES)
    return known


@dataclass
class Method:
    """What the fine-tuning method trains."""

    trained: set[str]
    trainable: int
    extra_per_layer: float = 0.0  # activation bytes per token and layer beyond the linears' inputs
    first_active: int = 0  # first layer that keeps activations without checkpointing (freeze)
    lm_head_trained: bool = False
    layers_trained: int = 0  # freeze: how many decoder layers train
    embedding_trained: bool = False  # freeze_extra_modules: embed_tokens (the largest trained parameter)
    dora_norm: float = 0.0  # DoRA: the weight norm's transient bytes (largest adapted linear)


def method_of(config: dict[str, Any], shape: ModelShape, ftype: str, notes: list[str]) -> Method:
    dims = module_dims(shape)
    L, V, h = shape.num_hidden_layers, shape.vocab_size, shape.hidden_size
    if ftype == "lora":
        trained = _targets(get(config, "lora_target"), notes, "lora_target")
        rank = integer_at(config, "lora_rank") or 8
        method = Method(trained, L * sum(rank * (dims[m][0] + dims[m][1]) for m in trained))
        dropout = get(config, "lora_dropout")
        if is_number(dropout) and dropout > 0:
            method.extra_per_layer += LORA_DROPOUT_BYTES * sum(dims[m][0] for m in trained)
        extra_modules = [m for m in split_names(get(config, "additional_target")) if m in ("embed_tokens", "lm_head")]
        method.trainable += V * h * len(extra_modules)
        method.lm_head_trained = bool(extra_modules)
        if get(config, "use_dora") is True:
            dora = memory_stages.dora_extras(shape, trained)
            method.trainable += dora.trainable
            method.extra_per_layer += dora.bytes_per_layer
            method.dora_norm = dora.norm_bytes
        return method
    if ftype == "oft":
        trained = _targets(get(config, "oft_target"), notes, "oft_target")
        block, rank = integer_at(config, "oft_block_size") or 0, integer_at(config, "oft_rank") or 0
        trainable = 0
        for m in trained:
            fan_in = dims[m][0]
            b = block if block > 0 else max(1, fan_in // max(1, rank))
            trainable += L * fan_in * (b - 1) // 2
        notes.append("OFT: activation cost of the rotation not measured (counted as one input copy)")
        return Method(trained, trainable, extra_per_layer=OFT_INPUT_BYTES * sum(dims[m][0] for m in trained))
    if ftype == "freeze":
        return _freeze_method(config, shape, notes)
    return Method(set(MODULES), shape.num_parameters, lm_head_trained=True)  # full


_FREEZE_GROUPS = {"self_attn": MODULES[:4], "mlp": MODULES[4:]}


def _freeze_method(config: dict[str, Any], shape: ModelShape, notes: list[str]) -> Method:
    """Freeze tuning (llamafactory 0.9.5 model/adapter.py _setup_freeze_tuning): `freeze_trainable_layers` n > 0
    trains the last n layers, n < 0 the first |n|; within them `freeze_trainable_modules` (`all`, or sub-modules:
    `self_attn`, `mlp`, the norms); `freeze_extra_modules` adds modules outside the layers (`embed_tokens`,
    `lm_head`, `norm`)."""
    dims, L = module_dims(shape), shape.num_hidden_layers
    freeze_n = integer_at(config, "freeze_trainable_layers")
    freeze_n = 2 if freeze_n is None else freeze_n
    count = min(abs(freeze_n), L)
    modules = split_names(get(config, "freeze_trainable_modules")) or ["all"]
    if any(m.lower() == "all" for m in modules):
        trained, per_layer = set(MODULES), layer_params(shape)
    else:
        trained = {m for group, names in _FREEZE_GROUPS.items() if group in modules for m in names}
        norms = sum(1 for m in modules if m.endswith("norm") or m.endswith("layernorm"))
        per_layer = sum(a * b for m, (a, b) in dims.items() if m in trained) + norms * shape.hidden_size
    extra = set(split_names(get(config, "freeze_extra_modules")))
    embedding, tied = shape.vocab_size * shape.hidden_size, shape.tie_word_embeddings
    extra_params = embedding * ("embed_tokens" in extra) + embedding * ("lm_head" in extra and not tied)
    extra_params += shape.hidden_size * ("norm" in extra)
    unknown = extra - {"embed_tokens", "lm_head", "norm"}
    if unknown:
        notes.append(f"freeze_extra_modules: {', '.join(sorted(unknown))} not counted")
    embed_trains = "embed_tokens" in extra
    return Method(
        trained,
        count * per_layer + extra_params,
        # the backward reaches the embedding when it trains, so no frozen prefix can drop its activations
        first_active=L - count if freeze_n > 0 and not embed_trains else 0,
        lm_head_trained="lm_head" in extra or (embed_trains and tied),
        layers_trained=count,
        embedding_trained=embed_trains,
    )


def largest_trainable(shape: ModelShape, method: Method, ftype: str) -> int:
    """Elements of the largest trained parameter: the embedding or lm_head when they train, else one layer's
    largest linear (freeze), else 0 (adapters are small next to the step's other buffers)."""
    if method.lm_head_trained or method.embedding_trained:
        return shape.vocab_size * shape.hidden_size
    if ftype == "freeze":
        return max(a * b for a, b in module_dims(shape).values())
    return 0
