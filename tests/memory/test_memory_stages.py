"""The memory model per training stage and fine-tuning method (cfgopt/memory/stages.py, cfgopt/knowledge/methods.py):
one case wherever LLaMA-Factory 0.9.5 does something different (a reference model or not, how many sequences go
through the graph, which stage packs or fuses the loss, PPO's extra models, DoRA, bitsandbytes, freeze)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.job.job import lf_values
from cfgopt.job.settings import Settings
from cfgopt.knowledge import methods, schema
from cfgopt.knowledge.model_shapes import ModelShape, shape_for
from cfgopt.knowledge.targets import TARGETS
from cfgopt.memory import estimate as memory
from cfgopt.memory.base import BNB4_BYTES, BNB4_DOUBLE_QUANT_BYTES, linear_params, module_dims
from cfgopt.memory.stages import DORA_OUTPUT_BYTES, KTO_SPLIT_LOGITS_BYTES_PER_VOCAB, NO_GRAD_LOGPS_BYTES_PER_VOCAB
from cfgopt.project.loader import load_job

L8 = shape_for("meta-llama/Meta-Llama-3-8B")  # untied embeddings
L1 = ModelShape("Llama-3.2-1B", 2048, 8192, 16, 32, 8, 128256, True)  # tied embeddings
H200 = TARGETS["h200"]
GIB = 2**30
BASE = {"do_train": True, "finetuning_type": "lora", "bf16": True, "cutoff_len": 1024, "per_device_train_batch_size": 2}
Z3 = {"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}}
Z2 = {"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}}


def est(config: dict, shape: ModelShape = L8, gpus: int = 1, ds: dict | None = None) -> memory.MemoryEstimate:
    return memory.estimate(lf_values({**BASE, **config}, schema.llamafactory()), shape, H200, gpus, ds)


def names(e: memory.MemoryEstimate) -> set[str]:
    return {c.name for c in e.components}


def component(e: memory.MemoryEstimate, name: str) -> memory.Component:
    return next(c for c in e.components if c.name == name)


# ---------------------------------------------------------------------------------------- reference models


def test_lora_dpo_uses_the_adapter_disabled_base_not_a_copy() -> None:
    dpo = est({"stage": "dpo"})
    assert "reference model" not in names(dpo)
    assert any("adapter disabled" in n for n in dpo.notes)
    # its forward still runs: chosen + rejected, no grad, fp32 logits + log-softmax, at the loss
    logits = component(dpo, "reference logits")
    assert logits.phases == ("loss",)
    assert logits.gib * GIB == pytest.approx(NO_GRAD_LOGPS_BYTES_PER_VOCAB * 2 * 2 * 1024 * L8.vocab_size)


def test_kto_counts_the_copies_its_tag_split_makes_of_the_policy_logits() -> None:
    """train/kto/trainer.py concatenated_forward splits the fp32 logits by boolean indexing (copies), kept through
    the no-grad forwards: without them an H200 KTO run peaked 9% above the estimate (bench/memory/README.md)."""
    kto = est({"stage": "kto"})
    split = component(kto, "kto chosen/rejected logits")
    assert split.phases == ("loss",)
    assert split.gib * GIB == pytest.approx(KTO_SPLIT_LOGITS_BYTES_PER_VOCAB * 2 * 1024 * L8.vocab_size)
    assert "kto chosen/rejected logits" not in names(est({"stage": "dpo"}))  # DPO's split is a view


def test_an_explicit_ref_model_is_loaded_and_counted_at_low_confidence() -> None:
    plain = est({"stage": "dpo"})
    explicit = est({"stage": "dpo", "ref_model": "org/other-8b"})
    assert component(explicit, "reference model").gib * GIB == pytest.approx(2.0 * L8.num_parameters)
    assert explicit.confidence == "low" and "ref_model" in explicit.confidence_line()
    assert explicit.required_gib > plain.required_gib
    quantized = est({"stage": "dpo", "ref_model": "org/other-8b", "ref_model_quantization_bit": 4})
    assert component(quantized, "reference model").gib < component(explicit, "reference model").gib / 2.5


@pytest.mark.parametrize("ftype", ["full", "freeze", "oft"])
def test_full_freeze_and_oft_dpo_load_a_frozen_copy(ftype: str) -> None:
    e = est({"stage": "dpo", "finetuning_type": ftype})
    assert component(e, "reference model").gib * GIB == pytest.approx(2.0 * L8.num_parameters)
    assert component(e, "reference model").phases == ("states",)


def test_zero3_partitions_the_reference_other_stages_keep_it_whole() -> None:
    """trl's prepare_deepspeed keeps stage 3 for the reference and runs every other stage at 0."""
    full = {"stage": "dpo", "finetuning_type": "full"}
    z3, z2 = est(full, gpus=8, ds=Z3), est(full, gpus=8, ds=Z2)
    assert component(z3, "reference model").gib * GIB == pytest.approx(2.0 * L8.num_parameters / 8)
    assert component(z2, "reference model").gib * GIB == pytest.approx(2.0 * L8.num_parameters)


@pytest.mark.parametrize("loss", ["orpo", "simpo"])
def test_reference_free_losses_have_no_reference(loss: str) -> None:
    e = est({"stage": "dpo", "finetuning_type": "full", "pref_loss": loss})
    assert not names(e) & {"reference model", "reference logits"}
    assert e.tokens == 2 * 2 * 1024  # still chosen + rejected through the graph


def test_kto_always_has_a_reference_and_one_graph_sequence_per_sample() -> None:
    """KTO builds its reference whatever pref_loss says; its KL sequence runs without gradients."""
    kto = est({"stage": "kto", "finetuning_type": "full", "pref_loss": "orpo"})
    assert "reference model" in names(kto)
    assert kto.tokens == 2 * 1024
    assert component(kto, "reference logits").gib * GIB == pytest.approx(
        NO_GRAD_LOGPS_BYTES_PER_VOCAB * 2 * 1024 * L8.vocab_size
    )
    lora = est({"stage": "kto"})
    assert "reference model" not in names(lora) and "reference logits" in names(lora)
    assert est({"stage": "dpo"}).tokens == 2 * kto.tokens


def test_rm_counts_two_sequences_and_logits_without_gradients() -> None:
    rm, sft = est({"stage": "rm"}), est({"stage": "sft"})
    assert rm.tokens == 2 * sft.tokens
    assert not names(rm) & {"reference model", "reference logits"}
    # the value head's wrapper upcasts logits the loss never reads: 6 bytes per vocabulary entry, not 12
    assert rm.logits_gib == pytest.approx(sft.logits_gib * 2 * 6 / 12)


# ---------------------------------------------------------------------------------------- PPO


def test_ppo_is_modelled_at_low_confidence_with_a_rollout_phase() -> None:
    ppo = est({"stage": "ppo", "max_new_tokens": 512})
    assert not ppo.unmodelled and ppo.confidence == "low"
    assert ppo.seq_len == 1024 + 512
    assert {"value head", "reward model", "rollout KV cache"} <= names(ppo)
    cache = component(ppo, "rollout KV cache")
    kv_per_token = 2 * L8.num_hidden_layers * L8.num_key_value_heads * L8.head_size * 2
    assert cache.phases == ("rollout",) and cache.gib * GIB == pytest.approx(kv_per_token * 2 * 1536)
    assert "rollout" in ppo.phases()
    assert "reference model" not in names(ppo)  # LoRA: the adapter-disabled base


def test_ppo_reward_model_types() -> None:
    lora = component(est({"stage": "ppo"}), "reward model").gib
    full = component(est({"stage": "ppo", "reward_model_type": "full"}), "reward model").gib
    api = est({"stage": "ppo", "reward_model_type": "api"})
    assert full * GIB == pytest.approx(2.0 * L8.num_parameters) and lora < 1
    assert "reward model" not in names(api)
    full_ppo = est({"stage": "ppo", "finetuning_type": "full", "reward_model_type": "full"}, gpus=8, ds=Z3)
    assert {"reference model", "reward model", "rollout gathered weights"} <= names(full_ppo)


def test_ppo_estimate_keeps_the_rules_silent(tmp_path: Path) -> None:
    text = (
        "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: {stage}\ndo_train: true\n"
        "finetuning_type: lora\nreward_model: saves/rm\nbf16: true\ncutoff_len: 1024\n"
    )
    for stage, judged in (("ppo", False), ("sft", True)):
        path = tmp_path / f"{stage}.yaml"
        path.write_text(text.format(stage=stage))
        # the lint rules judge only what the model counts with confidence
        assert (load_job(path, Settings(target_name="h200")).estimate(1) is not None) is judged, stage


# ---------------------------------------------------------------------------------------- stage rules


def test_packing_counts_for_pt_and_sft_only() -> None:
    for stage in ("rm", "dpo", "kto", "ppo"):
        assert not est({"stage": stage, "packing": True}).packing, stage
    assert est({"stage": "sft", "packing": True}).packing and est({"stage": "pt"}).packing


def test_liger_fuses_the_loss_for_pt_and_sft_only() -> None:
    sft, sft_liger = est({"stage": "sft"}), est({"stage": "sft", "enable_liger_kernel": True})
    dpo, dpo_liger = est({"stage": "dpo"}), est({"stage": "dpo", "enable_liger_kernel": True})
    assert sft_liger.logits_gib < sft.logits_gib / 5
    assert dpo_liger.logits_gib == pytest.approx(dpo.logits_gib)  # LLaMA-Factory keeps the logits
    assert dpo_liger.gib("activations") <= dpo.gib("activations")  # its norm and SwiGLU kernels still apply
    assert methods.LIGER_STAGES == methods.PACKING_STAGES == {"pt", "sft"}


# ---------------------------------------------------------------------------------------- methods


def test_method_names() -> None:
    assert methods.method_of({"finetuning_type": "lora", "quantization_bit": 4}) == "qlora"
    assert methods.method_of({"finetuning_type": "lora", "use_dora": True}) == "dora"
    assert methods.method_of({"finetuning_type": "freeze"}) == "freeze"


def test_dora_adds_magnitudes_their_activations_and_the_weight_norm() -> None:
    lora, dora = est({}), est({"use_dora": True})
    outputs = sum(out for _, out in module_dims(L8).values())
    assert dora.trainable_params - lora.trainable_params == L8.num_hidden_layers * outputs
    assert dora.layer_bytes_per_token - lora.layer_bytes_per_token == DORA_OUTPUT_BYTES * outputs
    norm = component(dora, "DoRA weight norm")
    assert norm.phases == ("loss", "backward") and 0.5 < norm.gib < 3  # down_proj of an 8B: ~1.4 GiB
    assert not dora.unmodelled and dora.confidence == "medium" and "DoRA" in dora.confidence_line()


@pytest.mark.parametrize(
    ("extra", "per_param"),
    [
        ({"quantization_bit": 4}, BNB4_DOUBLE_QUANT_BYTES),
        ({"quantization_bit": 4, "double_quantization": False}, BNB4_BYTES),
        ({"quantization_bit": 8}, 1.0),
    ],
)
def test_bitsandbytes_bases(extra: dict, per_param: float) -> None:
    e, lora = est(extra), est({})
    linears = linear_params(L8)
    saved = (lora.gib("weights") - e.gib("weights")) * GIB
    assert saved == pytest.approx(linears * (2.0 - per_param), rel=1e-9)
    assert abs(BNB4_DOUBLE_QUANT_BYTES - 0.516) < 1e-3 and BNB4_BYTES == 0.5625


def test_freeze_layers_modules_and_extra_modules() -> None:
    freeze = {"finetuning_type": "freeze"}
    last, first = est({**freeze, "freeze_trainable_layers": 2}), est({**freeze, "freeze_trainable_layers": -2})
    assert last.trainable_params == first.trainable_params
    # without checkpointing the frozen layers before the last two keep nothing; before the first two train, all do
    no_gc = {**freeze, "disable_gradient_checkpointing": True}
    assert est({**no_gc, "freeze_trainable_layers": 2}).gib("activations") < est(
        {**no_gc, "freeze_trainable_layers": -2}
    ).gib("activations")
    attn = est({**freeze, "freeze_trainable_modules": "self_attn"})
    dims = module_dims(L8)
    assert attn.trainable_params == 2 * sum(dims[m][0] * dims[m][1] for m in ("q_proj", "k_proj", "v_proj", "o_proj"))
    embed = est({**freeze, "freeze_extra_modules": "embed_tokens,lm_head"})
    assert embed.trainable_params - last.trainable_params == 2 * L8.vocab_size * L8.hidden_size
    tied = est({**freeze, "freeze_extra_modules": "embed_tokens"}, L1)
    assert tied.trainable_params - est(freeze, L1).trainable_params == L1.vocab_size * L1.hidden_size
    assert est({**freeze, "freeze_trainable_layers": 0}).trainable_params == 0


def test_zero3_param_offload_puts_the_reference_on_the_host() -> None:
    offload = {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}, "bf16": {"enabled": "auto"}}
    e = est({"stage": "dpo", "finetuning_type": "full"}, gpus=8, ds=offload)
    assert "reference model" not in names(e)
    assert component(e, "reference model (host)").phases == ("host",)


def test_a_trained_embedding_is_the_largest_parameter_for_zero3s_norm() -> None:
    freeze = {"finetuning_type": "freeze", "freeze_extra_modules": "embed_tokens"}
    with_embedding, without = est(freeze, ds=Z3), est({"finetuning_type": "freeze"}, ds=Z3)
    norm = component(with_embedding, "gradient norm (fp64)").gib * GIB
    assert norm == pytest.approx(8 * L8.vocab_size * L8.hidden_size)
    assert component(without, "gradient norm (fp64)").gib * GIB < norm / 5
