"""MFU of a mixture of experts (cfgopt/verify/flops.py): a token passes through its top-k routed experts, not all of
them, so the FLOP count reads the active parameters; counting every expert overstated Mixtral-8x7B's MFU 3.6x and
DeepSeek-V3's 18x (past 100%: the run was refused as a counting bug). A mixture of experts whose layout cfgopt does
not count gets no MFU, with why, and its tokens/s stay. CPU-sized configs: no GPU, no download."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hub_configs import DEEPSEEK_V3, MIXTRAL_8X7B, QWEN3_30B_A3B

from cfgopt.knowledge.model_shapes import _from_config
from cfgopt.verify import comparison, flops

# A Mixtral of 2 layers, 4 experts of width 96, 2 per token: built by transformers on the CPU in a moment
TINY_MIXTRAL = {
    "model_type": "mixtral",
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
}
SKIPPED = 2 * (4 - 2) * 3 * 64 * 96  # two layers, two experts a token skips, SwiGLU of 64 x 96 each
FULL = {"finetuning_type": "full"}


def _steps(seconds: float = 1.0, tokens: int = 1000) -> list[dict]:
    return [{"step": i, "seconds": seconds, "real_tokens": tokens, "padded_tokens": tokens} for i in range(1, 9)]


def test_the_active_parameters_are_the_published_ones() -> None:
    mixtral, qwen3, deepseek = (_from_config(c, "m") for c in (MIXTRAL_8X7B, QWEN3_30B_A3B, DEEPSEEK_V3))
    assert mixtral.active_parameters == pytest.approx(12.9e9, rel=0.005)  # "12.9B active parameters"
    assert qwen3.active_parameters == pytest.approx(3.3e9, rel=0.02)  # Qwen3-30B-A3B
    assert deepseek.active_parameters == pytest.approx(37e9, rel=0.02)  # "37B activated"


def test_a_full_fine_tune_counts_the_top_k_experts_forward_and_backward() -> None:
    counts = flops.token_parameters(TINY_MIXTRAL, FULL, 1_000_000, 1_000_000)
    assert counts == {"active_parameters": 1_000_000 - SKIPPED, "trainable_active_parameters": 1_000_000 - SKIPPED}


def test_lora_trains_no_expert_so_its_trainable_count_stays() -> None:
    counts = flops.token_parameters(TINY_MIXTRAL, {"finetuning_type": "lora"}, 1_000_000, 4096)
    assert counts == {"active_parameters": 1_000_000 - SKIPPED, "trainable_active_parameters": 4096}


def test_freeze_tuning_counts_the_skipped_experts_of_the_trained_layers_only() -> None:
    one_layer = {"finetuning_type": "freeze", "freeze_trainable_layers": 1}
    counts = flops.token_parameters(TINY_MIXTRAL, one_layer, 1_000_000, 500_000)
    assert counts["trainable_active_parameters"] == 500_000 - SKIPPED // 2
    attention_only = {**one_layer, "freeze_trainable_modules": "self_attn"}
    assert flops.token_parameters(TINY_MIXTRAL, attention_only, 1_000_000, 500)["trainable_active_parameters"] == 500
    # Qwen3-MoE with every other layer sparse: which of the trained layers hold experts is not counted
    interleaved = {**QWEN3_30B_A3B, "decoder_sparse_step": 2}
    assert "interleave" in flops.token_parameters(interleaved, one_layer, 10**9, 10**8)["mfu_unknown"]


def test_a_dense_model_keeps_every_parameter() -> None:
    dense = {k: v for k, v in TINY_MIXTRAL.items() if k not in ("num_local_experts", "num_experts_per_tok")}
    assert flops.token_parameters({**dense, "model_type": "mistral"}, FULL, 10**6, 10**6) == {}


def test_experts_of_a_layout_not_counted_give_no_mfu_and_say_why() -> None:
    counts = flops.token_parameters({**TINY_MIXTRAL, "model_type": "qwen3_next"}, FULL, 10**6, 10**6)
    assert counts["mfu_unknown"].startswith("a mixture of experts whose active parameters cfgopt cannot count")
    assert "'qwen3_next', whose layout cfgopt does not count" in counts["mfu_unknown"]
    summary = comparison.summarize({"steps": _steps(), "parameters": 10**6, "peak_tflops": 989.4, **counts})
    assert summary.get("mfu") is None and summary["real_tokens_per_s"] == pytest.approx(1000)
    table = comparison.table(summary, summary, comparison.compare(summary, summary))
    assert table.count("no MFU: a mixture of experts") == 1 and comparison.FLOP_CONVENTION not in table


def test_mixtral_mfu_counts_the_active_parameters_and_stays_under_100_percent() -> None:
    """Mixtral-8x7B full fine-tune at 5,000 tokens/s on an H100 (989.4 TFLOPS): 6 x 12.9B active parameters give
    39%; 6 x 46.7B gave 142%, which the summary refused as impossible."""
    total = _from_config(MIXTRAL_8X7B, "m").num_parameters
    metrics = {"steps": _steps(1.0, 5000), "parameters": total, "trainable_parameters": total, "peak_tflops": 989.4}
    assert "over 100%" in comparison.summarize(metrics)["cannot_measure"]  # the old count
    metrics.update(flops.token_parameters(MIXTRAL_8X7B, FULL, total, total))
    summary = comparison.summarize(metrics)
    assert summary["mfu"] == pytest.approx(6 * 12.88e9 * 5000 / 989.4e12, rel=1e-3)
    assert "cannot_measure" not in summary


def test_the_worker_counts_the_active_parameters_of_the_model_it_trains() -> None:
    """The worker's callback on a Mixtral transformers builds on the CPU: the active count is the model's own
    parameters less (E - k) / E of those in its `experts` modules."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from cfgopt.verify import worker

    config = transformers.MixtralConfig(**{k: v for k, v in TINY_MIXTRAL.items() if k != "model_type"})
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(config)
    callback, metrics = worker._make_callback({"args": {"finetuning_type": "full", "cutoff_len": 64}})
    training_args = SimpleNamespace(per_device_train_batch_size=1, gradient_accumulation_steps=1)
    callback.on_train_begin(training_args, None, None, model=model)
    named = dict(model.named_parameters())
    experts = sum(p.numel() for name, p in named.items() if ".experts." in name)
    total = sum(p.numel() for p in named.values())
    assert metrics["parameters"] == total and experts == 2 * 4 * 3 * 64 * 96
    assert metrics["active_parameters"] == total - experts // 2 == metrics["trainable_active_parameters"]


def test_experts_declared_but_no_sparse_layer_count_as_dense() -> None:
    """Qwen3-MoE with every layer in `mlp_only_layers` has no sparse layer: every parameter is active."""
    dense = {**QWEN3_30B_A3B, "num_hidden_layers": 2, "mlp_only_layers": [0, 1]}
    assert flops.token_parameters(dense, FULL, 10**9, 10**9) == {}
