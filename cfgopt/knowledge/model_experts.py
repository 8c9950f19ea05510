"""The experts of a mixture-of-experts (MoE) model, read from its config.json as transformers 5.6 builds the model.

`experts_of(data, model_type, layers)` says how many experts a sparse layer holds (`num_experts`) and how many a
token passes through (`experts_per_token`), each expert's FFN width, the shared experts' width, how many layers are
sparse (the others keep the dense MLP), and the small parameters beside them (router bias, expert biases, the
shared expert's gate). `model_shapes` puts the result in its `ModelShape`, which counts every expert.

Each family's layout is transformers 5.6's (models/<family>/modeling_<family>.py: the decoder layer's choice of
MLP and the sparse block's `__init__`); tests/knowledge/test_model_experts.py builds each family on the meta device
and compares the counts. Pure facts: nothing is read here.

A config.json that declares experts (`EXPERT_COUNT_KEYS`) of a family not listed in `FAMILIES` is not modelled
(`experts_of` gives None): hybrid attention (Qwen3-Next, Qwen3.5, Jamba, MiniMax, Granite 4 hybrid, LFM2),
attention experts (JetMoE) and the rest are not counted as a dense decoder, which would leave their experts out.
"""

from __future__ import annotations

from cfgopt.text.record import Record
from cfgopt.text.user_text import is_int, positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The keys that give a sparse layer's number of routed experts, by family (transformers' config classes map
# them onto one another: `attribute_map`); a config.json with one above 0 is a mixture of experts.
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "moe_k", "experts_per_token")  # gpt-oss writes the last
_MOST = 2**31 - 1  # as model_shapes.MAX_DIMENSION: the products of dimensions stay within the float range


class Experts(Record):
    """What the experts of a mixture-of-experts model add to a dense decoder's count."""

    num_experts: int  # routed experts per sparse layer
    experts_per_token: int  # top-k: the routed experts each token passes through
    expert_intermediate_size: int  # each routed expert's SwiGLU width
    shared_intermediate_size: int  # the shared expert(s) of a sparse layer, together (0: none)
    sparse_layers: int  # layers whose MLP is the experts; the others keep the dense MLP
    sparse_layer_extra: int  # per sparse layer beyond the SwiGLU weights and the router's E x h
    dense_intermediate_size: int  # the dense layers' MLP width (Llama 4 names it `intermediate_size_mlp`)


class _Family(Record):
    """One family's layout in transformers 5.6."""

    sparse: str  # which layers are sparse: "all", "qwen", "first_k", "ernie", "llama4" (`_sparse_layers`)
    width: str  # the key of each routed expert's FFN width
    top_k: int  # the config class's default experts per token, where config.json does not say
    shared: str = ""  # the key of the shared experts' width, or of their count (`shared_count`)
    shared_count: bool = False  # `shared` counts experts of `width` each (DeepSeek's n_shared_experts)
    first_k: int = 0  # "first_k": the config class's default first_k_dense_replace


FAMILIES: dict[str, _Family] = {
    # MixtralSparseMoeBlock: every layer, experts of intermediate_size (granitemoe, phimoe, olmoe alike)
    "mixtral": _Family("all", "intermediate_size", 2),
    "phimoe": _Family("all", "intermediate_size", 2),
    "granitemoe": _Family("all", "intermediate_size", 2),
    "granitemoeshared": _Family("all", "intermediate_size", 2, shared="shared_intermediate_size"),
    "olmoe": _Family("all", "intermediate_size", 8),
    "gpt_oss": _Family("all", "intermediate_size", 4),
    # Qwen2MoeDecoderLayer: sparse unless in mlp_only_layers, every decoder_sparse_step-th layer
    "qwen2_moe": _Family("qwen", "moe_intermediate_size", 4, shared="shared_expert_intermediate_size"),
    "qwen3_moe": _Family("qwen", "moe_intermediate_size", 8),
    "qwen3_vl_moe": _Family("qwen", "moe_intermediate_size", 8),
    # DeepseekV3DecoderLayer: sparse from layer first_k_dense_replace on, n_shared_experts of the experts' width
    "deepseek_v2": _Family("first_k", "moe_intermediate_size", 6, "n_shared_experts", True, first_k=0),
    "deepseek_v3": _Family("first_k", "moe_intermediate_size", 8, "n_shared_experts", True, first_k=3),
    "glm4_moe": _Family("first_k", "moe_intermediate_size", 8, "n_shared_experts", True, first_k=1),
    # Ernie4_5_MoeDecoderLayer: every moe_layer_interval-th layer from moe_layer_start_index to moe_layer_end_index
    "ernie4_5_moe": _Family("ernie", "moe_intermediate_size", 6, "moe_num_shared_experts", True),
    # Llama4TextDecoderLayer: the layers in moe_layers (every interleave_moe_layer_step-th), one shared expert
    "llama4": _Family("llama4", "intermediate_size", 1, shared="intermediate_size"),
}


# Families whose experts transformers 4 already held as fused 3-D parameters (GptOssExperts, Llama4TextExperts,
# GraniteMoeParallelExperts, 4.57's Qwen3VLMoeTextExperts); the others were one Linear per expert until 5.0.
FUSED_BEFORE_5 = frozenset({"gpt_oss", "llama4", "granitemoe", "granitemoeshared", "qwen3_vl_moe"})


def family_of(model_type: str) -> str:
    """The family key of a (text) model_type: `qwen3_vl_moe_text` is qwen3_vl_moe, `llama4_text` llama4."""
    return model_type.removesuffix("_text")


def declares_experts(data: dict[str, Any]) -> bool:
    """Does this config.json give a sparse layer routed experts?"""
    return any(positive_int(data.get(key)) for key in EXPERT_COUNT_KEYS)


def experts_of(data: dict[str, Any], model_type: str, layers: int) -> Experts | None:
    """The experts of a config.json that declares them (`declares_experts`), or None where its family's layout is
    not modelled or a value it needs is not a usable integer."""
    family = FAMILIES.get(family_of(model_type))
    if family is None:
        return None
    count = next((data[k] for k in EXPERT_COUNT_KEYS if positive_int(data.get(k), _MOST)), None)
    width = positive_int(data.get(family.width), _MOST)
    top_k = next((data[k] for k in _TOP_K_KEYS if k in data), family.top_k)
    shared = _shared_width(data, family, width)
    sparse = _sparse_layers(data, family, layers)
    if count is None or width is None or positive_int(top_k, count) is None or shared is None or sparse is None:
        return None
    dense = data.get("intermediate_size_mlp") if family.sparse == "llama4" else data.get("intermediate_size")
    if positive_int(dense, _MOST) is None:
        return None
    extra = _sparse_extra(family_of(model_type), count, width, shared, positive_int(data.get("hidden_size")) or 0)
    return Experts(count, top_k, width, shared, sparse, extra, dense)


def _shared_width(data: dict[str, Any], family: _Family, width: int | None) -> int | None:
    """The shared experts' width together: 0 without them, None where the value is not a usable integer."""
    if not family.shared:
        return 0
    value = data.get(family.shared)
    if value is None or value == 0:  # DeepSeek-V2's configs write `n_shared_experts: null` for none
        return 0
    if positive_int(value, _MOST) is None or width is None:
        return None
    return value * width if family.shared_count else value


def _sparse_layers(data: dict[str, Any], family: _Family, layers: int) -> int | None:
    """How many of the `layers` decoder layers are sparse (transformers 5.6's decoder layer's test)."""
    if family.sparse == "all":
        return layers
    if family.sparse == "first_k":
        first = data.get("first_k_dense_replace", family.first_k)
        return max(0, layers - first) if is_int(first) and first >= 0 else None
    if family.sparse == "qwen":
        step, only = data.get("decoder_sparse_step", 1), data.get("mlp_only_layers") or []
        if positive_int(step) is None or not isinstance(only, list) or not all(is_int(i) for i in only):
            return None
        return sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
    if family.sparse == "ernie":
        start, end = data.get("moe_layer_start_index", 1), data.get("moe_layer_end_index", -1)
        interval = data.get("moe_layer_interval", 1)
        if not (is_int(start) and is_int(end) and positive_int(interval)):
            return None
        end = layers - 1 if end == -1 else end
        return sum(1 for i in range(layers) if (i + 1) % interval == 0 and start <= i <= end)
    return _llama4_sparse_layers(data, layers)


def _llama4_sparse_layers(data: dict[str, Any], layers: int) -> int | None:
    """Llama 4: the layers in `moe_layers`, else every `interleave_moe_layer_step`-th (configuration_llama4.py)."""
    listed = data.get("moe_layers")
    if isinstance(listed, list):
        return len({i for i in listed if is_int(i) and 0 <= i < layers})
    step = data.get("interleave_moe_layer_step", 1)
    return len(range(step - 1, layers, step)) if positive_int(step) else None


def _sparse_extra(family: str, experts: int, width: int, shared: int, h: int) -> int:
    """Parameters of a sparse layer beyond the SwiGLU weights and the router's E x h (transformers 5.6)."""
    if family == "gpt_oss":  # GptOssTopKRouter.bias, GptOssExperts.gate_up_proj_bias and down_proj_bias
        return experts + experts * expert_biases(family, width, h)
    if family == "qwen2_moe" and shared:  # Qwen2MoeSparseMoeBlock.shared_expert_gate: Linear(h, 1)
        return h
    if family == "ernie4_5_moe":  # Ernie4_5_MoeStatics.e_score_correction_bias, a (1, E) parameter
        return experts
    return 0


def expert_biases(family: str, width: int, h: int) -> int:
    """One routed expert's biases beside its SwiGLU weights: gpt-oss's gate_up_proj_bias (2I) and down_proj_bias
    (h); the other families have none."""
    return 2 * width + h if family == "gpt_oss" else 0


def sparse_layers_last(model_type: str) -> bool:
    """Are the family's sparse layers its last ones (every layer, or those from `first_k_dense_replace` on), so that
    a count of them says which they are?"""
    family = FAMILIES.get(family_of(model_type))
    return family is not None and family.sparse in ("all", "first_k")


# The decoder layer's attribute that holds the experts (transformers 5.6), where it is not `mlp`: what
# LLaMA-Factory's `freeze_trainable_modules` names to train them.
_MOE_BLOCKS = {"llama4": "feed_forward", "granitemoe": "block_sparse_moe", "granitemoeshared": "block_sparse_moe"}


def moe_block(model_type: str) -> str:
    """The name of the decoder layer's module that holds a family's experts: `mlp`, Llama 4's `feed_forward`."""
    return _MOE_BLOCKS.get(family_of(model_type), "mlp")
