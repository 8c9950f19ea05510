"""What the fine-tuning method trains (`Method`): the trained linears and the trainable parameters of LoRA (with
DoRA's magnitudes, `cfgopt.memory.stages`), OFT, freeze and full fine-tuning, the activation bytes per layer an
adapter adds (`LORA_DROPOUT_BYTES`, `OFT_INPUT_BYTES`), and which layers, embedding and head train.
docs/memory.md, "Model states" (the trainable counts) and "Stages and methods".
"""

from __future__ import annotations

from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory import stages as memory_stages
from cfgopt.memory.base import MODULES, fused_experts, layer_params, linear_modules, module_dims
from cfgopt.memory.config_values import get, integer_at, split_names
from cfgopt.text.record import MutableRecord
from cfgopt.text.user_text import is_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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


class Method(MutableRecord):
    """What the fine-tuning method trains. A `MutableRecord`: a dataclass's `__init__` written out, its `__repr__`
    and `__eq__` over `FIELDS`, without importing `dataclasses`."""

    FIELDS = (
        *("trained", "trainable", "extra_per_layer", "first_active", "lm_head_trained", "layers_trained"),
        *("embedding_trained", "dora_norm"),
    )

    def __init__(
        self,
        trained: set[str],
        trainable: int,
        extra_per_layer: float = 0.0,  # activation bytes per token and layer beyond the linears' inputs
        first_active: int = 0,  # first layer that keeps activations without checkpointing (freeze)
        lm_head_trained: bool = False,
        layers_trained: int = 0,  # freeze: how many decoder layers train
        embedding_trained: bool = False,  # freeze_extra_modules: embed_tokens (the largest trained parameter)
        dora_norm: float = 0.0,  # DoRA: the weight norm's transient bytes (largest adapted linear)
    ) -> None:
        self.trained = trained
        self.trainable = trainable
        self.extra_per_layer = extra_per_layer
        self.first_active = first_active
        self.lm_head_trained = lm_head_trained
        self.layers_trained = layers_trained
        self.embedding_trained = embedding_trained
        self.dora_norm = dora_norm


def method_of(config: dict[str, Any], shape: ModelShape, ftype: str, notes: list[str]) -> Method:
    dims, linears = module_dims(shape), linear_modules(shape)
    V, h = shape.vocab_size, shape.hidden_size
    if ftype == "lora":
        trained = _targets(get(config, "lora_target"), notes, "lora_target")
        rank = integer_at(config, "lora_rank") or 8
        method = Method(trained, sum(c * rank * (a + b) for m in trained for c, a, b in linears[m]))
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
            for count, fan_in, _ in linears[m]:
                b = block if block > 0 else max(1, fan_in // max(1, rank))
                trainable += count * fan_in * (b - 1) // 2
        notes.append("OFT: activation cost of the rotation not measured (counted as one input copy)")
        return Method(trained, trainable, extra_per_layer=OFT_INPUT_BYTES * sum(dims[m][0] for m in trained))
    if ftype == "freeze":
        return _freeze_method(config, shape, notes)
    return Method(set(MODULES), shape.num_parameters - frozen_towers(config, shape), lm_head_trained=True)  # full


def frozen_towers(config: dict[str, Any], shape: ModelShape) -> int:
    """A multimodal model's vision tower and projector that full fine-tuning leaves frozen: LLaMA-Factory freezes
    both by default (`freeze_vision_tower`, `freeze_multi_modal_projector`; model/model_utils/visual.py)."""
    if not (shape.vision_tower or shape.vision_projector):
        return 0  # no key read: a text model's estimate depends on none of them
    tower = shape.vision_tower if get(config, "freeze_vision_tower") is not False else 0
    return tower + (shape.vision_projector if get(config, "freeze_multi_modal_projector") is not False else 0)


_FREEZE_GROUPS = {"self_attn": MODULES[:4], "mlp": MODULES[4:]}


def _freeze_method(config: dict[str, Any], shape: ModelShape, notes: list[str]) -> Method:
    """Freeze tuning (llamafactory 0.9.5 model/adapter.py _setup_freeze_tuning): `freeze_trainable_layers` n > 0
    trains the last n layers, n < 0 the first |n|; within them `freeze_trainable_modules` (`all`, or sub-modules:
    `self_attn`, `mlp`, the norms); `freeze_extra_modules` adds modules outside the layers (`embed_tokens`,
    `lm_head`, `norm`)."""
    L = shape.num_hidden_layers
    freeze_n = integer_at(config, "freeze_trainable_layers")
    freeze_n = 2 if freeze_n is None else freeze_n
    count = min(abs(freeze_n), L)
    modules = split_names(get(config, "freeze_trainable_modules")) or ["all"]
    if any(m.lower() == "all" for m in modules):
        trained, per_layer = set(MODULES), layer_params(shape)
    else:
        trained = {m for group, names in _FREEZE_GROUPS.items() if group in modules for m in names}
        norms = sum(1 for m in modules if m.endswith("norm") or m.endswith("layernorm"))
        per_layer = _group_params(shape, trained) // L + norms * shape.hidden_size
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


def _group_params(shape: ModelShape, trained: set[str]) -> int:
    """Parameters of the `trained` linears over all layers; with the MLP, a sparse layer's routed experts and
    router as well (freeze tuning trains every parameter under `mlp`)."""
    linears = linear_modules(shape)
    total = sum(c * a * b for m in trained for c, a, b in linears[m])
    if "gate_proj" in trained and shape.is_moe:
        h = shape.hidden_size
        total += shape.sparse_layers * (shape.expert_parameters + shape.num_experts * h + shape.sparse_layer_extra)
    return total


def largest_trainable(shape: ModelShape, method: Method, ftype: str) -> int:
    """Elements of the largest trained parameter: the embedding or lm_head when they train, else one layer's
    largest linear (freeze), else 0 (adapters are small next to the step's other buffers). A trained mixture of
    experts' fused `gate_up_proj` can be larger than either (DeepSeek-V3: 7.5B elements)."""
    experts = fused_experts(shape) if ftype in ("full", "freeze") and "gate_proj" in method.trained else 0
    if method.lm_head_trained or method.embedding_trained:
        return max(shape.vocab_size * shape.hidden_size, experts)
    if ftype == "freeze":
        return max(experts, *(a * b for linears in linear_modules(shape).values() for _, a, b in linears))
    return 0
