"""Model shapes for the memory reasoning of the speed rules, without loading anything heavy.

`shape_for(model_name_or_path, local)` takes the shape from a local model folder's `config.json` where one was
read (`local`: read by `cfgopt/loaders/model_config.py`, for a job once, `Job.local_model`; nothing is read here),
else matches a built-in table of common decoder-only families by the path component that names the model,
case-insensitively (`meta-llama/Meta-Llama-3-8B-Instruct` -> Llama-3-8B, and so is
`/ckpt/Meta-Llama-3-8B-Instruct/checkpoint-500`). Unknown models give None, and the rules that need a size stay
silent.

`num_parameters` counts embeddings (twice when untied), per layer the attention projections (GQA, with
biases and q/k norms where the family has them; DeepSeek's multi-head latent attention as its own projections),
the SwiGLU MLP (3 matrices) and the RMSNorm weights, and the final norm. It reproduces the published counts
(Llama-3-8B: 8,030,261,248). A mixture-of-experts model's sparse layers count every routed expert, the shared
experts and the router (`cfgopt/knowledge/model_experts.py`: Mixtral-8x7B 46.7B, Qwen3-30B-A3B 30.5B, DeepSeek-V3
671B); a Qwen2-VL / Qwen2.5-VL config.json adds its vision tower (`cfgopt/knowledge/vision_towers.py`). What a
config.json has that the count leaves out is named in `uncounted` (another family's vision tower), and a config
that declares experts of a family `model_experts` does not know gives no shape: its count would leave the experts
out. tests/knowledge/test_model_experts.py checks the counts against the models transformers builds.
"""

from __future__ import annotations

import re

from cfgopt.knowledge.model_family import LocalModel, naming_component
from cfgopt.text.record import Record
from cfgopt.text.user_text import positive_int


class ModelShape(Record):  # not a dataclass: `dataclasses` imports `inspect`, 3-5 ms of a lint run
    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    head_dim: int | None = None  # None: hidden_size // num_attention_heads
    qkv_bias: bool = False  # Qwen2 / Qwen2.5
    qk_norm: bool = False  # Qwen3: RMSNorm over q and k per head
    norms_per_layer: int = 2  # Gemma 2 has four (pre/post attention and MLP)
    norm_bias: bool = False  # LayerNorm with a bias (PhiMoE), not RMSNorm
    logit_softcapping: bool = False  # Gemma 2: tanh soft-capping of the final logits (an extra copy in the loss)
    model_type: str = ""  # transformers' model_type where known ("" for the built-in table's llama-like rows)
    # Mixture of experts (`model_experts.Experts`; 0: a dense model). `intermediate_size` is the dense layers' MLP.
    num_experts: int = 0  # routed experts per sparse layer
    experts_per_token: int = 0  # top-k
    expert_intermediate_size: int = 0  # each routed expert's SwiGLU width
    shared_intermediate_size: int = 0  # the shared experts of a sparse layer, together
    sparse_layers: int = 0  # layers whose MLP is the experts
    sparse_layer_extra: int = 0  # per sparse layer beyond the SwiGLU weights and the router: biases, gates
    layer_extra: int = 0  # per layer beyond the modelled attention and norms (gpt-oss sinks and o_proj bias, ...)
    # DeepSeek's multi-head latent attention: (q_lora_rank (0: none), kv_lora_rank, qk_nope_head_dim,
    # qk_rope_head_dim, v_head_dim); head_dim is then q's and k's head size (qk_nope + qk_rope)
    latent_attention: tuple[int, ...] = ()
    vision_tower: int = 0  # a multimodal model's vision blocks and patch embedding (`vision_towers`)
    vision_projector: int = 0  # its merger into the language model
    uncounted: tuple[str, ...] = ()  # what the config.json has that the count leaves out, for the estimate's notes

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.sparse_layers > 0

    @property
    def attention_parameters(self) -> int:
        """One layer's attention: projections, their biases, q/k norms."""
        h, d = self.hidden_size, self.head_size
        if self.latent_attention:
            return _latent_attention_parameters(h, self.num_attention_heads, self.latent_attention)
        q_dim, kv_dim = self.num_attention_heads * d, self.num_key_value_heads * d
        attention = h * q_dim + 2 * h * kv_dim + q_dim * h
        if self.qkv_bias:
            attention += q_dim + 2 * kv_dim
        if self.qk_norm:
            attention += 2 * d
        return attention

    @property
    def expert_parameters(self) -> int:
        """One sparse layer's routed experts (SwiGLU each): transformers 5.6 holds them as two 3-D parameters."""
        return self.num_experts * 3 * self.hidden_size * self.expert_intermediate_size

    @property
    def sparse_mlp_parameters(self) -> int:
        """One sparse layer's MLP: the routed experts, the shared experts, the router (E x h) and the extras."""
        h = self.hidden_size
        shared = 3 * h * self.shared_intermediate_size
        return self.expert_parameters + shared + self.num_experts * h + self.sparse_layer_extra

    @property
    def mlp_parameters(self) -> int:
        """Every layer's MLP together: the dense layers' SwiGLU and the sparse layers' experts."""
        dense = (self.num_hidden_layers - self.sparse_layers) * 3 * self.hidden_size * self.intermediate_size
        return dense + self.sparse_layers * self.sparse_mlp_parameters

    @property
    def active_intermediate_size(self) -> int:
        """The MLP width one token passes through: the dense MLP's, or in a sparse layer its top-k experts' and
        the shared experts' together (the wider of the two where a model has both kinds of layer)."""
        if not self.is_moe:
            return self.intermediate_size
        sparse = self.experts_per_token * self.expert_intermediate_size + self.shared_intermediate_size
        dense = self.intermediate_size if self.sparse_layers < self.num_hidden_layers else 0
        return max(sparse, dense)

    @property
    def active_parameters(self) -> int:
        """The parameters one token passes through: all but the routed experts its router passed over (E - k of
        each sparse layer's E, with their biases); the router, the shared experts, attention, norms and embeddings
        count whole. A dense model's `num_parameters`. `cfgopt verify`'s MFU counts its FLOPs from it."""
        from cfgopt.knowledge import model_experts  # here, not at import: a lint of a model known by name needs it not

        if not self.is_moe:
            return self.num_parameters
        h, width = self.hidden_size, self.expert_intermediate_size
        one = 3 * h * width + model_experts.expert_biases(model_experts.family_of(self.model_type), width, h)
        return self.num_parameters - self.sparse_layers * (self.num_experts - self.experts_per_token) * one

    @property
    def num_parameters(self) -> int:
        h = self.hidden_size
        norm = h * (2 if self.norm_bias else 1)
        layer = self.attention_parameters + self.norms_per_layer * norm + self.layer_extra
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        vision = self.vision_tower + self.vision_projector
        return embeddings + self.num_hidden_layers * layer + self.mlp_parameters + norm + vision


def largest_parameter(shape: ModelShape, experts_fused: bool = True) -> tuple[int, str]:
    """The most elements of one parameter tensor, and which it is: the embedding (an untied lm_head is as large), a
    dense layer's MLP projection, an attention projection, a mixture of experts' fused `gate_up_proj` (E x 2I x h:
    transformers 5's layout; `experts_fused` False: one expert's own linear, I x h, as transformers 4 built most
    families, `model_experts.FUSED_BEFORE_5`) or its shared experts' projection. DeepSpeed's ZeRO-3 partitions and
    swaps each parameter whole (XF006)."""
    h = shape.hidden_size
    found = [(shape.vocab_size * h, "the embedding"), _largest_attention(shape)]
    if shape.sparse_layers < shape.num_hidden_layers:  # a dense layer's SwiGLU
        found.append((shape.intermediate_size * h, "an MLP projection"))
    if shape.is_moe:
        E, width = shape.num_experts, shape.expert_intermediate_size
        if experts_fused:
            found.append((E * 2 * width * h, f"the experts' fused gate_up_proj ({E} x {2 * width} x {h})"))
        else:
            found.append((width * h, "an expert's projection"))
        found.append((shape.shared_intermediate_size * h, "the shared experts' projection"))
    return max(found, key=lambda item: item[0])


def _largest_attention(shape: ModelShape) -> tuple[int, str]:
    """One layer's largest attention projection: q_proj (o_proj is as large), or DeepSeek's latent projections."""
    h, heads = shape.hidden_size, shape.num_attention_heads
    if not shape.latent_attention:
        return heads * shape.head_size * h, "an attention projection"
    q_rank, kv_rank, nope, rope, v = shape.latent_attention
    q = (h * q_rank, q_rank * heads * (nope + rope)) if q_rank else (h * heads * (nope + rope),)
    return max(*q, h * (kv_rank + rope), kv_rank * heads * (nope + v), heads * v * h), "an attention projection"


def _latent_attention_parameters(h: int, heads: int, mla: tuple[int, ...]) -> int:
    """DeepSeek-V2/V3's attention (transformers 5.6 DeepseekV3Attention): q through a low-rank q_a_proj, its norm
    and q_b_proj (or one q_proj), kv_a_proj_with_mqa (the latent and the shared rope key), its norm, kv_b_proj
    (keys and values of every head) and o_proj."""
    q_rank, kv_rank, nope, rope, v = mla
    q = h * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
    kv = h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
    return q + kv + heads * v * h


def _s(name: str, h: int, i: int, layers: int, heads: int, kv: int, vocab: int, tied: bool, **kw) -> ModelShape:
    return ModelShape(name, h, i, layers, heads, kv, vocab, tied, **kw)


# (pattern over the lower-cased id, shape). Values from each model's config.json on the Hugging Face Hub.
_QWEN25 = {"qkv_bias": True, "model_type": "qwen2"}
_QWEN3 = {"head_dim": 128, "qk_norm": True, "model_type": "qwen3"}
_LLAMA = {"model_type": "llama"}
_MISTRAL = {"model_type": "mistral"}
_GEMMA2 = {"norms_per_layer": 4, "logit_softcapping": True, "model_type": "gemma2"}
_TABLE: tuple[tuple[str, ModelShape], ...] = tuple(  # patterns as text: `shape_for` compiles the one it tries
    (p, s)
    for p, s in (
        (r"llama-?3(\.[01])?-8b", _s("Llama-3-8B", 4096, 14336, 32, 32, 8, 128256, False, **_LLAMA)),
        (r"llama-?3(\.[013])?-70b", _s("Llama-3-70B", 8192, 28672, 80, 64, 8, 128256, False, **_LLAMA)),
        (r"llama-?3\.2-1b", _s("Llama-3.2-1B", 2048, 8192, 16, 32, 8, 128256, True, head_dim=64, **_LLAMA)),
        (r"llama-?3\.2-3b", _s("Llama-3.2-3B", 3072, 8192, 28, 24, 8, 128256, True, head_dim=128, **_LLAMA)),
        (r"qwen2\.5-0\.5b", _s("Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 151936, True, **_QWEN25)),
        (r"qwen2\.5-1\.5b", _s("Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 151936, True, **_QWEN25)),
        (r"qwen2\.5-3b", _s("Qwen2.5-3B", 2048, 11008, 36, 16, 2, 151936, True, **_QWEN25)),
        (r"qwen2\.5-7b", _s("Qwen2.5-7B", 3584, 18944, 28, 28, 4, 152064, False, **_QWEN25)),
        (r"qwen2\.5-14b", _s("Qwen2.5-14B", 5120, 13824, 48, 40, 8, 152064, False, **_QWEN25)),
        (r"qwen2\.5-32b", _s("Qwen2.5-32B", 5120, 27648, 64, 40, 8, 152064, False, **_QWEN25)),
        (r"qwen2\.5-72b", _s("Qwen2.5-72B", 8192, 29568, 80, 64, 8, 152064, False, **_QWEN25)),
        (r"qwen3-0\.6b", _s("Qwen3-0.6B", 1024, 3072, 28, 16, 8, 151936, True, **_QWEN3)),
        (r"qwen3-1\.7b", _s("Qwen3-1.7B", 2048, 6144, 28, 16, 8, 151936, True, **_QWEN3)),
        (r"qwen3-4b", _s("Qwen3-4B", 2560, 9728, 36, 32, 8, 151936, True, **_QWEN3)),
        (r"qwen3-8b", _s("Qwen3-8B", 4096, 12288, 36, 32, 8, 151936, False, **_QWEN3)),
        (r"qwen3-14b", _s("Qwen3-14B", 5120, 17408, 40, 40, 8, 151936, False, **_QWEN3)),
        (r"qwen3-32b", _s("Qwen3-32B", 5120, 25600, 64, 64, 8, 151936, False, **_QWEN3)),
        (r"mistral-7b-(instruct-)?v0\.3", _s("Mistral-7B-v0.3", 4096, 14336, 32, 32, 8, 32768, False, **_MISTRAL)),
        (r"mistral-7b", _s("Mistral-7B", 4096, 14336, 32, 32, 8, 32000, False, **_MISTRAL)),
        (r"gemma-2-2b", _s("Gemma-2-2B", 2304, 9216, 26, 8, 4, 256000, True, head_dim=256, **_GEMMA2)),
        (r"gemma-2-9b", _s("Gemma-2-9B", 3584, 14336, 42, 16, 8, 256000, True, head_dim=256, **_GEMMA2)),
        (r"gemma-2-27b", _s("Gemma-2-27B", 4608, 36864, 46, 32, 16, 256000, True, head_dim=128, **_GEMMA2)),
    )
)
_WORD_END = r"(?![0-9.])"  # `qwen3-8b` must not match `qwen3-8b0...`; `-4b` must not match `-4.5b`


def shape_for(model_name_or_path: str, local: LocalModel | None = None) -> ModelShape | None:
    """The shape of the model `model_name_or_path` names: its config.json's where read (`local`), else the
    built-in table's row for its name; None when neither knows it."""
    if not isinstance(model_name_or_path, str) or not model_name_or_path.strip():
        return None
    if local is not None:
        return _from_config(local.config, local.folder.name)
    name, _ = naming_component(model_name_or_path)  # `/ckpt/Qwen3-8B/checkpoint-500` is Qwen3-8B
    for pattern, shape in _TABLE:
        if re.search(r"(?:^|[^a-z0-9])" + pattern + _WORD_END, name):
            return shape
    return None


def language_config(data: dict) -> dict:
    """The language model's keys of a config.json: a composite model's `text_config` where the top level has no
    `hidden_size` (Qwen2.5-VL keeps them at the top, Qwen3-VL-MoE and Llama 4 in `text_config`)."""
    if "hidden_size" not in data and isinstance(data.get("text_config"), dict):
        return data["text_config"]
    return data


def uncountable(local: LocalModel) -> str:
    """Why a local config.json gives no shape, in words: experts of a family not modelled, or dimensions missing."""
    from cfgopt.knowledge import model_experts  # here, not at import: a lint of a model known by name needs it not

    data = language_config(local.config)
    if model_experts.declares_experts(data):
        family = model_experts.family_of(str(data.get("model_type", "") or local.config.get("model_type", "")))
        if family not in model_experts.FAMILIES:
            named = repr(family) if family else "an unnamed family"
            return f"its config.json declares experts of {named}, whose layout cfgopt does not count"
        return "its config.json gives experts cfgopt cannot count (a value that is not a usable integer)"
    return "its config.json lacks a dimension cfgopt counts (hidden_size, intermediate_size, num_hidden_layers, ...)"


# A dimension beyond this is no model (a config.json with `1e400` or a 400-digit integer): the memory model's
# products of dimensions must stay within the float range.
MAX_DIMENSION = 2**31 - 1


def _dimension(value: object) -> bool:
    """A positive integer (not a bool) up to MAX_DIMENSION."""
    return positive_int(value, MAX_DIMENSION) is not None


# Families whose q/k/v projections have biases without saying so in config.json (transformers 5.6: Qwen2's
# attention_bias default, Qwen2-MoE's qkv_bias default, gpt-oss's attention_bias default, Qwen2-VL's and
# Qwen2.5-VL's `bias=True`).
_QKV_BIAS_TYPES = frozenset(
    {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text", "gpt_oss"}
)
_QKV_BIAS_ALWAYS = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text"})
_LATENT_ATTENTION_TYPES = frozenset({"deepseek_v2", "deepseek_v3"})
_LATENT_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# Parts of a multimodal config.json other than the language model: counted where `vision_towers` knows the
# family, else named in `ModelShape.uncounted`.
_TOWER_KEYS = {"vision_config": "the vision tower", "audio_config": "the audio tower"}


def _from_config(data: object, name: str) -> ModelShape | None:
    from cfgopt.knowledge import model_experts  # here, not at import: a lint of a model known by name needs it not

    if not isinstance(data, dict):
        return None
    top, data = data, language_config(data)
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    values = [data.get(k) for k in keys]
    if not all(_dimension(v) for v in values):
        return None
    h, i, layers, heads, vocab = values
    kv = data.get("num_key_value_heads") or heads
    head_dim = data.get("head_dim")
    model_type = str(data.get("model_type", "") or top.get("model_type", ""))
    shape = ModelShape(
        name=name,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv if _dimension(kv) else heads,
        vocab_size=vocab,
        # a composite model ties by its own config's key (transformers 5.6 `get_expanded_tied_weights_keys` reads
        # `self.config`), not its text_config's
        tie_word_embeddings=bool(top.get("tie_word_embeddings", data.get("tie_word_embeddings", False))),
        head_dim=head_dim if _dimension(head_dim) else None,
        qkv_bias=model_type in _QKV_BIAS_ALWAYS
        or bool(data.get("attention_bias", data.get("qkv_bias", model_type in _QKV_BIAS_TYPES))),
        qk_norm=model_type.startswith("qwen3") or model_type == "olmoe" or _glm_qk_norm(data, model_type),
        norms_per_layer=4 if model_type.startswith("gemma2") or model_type.startswith("gemma3") else 2,
        logit_softcapping=bool(data.get("final_logit_softcapping")),
        model_type=model_type,
    )
    shape = _with_latent_attention(shape, data)
    if shape is not None and model_experts.declares_experts(data):
        shape = _with_experts(shape, data)
    return _with_towers(shape, top) if shape is not None else None


def _glm_qk_norm(data: dict, model_type: str) -> bool:
    """GLM-4.5's q/k RMSNorm per head, where `use_qk_norm` turns it on (transformers 5.6 Glm4MoeAttention)."""
    return model_type == "glm4_moe" and data.get("use_qk_norm") is True


def _with_latent_attention(shape: ModelShape, data: dict) -> ModelShape | None:
    """DeepSeek-V2/V3's multi-head latent attention, or None where a dimension it needs is missing: its q/k head
    size (qk_nope + qk_rope) becomes head_dim, each head its own key and value (what the attention computes)."""
    if shape.model_type not in _LATENT_ATTENTION_TYPES:
        return shape
    dims = [data.get(k) for k in _LATENT_KEYS]
    q_rank = data.get("q_lora_rank") or 0  # DeepSeek-V2-Lite: null, one q_proj
    if not all(_dimension(v) for v in dims) or not (q_rank == 0 or _dimension(q_rank)):
        return None
    kv_rank, nope, rope, v = dims
    mla = (q_rank, kv_rank, nope, rope, v)
    return shape._replace(head_dim=nope + rope, num_key_value_heads=shape.num_attention_heads, latent_attention=mla)


def _with_experts(shape: ModelShape, data: dict) -> ModelShape | None:
    """A mixture-of-experts shape (every expert counted), or None where `model_experts` does not model its
    family: counted as a dense decoder, it would leave the experts out."""
    from cfgopt.knowledge import model_experts  # here, not at import: a lint of a model known by name needs it not

    experts = model_experts.experts_of(data, shape.model_type, shape.num_hidden_layers)
    if experts is None:
        return None
    return shape._replace(
        intermediate_size=experts.dense_intermediate_size,
        num_experts=experts.num_experts,
        experts_per_token=experts.experts_per_token,
        expert_intermediate_size=experts.expert_intermediate_size,
        shared_intermediate_size=experts.shared_intermediate_size,
        sparse_layers=experts.sparse_layers,
        sparse_layer_extra=experts.sparse_layer_extra,
        layer_extra=_layer_extra(shape, data),
        norm_bias=model_experts.family_of(shape.model_type) == "phimoe",  # PhimoeDecoderLayer's LayerNorms
    )


def _layer_extra(shape: ModelShape, data: dict) -> int:
    """Per-layer parameters of a mixture-of-experts family beyond the modelled attention and norms."""
    from cfgopt.knowledge import model_experts  # here, not at import: a lint of a model known by name needs it not

    h, d = shape.hidden_size, shape.head_size
    family = model_experts.family_of(shape.model_type)
    if family == "gpt_oss":  # GptOssAttention: sinks (one per head), o_proj's bias under attention_bias
        return shape.num_attention_heads + (h if data.get("attention_bias", True) else 0)
    if family == "olmoe":  # OlmoeAttention's q/k norms span all heads (q_dim, kv_dim), not one head each
        return (shape.num_attention_heads + shape.num_key_value_heads) * d - 2 * d
    return 0


def _with_towers(shape: ModelShape, top: dict) -> ModelShape:
    """Add the vision tower where `vision_towers` counts it; name the multimodal parts left out of the count."""
    from cfgopt.knowledge import vision_towers  # here, not at import: a lint of a model known by name needs it not

    tower = vision_towers.vision_tower(top, str(top.get("model_type", "")))
    if tower is not None:
        shape = shape._replace(vision_tower=tower.tower, vision_projector=tower.projector)
    counted = {"vision_config"} if tower is not None else set()
    uncounted = tuple(
        what for key, what in _TOWER_KEYS.items() if isinstance(top.get(key), dict) and key not in counted
    )
    return shape._replace(uncounted=uncounted) if uncounted else shape
