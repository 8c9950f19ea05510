"""What the memory-for-speed knobs calibration on the H200 changed in the model (bench/memory/results.md, the
`2026-12-04_harness` rows; docs/memory.md "Calibration"): each case against the setting it is measured beside."""

from __future__ import annotations

from test_memory_stages import BASE, GIB, component, est

from cfgopt.model_shapes import shape_for

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
