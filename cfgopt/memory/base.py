"""The records the memory estimate is made of, and the shape arithmetic its modules share: the `Component` record
and the phases, the decoder's linears (`MODULES`; `module_dims` as a token sees them, `linear_modules` as the model
holds them) and parameter counts, bitsandbytes' bytes per quantized parameter. Below every other module of
`cfgopt.memory`, so none imports another's internals to share them. Pure arithmetic.
"""

from __future__ import annotations

from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GIB = 2**30

# The phases of a training step (docs/memory.md, "Phases"). A component lives through all of them (STATES),
# in some of them (its transients), or on the host (HOST: offloaded, not on the GPU). "rollout" is PPO's
# experience phase (generation with its KV cache, the reward and reference scoring), before its training steps.
STATES = "states"
PHASES = ("loss", "backward", "step", "overflow check", "grad norm", "rollout")
HOST = "host"
ALWAYS_SHOWN = PHASES[:3]  # the moments every run has; the others appear in `phases()` only where they happen

# Bytes per parameter of a bitsandbytes-quantized linear (the quantizer LLaMA-Factory's `quantization_bit` uses by
# default, `quantization_method: bnb`): 4-bit packs two weights a byte plus one fp32 absmax per 64-weight block
# (0.5 + 4/64); double quantization stores that absmax in 8 bits with one fp32 constant per 256 blocks
# (0.5 + 1/64 + 4/(64*256)); LLM.int8 keeps one byte a weight and one fp32 scale per output row (counted 1.0).
# bitsandbytes 0.4x functional.py (quantize_4bit blocksize 64, compress_statistics) and nn/modules.py (Int8Params).
BNB4_BYTES = 0.5 + 4 / 64
BNB4_DOUBLE_QUANT_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)
BNB8_BYTES = 1.0
OTHER_QUANT_OVERHEAD = 0.03  # per parameter beyond bits/8: GPTQ/AWQ group scales and zeros (group 128, 16-bit)


class Component(Record):
    """One part of the peak per GPU: a new knob that costs memory is one more of these."""

    name: str
    gib: float
    counted: str  # how it was counted, for the table
    phases: tuple[str, ...]  # (STATES,): held throughout; else the PHASES it is alive in; (HOST,): offloaded
    source: str = ""  # where its formula comes from (code read, measurement), for docs and the JSON

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gib": self.gib,
            "counted": self.counted,
            "phases": list(self.phases),
            "source": self.source,
        }


MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def module_dims(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each decoder linear as one token sees it: a mixture of experts' MLP as one SwiGLU of
    the width the token passes through (its top-k experts and the shared ones: `active_intermediate_size`)."""
    h, d = shape.hidden_size, shape.head_size
    q, kv, i = shape.num_attention_heads * d, shape.num_key_value_heads * d, shape.active_intermediate_size
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


Linear = tuple[int, int, int]  # (how many in the model, in features, out features)


def linear_modules(shape: ModelShape) -> dict[str, tuple[Linear, ...]]:
    """The decoder's `nn.Linear` modules by name, as transformers 5.6 builds them: what `lora_target` adapts and
    bitsandbytes quantizes. A sparse layer's routed experts are 3-D parameters there, not linears, so only its
    shared experts count (the dense layers keep their MLP); DeepSeek's latent attention files its projections
    under the four attention names (q_a/q_b under q_proj, kv_a under k_proj, kv_b under v_proj)."""
    L, h = shape.num_hidden_layers, shape.hidden_size
    dims = module_dims(shape)
    out = {name: ((L, *dims[name]),) for name in MODULES[:4]}
    if shape.latent_attention:
        out.update(_latent_linears(shape))
    dense, shared = L - shape.sparse_layers, shape.shared_intermediate_size
    for name in MODULES[4:]:
        pair = (h, shape.intermediate_size) if name != "down_proj" else (shape.intermediate_size, h)
        out[name] = ((dense, *pair),) if dense else ()
        if shape.is_moe and shared:
            out[name] += ((shape.sparse_layers, *((h, shared) if name != "down_proj" else (shared, h))),)
    return out


def _latent_linears(shape: ModelShape) -> dict[str, tuple[Linear, ...]]:
    L, h, heads = shape.num_hidden_layers, shape.hidden_size, shape.num_attention_heads
    q_rank, kv_rank, nope, rope, v = shape.latent_attention
    q = ((L, h, q_rank), (L, q_rank, heads * (nope + rope))) if q_rank else ((L, h, heads * (nope + rope)),)
    return {
        "q_proj": q,
        "k_proj": ((L, h, kv_rank + rope),),
        "v_proj": ((L, kv_rank, heads * (nope + v)),),
        "o_proj": ((L, heads * v, h),),
    }


def linear_params(shape: ModelShape) -> int:
    """Parameters of the decoder linears, the ones a quantized base stores in fewer bits."""
    return sum(count * a * b for linears in linear_modules(shape).values() for count, a, b in linears)


def fused_experts(shape: ModelShape) -> int:
    """Elements of a sparse layer's largest parameter: transformers 5.6's `gate_up_proj`, E x 2I x h (0: dense)."""
    return shape.num_experts * 2 * shape.expert_intermediate_size * shape.hidden_size if shape.is_moe else 0


def quantized_bytes_per_param(bits: int, method: str = "bnb", double_quantization: bool = True) -> float:
    """Bytes per parameter of a quantized linear: bitsandbytes' 4- and 8-bit layouts, else bits/8 plus scales."""
    if method == "bnb" and bits == 4:
        return BNB4_DOUBLE_QUANT_BYTES if double_quantization else BNB4_BYTES
    if method == "bnb" and bits == 8:
        return BNB8_BYTES
    return bits / 8 + OTHER_QUANT_OVERHEAD


def model_bytes(shape: ModelShape, bits: int | None, method: str = "bnb", double_quantization: bool = True) -> float:
    """A frozen copy of the model: bf16, or quantized linears with 16-bit embeddings, norms and head
    (bitsandbytes leaves those in 16 bits)."""
    if not bits:
        return 2.0 * shape.num_parameters
    linears = min(linear_params(shape), shape.num_parameters)
    per = quantized_bytes_per_param(bits, method, double_quantization)
    return linears * per + (shape.num_parameters - linears) * 2.0


def layer_params(shape: ModelShape) -> int:
    """One decoder layer's parameters (the mean, where sparse and dense layers differ)."""
    outside = embedding_params(shape) + shape.hidden_size + shape.vision_tower + shape.vision_projector
    return (shape.num_parameters - outside) // shape.num_hidden_layers


def embedding_params(shape: ModelShape) -> int:
    return shape.vocab_size * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)
