"""What the memory-for-speed knobs calibration on the H200 changed in the model (bench/memory/results.md, the
`2026-12-04_harness` rows; docs/memory.md "Calibration"): each case against the setting it is measured beside."""

from __future__ import annotations

from test_memory_stages import BASE, GIB, component, est, names

from cfgopt.knowledge.model_shapes import shape_for
from cfgopt.memory.activations import EAGER_BACKWARD_BYTES
from cfgopt.memory.base import STATES
from cfgopt.memory.buffers import AUTOCAST_COPIES

MISTRAL = shape_for("mistralai/Mistral-7B-v0.1")
FULL = {**BASE, "finetuning_type": "full", "cutoff_len": 2048, "packing": True, "per_device_train_batch_size": 2}
OFFLOAD = {"device": "cpu", "pin_memory": True}


def test_frozen_layers_after_the_trained_ones_keep_their_activations_under_checkpointing() -> None:
    """LLaMA-Factory checkpoints only layers with trainable parameters: with the first two training, the frozen
    rest runs un-checkpointed (Mistral-7B: 36.8 GiB measured against 21.1 with the last two training)."""
    freeze = {**FULL, "finetuning_type": "freeze"}
    first = est({**freeze, "freeze_trainable_layers": -2}, MISTRAL)
    last = est({**freeze, "freeze_trainable_layers": 2}, MISTRAL)
    assert first.peak_allocated_gib > last.peak_allocated_gib + 10


def test_bnb_8bit_keeps_32bit_states_for_the_embedding() -> None:
    eight = component(est({**FULL, "optim": "adamw_bnb_8bit"}, MISTRAL), "optimizer states").gib
    trainable = MISTRAL.num_parameters
    embedding = MISTRAL.vocab_size * MISTRAL.hidden_size
    assert abs(eight * GIB - (2 * trainable + 6 * embedding)) < 0.01 * GIB


def test_paged_optimizer_states_are_off_the_gpu() -> None:
    paged = est({**FULL, "optim": "paged_adamw_8bit"}, MISTRAL)
    assert component(paged, "optimizer states").gib == 0 and paged.offloaded_gib > 10
    assert any("paged optimizer" in n for n in paged.notes)


def test_zero2_offload_holds_no_gradient_bucket_zero3_does() -> None:
    ds2 = {"zero_optimization": {"stage": 2, "offload_optimizer": OFFLOAD}, "bf16": {"enabled": "auto"}}
    ds3 = {"zero_optimization": {"stage": 3, "offload_optimizer": OFFLOAD}, "bf16": {"enabled": "auto"}}
    assert component(est(FULL, MISTRAL, ds=ds2), "gradients").gib == 0
    assert component(est(FULL, MISTRAL, ds=ds3), "gradients").gib > 0


# ------------------------------------------------ the planner bench's searches (bench/memory/import_tune.py)

QWEN25_7B = shape_for("Qwen/Qwen2.5-7B")
LLAMA3_8B = shape_for("meta-llama/Meta-Llama-3-8B-Instruct")


def test_autocast_weight_copies_where_the_backward_keeps_them() -> None:
    """Autocast's 16-bit copies of the trained fp32 weights: held throughout without checkpointing (rocm_perf
    §5.3); with it, through the backward when accumulation holds gradients (Qwen2.5-7B full SFT at 1x8, 2x4, 4x2
    measured 13-16 GiB over an estimate without them), and not at all with accumulation 1."""
    accum = {**FULL, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8}
    copies = component(est(accum, QWEN25_7B), AUTOCAST_COPIES)
    assert copies.phases == ("backward",)
    assert abs(copies.gib * GIB - 2 * QWEN25_7B.num_parameters) < 0.01 * GIB
    assert "accumulation with checkpointing" in est(accum, QWEN25_7B).confidence_line()
    no_gc = est({**accum, "disable_gradient_checkpointing": True}, QWEN25_7B)
    assert component(no_gc, AUTOCAST_COPIES).phases == (STATES,)
    assert "accumulation with checkpointing" not in no_gc.confidence_line()
    for other in (
        {**accum, "gradient_accumulation_steps": 1},  # no gradient held from an earlier micro-batch
        {**accum, "bf16": False, "pure_bf16": True},  # no fp32 weights to cast
        {**accum, "finetuning_type": "lora"},
    ):
        assert AUTOCAST_COPIES not in names(est(other, QWEN25_7B))
    assert AUTOCAST_COPIES not in names(est(accum, QWEN25_7B, ds={"zero_optimization": {"stage": 2}}))


def test_the_input_embeddings_gradient_is_made_last() -> None:
    """Llama-3-8B full SFT, 2x1, GC on: 78.1 GiB measured, 80.1 estimated with the embedding's 2.0 GiB gradient
    at the backward's peak. Only untied embeddings, and only without a gradient held from an earlier micro-batch."""
    one = est({**FULL, "gradient_accumulation_steps": 1}, LLAMA3_8B)
    late = component(one, "embedding gradient")
    assert late.phases == ("step",)
    assert abs(late.gib * GIB - 4 * LLAMA3_8B.vocab_size * LLAMA3_8B.hidden_size) < 0.01 * GIB
    assert "embedding gradient" not in names(est({**FULL, "gradient_accumulation_steps": 2}, LLAMA3_8B))
    assert "embedding gradient" not in names(est(FULL, shape_for("Qwen/Qwen3-1.7B")))  # tied: made with lm_head's


def test_eager_under_checkpointing_counts_one_layers_scores_once() -> None:
    e = est({**FULL, "flash_attn": "disabled"}, LLAMA3_8B)
    scores = LLAMA3_8B.num_attention_heads * 2 * 2048 * 2048  # 2 packed rows of 2048 tokens
    assert abs(component(e, "attention scores").gib * GIB - scores * EAGER_BACKWARD_BYTES) < 0.01 * GIB
