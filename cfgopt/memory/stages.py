"""What a training stage and a fine-tuning method add to the memory of a LLaMA-Factory 0.9.5 run, as components
of the estimate (`cfgopt.memory.estimate.estimate` calls these): the reference model of DPO / KTO / PPO and its no-grad
logits, PPO's value head, reward model and rollout (generation with its KV cache), DoRA's magnitude vectors and
weight norm. The rules (which stage packs, uses Liger's fused loss, needs a reference) are in
`cfgopt.knowledge.methods`; docs/memory.md, "Stages and methods", says what is counted and with what confidence. Pure
arithmetic.
"""

from __future__ import annotations

from cfgopt.knowledge import methods
from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory.base import GIB, HOST, STATES, Component, linear_modules, model_bytes, module_dims
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Per token and vocabulary entry of a no-grad forward that computes log-probabilities (the reference model's, and
# KTO's KL forward): `model(...).logits.to(torch.float32)` frees the bf16 logits once upcast, then
# `logits.log_softmax(-1)` holds its fp32 output beside the fp32 logits (train/trainer_utils.py get_batch_logps):
# 4 + 4 bytes. Read from the code, not measured.
NO_GRAD_LOGPS_BYTES_PER_VOCAB = 8
# Per token and vocabulary entry of a reward model's forward (stage rm): the value head's wrapper upcasts the LM
# logits, which the pairwise loss never reads (trl modeling_value_head.py: `lm_logits.float()`): bf16 + fp32.
VALUE_HEAD_LOGITS_BYTES_PER_VOCAB = 6
# DoRA (PEFT 0.18 tuners/lora/dora.py, DoraLinearLayer.forward): per output feature of each adapted linear the
# backward keeps the base result and the LoRA result (bf16), for the magnitude's gradient.
DORA_OUTPUT_BYTES = 4
# DoRA's weight norm, per forward of each adapted linear, one linear at a time: the fp32 identity `x_eye`
# (in x in), the bf16 LoRA product B·A (in x out), the base weight cast to the input's fp32 dtype, the scaled
# product and their fp32 sum: 4·in² + (2 + 4 + 2 + 4)·in·out bytes.
DORA_EYE_BYTES = 4
DORA_NORM_BYTES = 12
# PPO's value head: one linear h -> 1 (trl AutoModelForCausalLMWithValueHead), trained in fp32 with AdamW.
VALUE_HEAD_STATE_BYTES = 4 + 4 + 8
# KTO splits the policy's fp32 logits by tag with boolean indexing (`target_logits[batch["kto_tags"]]` and
# `[~kto_tags]`, train/kto/trainer.py concatenated_forward): copies, together one more fp32 logits tensor, kept
# for the metrics until the loss is computed, through the KL and reference forwards. Read from the code; on one
# H200 (Qwen2.5-7B LoRA r128, 4 x 1024 tokens) the run peaked 3.05 GiB above the estimate without it, 2.32 with
# it counted (bench/memory/results.md, "DPO and KTO at the run's lengths").
KTO_SPLIT_LOGITS_BYTES_PER_VOCAB = 4


class StageRun(Record):
    """What the stage components need to know about the run (from `cfgopt.memory.estimate.estimate`)."""

    stage: str
    ftype: str
    micro_batch: int
    seq: int  # tokens per sequence in the peak micro-batch
    zero: int | None
    gpus: int
    gc: bool
    adapter_params: int  # the policy's LoRA parameters (a LoRA reward adapter has as many)
    offload_param: bool = False  # ZeRO-3 with `offload_param`: the JSON trl prepares a frozen model with


def graph_sequences(stage: str, micro_batch: int) -> int:
    """Sequences of one micro-batch that go through the graph: two per sample for rm and dpo (chosen + rejected),
    one for the others (KTO's KL sequence runs without gradients)."""
    return micro_batch * (2 if stage in methods.PAIRED_STAGES else 1)


def logits_bytes_per_vocab(stage: str) -> float | None:
    """The logits' bytes per token and vocabulary entry where the stage differs from the LM loss's (None)."""
    return VALUE_HEAD_LOGITS_BYTES_PER_VOCAB if stage == "rm" else None


def _second_model(name: str, bytes_: float, run: StageRun, quantized: bool, counted: str, source: str) -> Component:
    """A frozen second model under DeepSpeed: ZeRO-3 partitions it (trl prepare_deepspeed keeps stage 3 and the
    JSON's offload, so `offload_param` puts its partition on the host), other stages run it at stage 0, whole on
    each GPU; a quantized one is not prepared at all (train/dpo/trainer.py)."""
    partitioned = run.zero == 3 and not quantized
    size = bytes_ / run.gpus if partitioned else bytes_
    if partitioned and run.offload_param:
        return Component(f"{name} (host)", size / GIB, counted + ", offloaded with the parameters", (HOST,), source)
    return Component(name, size / GIB, counted, (STATES,), source)


def _bits(config: dict[str, Any], key: str) -> int | None:
    bits = config.get(key)
    return bits if bits in (4, 8) else None


def reference_components(
    config: dict[str, Any], shape: ModelShape, run: StageRun, notes: list[str], approximate: list[str]
) -> list[Component]:
    """The reference model's weights (a copy, an explicit `ref_model`, or nothing for LoRA's adapter-disabled
    base) and the no-grad logits of its forward (and KTO's KL forward), which live beside the policy's graph."""
    kind = methods.reference_kind(config)
    out: list[Component] = []
    source = "llamafactory 0.9.5 train/trainer_utils.py create_ref_model; trl prepare_deepspeed"
    if kind == "adapter":
        notes.append(f"{run.stage}: the reference is the base with the LoRA adapter disabled (no copy)")
    elif kind in ("copy", "explicit"):
        if kind == "explicit":
            bits = _bits(config, "ref_model_quantization_bit")
            counted = f"`ref_model`, {f'{bits}-bit' if bits else 'bf16'}, assumed the policy's size"
            name = str(config.get("ref_model"))
            name = name if len(name) <= 40 else name[:37] + "..."  # a hostile value may be a huge list
            approximate.append(f"`ref_model` {name} (its size taken as the policy's)")
        else:
            # the copy is loaded with the policy's model arguments, quantization included (OFT may quantize)
            bits = _bits(config, "quantization_bit") if run.ftype == "oft" else None
            counted = "frozen copy of the model, " + (f"{bits}-bit" if bits else "bf16")
        out.append(_second_model("reference model", model_bytes(shape, bits), run, bool(bits), counted, source))
        notes.append(f"{run.stage}: a frozen reference model ({counted})")
    if kind is not None or run.stage == "kto":
        out.append(_no_grad_logits(shape, run))
    if run.stage == "kto":
        out.append(_kto_split_logits(shape, run))
    return out


def _kto_split_logits(shape: ModelShape, run: StageRun) -> Component:
    """KTO's chosen and rejected logits: copies of the policy's fp32 logits, made by boolean indexing, alive
    through the no-grad forwards that follow (`KTO_SPLIT_LOGITS_BYTES_PER_VOCAB`)."""
    tokens = run.micro_batch * run.seq
    size = KTO_SPLIT_LOGITS_BYTES_PER_VOCAB * tokens * shape.vocab_size
    counted = f"{run.micro_batch} x {run.seq} tokens, fp32 copies of the policy's logits (split by kto tag)"
    source = "llamafactory 0.9.5 train/kto/trainer.py concatenated_forward (boolean indexing copies)"
    return Component("kto chosen/rejected logits", size / GIB, counted, ("loss",), source)


def _no_grad_logits(shape: ModelShape, run: StageRun) -> Component:
    """The reference's forward (and KTO's KL forward) runs under no_grad after the policy's forward, while its
    activations wait for the backward: its fp32 logits and log-softmax are transient memory at the loss. DPO runs
    chosen + rejected at once; KTO its target and KL sequences one forward at a time; PPO one mini-batch."""
    sequences = run.micro_batch * (2 if run.stage == "dpo" else 1)
    tokens = sequences * run.seq
    size = NO_GRAD_LOGPS_BYTES_PER_VOCAB * tokens * shape.vocab_size
    phase = "rollout" if run.stage == "ppo" else "loss"
    counted = f"{sequences} x {run.seq} tokens, fp32 logits + log-softmax, no grad"
    source = "llamafactory 0.9.5 train/{dpo,kto}/trainer.py compute_reference_log_probs, get_batch_logps"
    return Component("reference logits", size / GIB, counted, (phase,), source)


def ppo_components(
    config: dict[str, Any], shape: ModelShape, run: StageRun, notes: list[str], approximate: list[str]
) -> list[Component]:
    """PPO beyond the policy's training step: the value head, the reward model (`reward_model_type`: full, a
    second model; lora, an adapter on the policy; api, a server) and the rollout: generation of
    `max_new_tokens` for one mini-batch with its KV cache (and, under ZeRO-3, the whole model gathered for
    `generate`). Modelled from the code (train/ppo/trainer.py, workflow.py); no PPO run was measured."""
    if run.stage != "ppo":
        return []
    approximate.append("PPO (value head, reward model and rollout read from the code; no PPO run measured)")
    h, L = shape.hidden_size, shape.num_hidden_layers
    source = "llamafactory 0.9.5 train/ppo/trainer.py, train/trainer_utils.py create_reward_model"
    out = [Component("value head", (h + 1) * VALUE_HEAD_STATE_BYTES / GIB, "h -> 1, fp32 + AdamW", (STATES,), source)]
    reward_type = str(config.get("reward_model_type") or "lora")
    if reward_type == "full":
        bits = _bits(config, "reward_model_quantization_bit")
        counted = f"second model, {f'{bits}-bit' if bits else 'bf16'}, assumed the policy's size"
        out.append(_second_model("reward model", model_bytes(shape, bits), run, bool(bits), counted, source))
        approximate.append("a full reward model (its size taken as the policy's)")
    elif reward_type in ("lora", "oft"):
        adapter = 2.0 * run.adapter_params  # loaded next to the policy's adapter, in its stored 16 bits
        out.append(Component("reward model", adapter / GIB, "LoRA adapter on the policy", (STATES,), source))
    else:
        notes.append("PPO: rewards from an API server (no reward model on the GPU)")
    kv = 2 * L * shape.num_key_value_heads * shape.head_size * 2  # k and v, bf16, per token
    cache = kv * run.micro_batch * run.seq
    out.append(
        Component(
            "rollout KV cache",
            cache / GIB,
            f"{run.micro_batch} x {run.seq} tokens, k + v of {L} layers",
            ("rollout",),
            f"{source} get_inputs (unwrap_model_for_generation, generate)",
        )
    )
    if run.zero == 3 and run.gpus > 1:
        gathered = 2.0 * shape.num_parameters * (1 - 1 / run.gpus)
        counted = "ZeRO-3 gathers the whole model for generate"
        out.append(
            Component(
                "rollout gathered weights", gathered / GIB, counted, ("rollout",), "trl unwrap_model_for_generation"
            )
        )
    return out


class DoraExtras(Record):
    trainable: int  # the magnitude vectors: one per output feature of each adapted linear and layer
    bytes_per_layer: float  # activation bytes per token and layer
    norm_bytes: float  # the weight norm's transient for the largest adapted linear


def dora_extras(shape: ModelShape, trained: set[str]) -> DoraExtras:
    dims, linears = module_dims(shape), linear_modules(shape)
    outputs = sum(dims[m][1] for m in trained)
    norm = max(
        (DORA_EYE_BYTES * dims[m][0] ** 2 + DORA_NORM_BYTES * dims[m][0] * dims[m][1] for m in trained), default=0
    )
    magnitudes = sum(count * out for m in trained for count, _, out in linears[m])  # one per output feature
    return DoraExtras(magnitudes, DORA_OUTPUT_BYTES * outputs, float(norm))


def dora_norm_component(norm_bytes: float, gc: bool) -> Component:
    """The weight norm is recomputed with each checkpointed layer in the backward."""
    phases = ("loss", "backward") if gc else ("loss",)
    source = "peft 0.18 tuners/lora/dora.py DoraLinearLayer.forward, get_weight_norm (not measured)"
    return Component(
        "DoRA weight norm", norm_bytes / GIB, "largest adapted linear: identity + W + BA, fp32", phases, source
    )
