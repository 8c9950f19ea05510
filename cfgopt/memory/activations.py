"""What the micro-batch itself costs (`Activity`): the activations one decoder layer keeps per token for the backward
(`layer_activation_bytes`), all layers' or, under gradient checkpointing, the checkpoint inputs and one recomputed
layer; the logits of the loss (Liger's fused loss, Gemma 2's soft-capping, a trained lm_head's gradient); and
eager attention's scores. Bytes unless named otherwise; docs/memory.md, "Activations" and "Logits, attention,
masks", derives each constant.
"""

from __future__ import annotations

import math

from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory import stages as memory_stages
from cfgopt.memory.base import MODULES, module_dims
from cfgopt.memory.config_values import get
from cfgopt.memory.method import Method
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOGITS_BYTES_PER_VOCAB = 12  # per token: bf16 logits, fp32 upcast, log-softmax and gradients (measured, 5 families)
SOFTCAP_BYTES_PER_VOCAB = 2  # per token: Gemma 2's tanh soft-capping keeps its bf16 output (measured 2.2)
LM_HEAD_GRAD_BYTES = 6  # per lm_head parameter when it trains: fp32 gradient + its bf16 matmul result
LM_HEAD_GRAD_BYTES_DS = 2  # DeepSpeed: the bf16 matmul result (the gradient itself lives in ZeRO's partition)
NORM_BYTES = 4  # per normalised element: transformers' RMSNorm keeps its fp32 upcast input
NORM_WEIGHT_GRAD_BYTES = 2  # per normalised element when the norm's weight trains: its bf16 input to `weight *`
LIGER_NORM_BYTES = 2  # per normalised element: Liger's RMSNorm keeps the bf16 input (and a per-row rstd)
SDPA_BYTES = 4  # per (q + kv) element: SDPA keeps q, k, v and its output, bf16
MLP_BYTES = 6  # per intermediate element: act input (gate), act output and up, bf16 (the product: down's input)
LIGER_MLP_BYTES = 4  # per intermediate element: Liger's SwiGLU/GEGLU keeps gate and up only
LINEAR_INPUT_BYTES = 2  # per input feature of a trained linear (adapters: each its own autocast copy)
GC_BOUNDARY_BYTES = 2  # per hidden element per layer: the bf16 layer input a checkpoint keeps
GC_BACKWARD_BYTES = 8  # per intermediate element: gradients alive while one recomputed layer back-propagates
EAGER_SAVED_BYTES = 6  # per score element per layer: fp32 softmax + its bf16 copy (Qwen3-4B eager: 6.3 measured)
# per score element, one layer at a time: the softmax backward's temporaries, with checkpointing the recomputed
# layer's scores among them (fit: the GC-on eager runs of Llama-3-8B and Qwen3-4B full, LoRA 8B; bench/memory)
EAGER_BACKWARD_BYTES = 10
LIGER_CE_BYTES_PER_HIDDEN = 4  # per token: fused linear cross-entropy keeps the input gradient
# A sparse layer (transformers 5.6's routers and experts; read from the code, no MoE run measured): the router's
# bf16 logits and their fp32 softmax, per expert; and where the experts train, per hidden element of each of the
# token's top-k experts its gathered bf16 input and the expert's bf16 output the routing weight multiplies.
ROUTER_BYTES_PER_EXPERT = 6
EXPERT_GATHER_BYTES = 4
# Linear inputs that are saved only when a module reading them trains (frozen linears need no input for backward).
_INPUT_GROUPS = (("q_proj", "k_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",))


def _input_groups_saved(trained: set[str], shared: bool, dims: dict[str, tuple[int, int]]) -> float:
    """Input features kept for the backward of the trained linears. Full/freeze (`shared`): the linears of a
    group (q/k/v, gate/up) read one bf16 tensor, kept once. Adapters: PEFT casts the input to the adapter's
    fp32 dtype and autocast casts it back to bf16 for each adapted linear, so each keeps its own copy."""
    if shared:
        return float(sum(dims[group[0]][0] for group in _INPUT_GROUPS if trained & set(group)))
    return float(sum(dims[m][0] for m in trained))


def layer_activation_bytes(
    shape: ModelShape,
    trained: set[str],
    *,
    liger: bool,
    shared_inputs: bool = False,
    zero3_adapter: bool = False,
    trained_norms: bool = False,
) -> float:
    """Bytes one decoder layer keeps per token for backward (bf16 training, no recomputation), with `trained`
    linears; docs/memory.md derives each term from the transformers / PEFT / Liger code. `trained_norms`
    (full/freeze without Liger): transformers' RMSNorm also keeps its bf16 normalised output for the weight's
    gradient."""
    h, i = shape.hidden_size, shape.active_intermediate_size  # a sparse layer: its top-k experts' width
    dims = module_dims(shape)
    q, kv = dims["q_proj"][1], dims["k_proj"][1]
    norm = LIGER_NORM_BYTES if liger else NORM_BYTES + (NORM_WEIGHT_GRAD_BYTES if trained_norms else 0)
    total = norm * h * shape.norms_per_layer
    if shape.qk_norm:
        total += norm * (q + kv)
    total += SDPA_BYTES * (q + kv)
    total += (LIGER_MLP_BYTES if liger else MLP_BYTES) * i
    total += LINEAR_INPUT_BYTES * _input_groups_saved(trained, shared_inputs, dims)
    if shape.is_moe:
        total += ROUTER_BYTES_PER_EXPERT * shape.num_experts
        if trained_norms and "gate_proj" in trained:  # full/freeze: the experts' weights want their inputs
            total += EXPERT_GATHER_BYTES * shape.experts_per_token * h
    if zero3_adapter:
        # ZeRO-3 without autocast: the adapters stay fp32 (4 bytes per input feature, not 2) and ZeRO-3's own
        # linear function keeps the input of every frozen linear as well (one bf16 tensor per group).
        total += LINEAR_INPUT_BYTES * _input_groups_saved(trained, False, dims)
        total += LINEAR_INPUT_BYTES * _input_groups_saved(set(MODULES), True, dims)
    return total


def activation_bytes(
    config: dict[str, Any],
    shape: ModelShape,
    method: Method,
    ftype: str,
    zero: int | None,
    tokens: int,
    gc: bool,
    liger: bool,
    half: bool,
    fused_loss: bool,
) -> tuple[float, float, float]:
    """(bytes one layer keeps per token, activations kept through the step's forward, one recomputed layer)."""
    L, h, i = shape.num_hidden_layers, shape.hidden_size, shape.active_intermediate_size
    full = ftype in ("full", "freeze")
    act_scale = 2.0 if (not half and full) else 1.0
    # Full/freeze share one input tensor per q/k/v and gate/up group, unless the (trained, fp32) norm weight
    # makes the norm's output fp32 under autocast: then each linear keeps its own bf16 cast of it.
    fp32_weights = zero is None and not bool(get(config, "pure_bf16"))
    per_layer = method.extra_per_layer + layer_activation_bytes(
        shape,
        method.trained,
        liger=liger,
        shared_inputs=full and (liger or not fp32_weights),
        zero3_adapter=zero == 3 and ftype in ("lora", "oft"),
        trained_norms=full,
    )
    if gc:
        recompute = tokens * (per_layer + GC_BACKWARD_BYTES * i) * act_scale
        if fused_loss:  # the fused loss's input gradient waits for the backward
            recompute += tokens * LIGER_CE_BYTES_PER_HIDDEN * h
        kept = tokens * GC_BOUNDARY_BYTES * h * L * act_scale
        if ftype == "freeze" and not method.first_active:
            # LLaMA-Factory checkpoints only the layers with trainable parameters (model_utils/checkpointing.py,
            # `custom_gradient_checkpointing_func`): with the first n training (freeze_trainable_layers < 0) the
            # frozen layers after them run un-checkpointed and keep what back-propagation through them needs
            # (measured: Mistral-7B 36.8 GiB against 21.1 with the last two training; bench/memory/results.md).
            count = method.layers_trained
            frozen_per_layer = layer_activation_bytes(shape, set(), liger=liger)
            boundaries = tokens * GC_BOUNDARY_BYTES * h * count
            kept = (boundaries + tokens * frozen_per_layer * (L - count)) * act_scale
        return per_layer, kept, recompute
    saved_layers = per_layer * L
    if ftype == "freeze":
        # Without GC (so without `enable_input_require_grads`) the frozen layers before the first trainable one
        # keep nothing (freeze_trainable_layers > 0: the last n train); with the first n training (< 0), the
        # frozen layers after them keep what back-propagation through them needs.
        count = method.layers_trained
        frozen_per_layer = layer_activation_bytes(shape, set(), liger=liger)
        saved_layers = per_layer * count + (frozen_per_layer * (L - count) if not method.first_active else 0.0)
    return per_layer, tokens * saved_layers * act_scale, 0.0


def logits_bytes(
    shape: ModelShape, tokens: int, liger: bool, lm_head_trained: bool, zero: int | None, stage: str = "sft"
) -> float:
    """The loss: without Liger the bf16 logits, their fp32 upcast, log-softmax and gradients (12 bytes per
    vocabulary entry and token, measured), Gemma 2's soft-capping copy, and the lm_head's gradient when it
    trains. With Liger's fused linear cross-entropy (`liger`: on, and a stage it fuses, `methods.LIGER_STAGES`):
    the input gradient and one chunk of fp32 logits. A reward model's loss reads the value head only: its logits
    are the wrapper's upcast, without gradients (`memory.stages.logits_bytes_per_vocab`)."""
    V, h = shape.vocab_size, shape.hidden_size
    stage_bytes = memory_stages.logits_bytes_per_vocab(stage)
    head_grad = (LM_HEAD_GRAD_BYTES if zero is None else LM_HEAD_GRAD_BYTES_DS) * V * h if lm_head_trained else 0.0
    if liger:
        chunk = 2 ** math.ceil(math.log2(max(1, math.ceil(tokens / math.ceil(V / h)))))
        return tokens * LIGER_CE_BYTES_PER_HIDDEN * h + min(chunk, tokens) * V * 8 + head_grad
    per_token = LOGITS_BYTES_PER_VOCAB if stage_bytes is None else stage_bytes
    per_token += SOFTCAP_BYTES_PER_VOCAB if shape.logit_softcapping else 0.0
    return tokens * per_token * V + head_grad


def attention_scores_bytes(
    shape: ModelShape, attention: str, seqs: int, seq: int, layers_kept: int, notes: list[str]
) -> float:
    """The materialised attention scores: eager attention's only (SDPA and FA2 keep none)."""
    if attention != "eager":
        return 0.0
    notes.append("eager attention: every layer's L x L scores are materialised")
    return _eager_scores(shape, seqs, seq, layers_kept)


def _eager_scores(shape: ModelShape, seqs: int, seq: int, layers_kept: int) -> float:
    """`eager` attention materialises the b·a·s² scores: kept per layer without checkpointing (`layers_kept`),
    plus one layer's softmax backward (with checkpointing, the recomputed layer's own scores are counted there)."""
    scores = shape.num_attention_heads * seqs * seq * seq
    return scores * (EAGER_SAVED_BYTES * layers_kept + EAGER_BACKWARD_BYTES)


class Activity(Record):
    """What the micro-batch itself costs, in bytes (one layer's per token, then the totals)."""

    per_layer: float
    activations: float
    recompute: float
    logits: float
    attention: float
