"""Mixture-of-experts and multimodal parameter counts (cfgopt/knowledge/model_experts.py, vision_towers.py and
model_shapes.py): the published totals, and (oracle) the models transformers builds from the same config.json on
the meta device, family by family.

The configs are the models' config.json on the Hugging Face Hub, trimmed to the keys the count reads
(tests/support/hub_configs.py).
"""

from __future__ import annotations

import pytest
from hub_configs import (
    DEEPSEEK_V2_LITE,
    DEEPSEEK_V3,
    MIXTRAL_8X7B,
    QWEN2_VL_2B,
    QWEN3_30B_A3B,
    QWEN3_235B_A22B,
    QWEN15_MOE_A27B,
    QWEN25_VL_7B,
)

from cfgopt.knowledge.model_family import LocalModel
from cfgopt.knowledge.model_shapes import ModelShape, _from_config, largest_parameter, shape_for

# (config, published total parameters): the model cards' and papers' figures, rounded as published
PUBLISHED = [
    pytest.param(MIXTRAL_8X7B, 46.7e9, id="Mixtral-8x7B"),
    pytest.param(QWEN3_30B_A3B, 30.5e9, id="Qwen3-30B-A3B"),
    pytest.param(QWEN3_235B_A22B, 235e9, id="Qwen3-235B-A22B"),
    pytest.param(QWEN15_MOE_A27B, 14.3e9, id="Qwen1.5-MoE-A2.7B"),
    pytest.param(DEEPSEEK_V3, 671e9, id="DeepSeek-V3"),  # the main model: transformers drops the MTP layer
    pytest.param(DEEPSEEK_V2_LITE, 15.7e9, id="DeepSeek-V2-Lite"),
    pytest.param(QWEN25_VL_7B, 8.29e9, id="Qwen2.5-VL-7B"),
    pytest.param(QWEN2_VL_2B, 2.21e9, id="Qwen2-VL-2B"),
]


def shape_of(config: dict) -> ModelShape:
    shape = _from_config(config, "model")
    assert shape is not None
    return shape


@pytest.mark.parametrize(("config", "published"), PUBLISHED)
def test_counts_match_the_published_totals(config: dict, published: float) -> None:
    """Every routed expert, the shared experts and the router count (a dense reading gave Mixtral 7.24B and
    Qwen3-30B-A3B 3.34B); a Qwen2-VL / Qwen2.5-VL vision tower counts too."""
    assert shape_of(config).num_parameters == pytest.approx(published, rel=0.005)


def test_the_active_width_is_the_top_k_experts_and_the_shared_ones() -> None:
    mixtral, qwen2_moe, deepseek = shape_of(MIXTRAL_8X7B), shape_of(QWEN15_MOE_A27B), shape_of(DEEPSEEK_V3)
    assert mixtral.is_moe and mixtral.active_intermediate_size == 2 * 14336
    assert qwen2_moe.active_intermediate_size == 4 * 1408 + 5632
    # DeepSeek-V3's first 3 layers are dense (18432 wide), as wide as 8 experts of 2048 and the shared one
    assert deepseek.sparse_layers == 58 and deepseek.active_intermediate_size == 18432


def test_sparse_layers_follow_each_familys_rule() -> None:
    every_other = {**QWEN3_30B_A3B, "decoder_sparse_step": 2, "mlp_only_layers": [0]}
    assert shape_of(every_other).sparse_layers == 24  # layers 1, 3, ..., 47: the 2nd, 4th, ... (0 is dense anyway)
    assert shape_of({**every_other, "mlp_only_layers": [3]}).sparse_layers == 23
    assert shape_of({**DEEPSEEK_V3, "first_k_dense_replace": 0}).sparse_layers == 61


def test_a_dense_config_is_counted_as_before() -> None:
    dense = {k: v for k, v in MIXTRAL_8X7B.items() if k not in ("num_local_experts", "num_experts_per_tok")}
    shape = shape_of({**dense, "model_type": "mistral"})
    assert not shape.is_moe and shape.num_parameters == 7_241_732_096
    assert shape.active_intermediate_size == 14336


@pytest.mark.parametrize("model_type", ["qwen3_next", "jamba", "minimax", "jetmoe", "my_moe"])
def test_experts_of_a_family_not_modelled_give_no_shape(model_type: str) -> None:
    """Counted as a dense decoder, a config with experts would leave them out: unknown, so nothing judges it."""
    assert _from_config({**QWEN3_30B_A3B, "model_type": model_type}, "m") is None


@pytest.mark.parametrize(
    "value", [{"num_experts_per_tok": 0}, {"num_experts_per_tok": 129}, {"moe_intermediate_size": "768"}]
)
def test_unusable_expert_values_give_no_shape(value: dict) -> None:
    assert _from_config({**QWEN3_30B_A3B, **value}, "m") is None


@pytest.mark.parametrize(
    "name",
    [
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-235B-A22B-Instruct-2507",
        "Qwen/Qwen1.5-MoE-A2.7B",
        "Qwen/Qwen2-57B-A14B",
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "Qwen/Qwen3-VL-30B-A3B-Instruct",
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "openai/gpt-oss-20b",
        "allenai/OLMoE-1B-7B-0924",
    ],
)
def test_no_dense_row_of_the_table_takes_a_moe_name(name: str) -> None:
    """The built-in table holds dense models only: a mixture of experts named on the Hub is unknown (no estimate)
    rather than a dense row's count."""
    assert shape_for(name) is None


def test_a_local_config_json_counts_the_experts(tmp_path) -> None:
    local = LocalModel(tmp_path / "Mixtral-8x7B-Instruct-v0.1", MIXTRAL_8X7B)
    shape = shape_for("models/Mixtral-8x7B-Instruct-v0.1", local)
    assert shape is not None and shape.num_parameters == pytest.approx(46.70e9, rel=1e-3)


def test_another_familys_vision_tower_is_named_as_uncounted() -> None:
    llava = {**QWEN25_VL_7B, "model_type": "llava", "vision_config": {"hidden_size": 1024}}
    assert shape_of(llava).uncounted == ("the vision tower",) and shape_of(llava).vision_tower == 0
    assert shape_of(QWEN25_VL_7B).uncounted == ()


# ------------------------------------------------------------------------------------------ oracle: transformers

# Families the meta-device build checks beyond the published models: transformers 5.6's own defaults (each
# family's reference model) with fewer layers where the layout does not depend on them.
FAMILY_DEFAULTS = {
    "phimoe": {"num_hidden_layers": 4},
    "granitemoe": {"num_hidden_layers": 4},
    "granitemoeshared": {"num_hidden_layers": 4, "shared_intermediate_size": 1024},
    "olmoe": {"num_hidden_layers": 4},
    "gpt_oss": {"num_hidden_layers": 4},
    "glm4_moe": {"num_hidden_layers": 4, "attention_bias": True, "use_qk_norm": True, "head_dim": 128},
    "ernie4_5_moe": {"num_hidden_layers": 6, "moe_layer_start_index": 1, "moe_layer_interval": 2},
    "llama4_text": {"num_hidden_layers": 4, "interleave_moe_layer_step": 2},
    "qwen2_moe": {"num_hidden_layers": 6, "decoder_sparse_step": 2, "mlp_only_layers": [3]},
}


def _built(config: dict) -> int:
    """Parameters of the model transformers builds from `config` on the meta device (no memory, no weights)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    cfg = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    auto = transformers.AutoModelForImageTextToText if "vision_config" in config else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


def _defaults(model_type: str, changes: dict) -> dict:
    """The family's transformers 5.6 default config as a config.json (every key the count may read)."""
    transformers = pytest.importorskip("transformers")
    data = transformers.AutoConfig.for_model(model_type, **changes).to_dict()
    return {**data, "model_type": model_type}


@pytest.mark.oracle
@pytest.mark.parametrize(("config", "published"), PUBLISHED)
def test_counts_match_the_models_transformers_builds(config: dict, published: float) -> None:
    assert shape_of(config).num_parameters == _built(config)


@pytest.mark.oracle
@pytest.mark.parametrize("model_type", sorted(FAMILY_DEFAULTS))
def test_every_modelled_family_matches_its_transformers_build(model_type: str) -> None:
    config = _defaults(model_type, FAMILY_DEFAULTS[model_type])
    shape = shape_of(config)
    assert shape.is_moe and shape.num_parameters == _built(config)


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("model_type", "text"),
    [
        ("qwen3_vl_moe", {"num_hidden_layers": 4}),
        ("llama4", {"num_hidden_layers": 4, "interleave_moe_layer_step": 2}),
    ],
)
def test_a_composite_models_language_model_matches_its_build(model_type: str, text: dict) -> None:
    """A multimodal mixture of experts (its dimensions in `text_config`): the language model is counted, tied or
    not as the composite config says, and its vision tower is named as left out."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(model_type, text_config=text)
    shape = shape_of({**cfg.to_dict(), "model_type": model_type})
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    towers = ("visual", "vision", "multi_modal_projector")
    language = sum(p.numel() for n, p in model.named_parameters() if not any(t in n for t in towers))
    assert shape.is_moe and shape.uncounted == ("the vision tower",) and shape.num_parameters == language


def _routed_expert(name: str) -> bool:
    """A routed experts' parameter of transformers 5.6: under `experts` (Granite's `block_sparse_moe.input_linear` and
    `output_linear`; its `shared_mlp` has linears of the same names)."""
    granite = (".block_sparse_moe.input_linear.", ".block_sparse_moe.output_linear.")
    return any(part in name for part in (".experts.", *granite))


@pytest.mark.oracle
@pytest.mark.parametrize(
    "config",
    [
        *(pytest.param(c, id=c["model_type"] + "-hub") for c in (MIXTRAL_8X7B, QWEN15_MOE_A27B, DEEPSEEK_V3)),
        *(pytest.param(m, id=m) for m in sorted(FAMILY_DEFAULTS)),
    ],
)
def test_the_largest_and_the_active_parameters_match_the_build(config: dict | str) -> None:
    """The largest parameter (XF006: what `zero.Init` swaps whole) and the parameters a token passes through (verify's
    MFU: all but (E - k) / E of the routed experts) of the model transformers builds."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if isinstance(config, str):
        config = _defaults(config, FAMILY_DEFAULTS[config])
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    cfg = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        sizes = {n: p.numel() for n, p in transformers.AutoModelForCausalLM.from_config(cfg).named_parameters()}
    shape = shape_of(config)
    assert largest_parameter(shape)[0] == max(sizes.values())
    experts = sum(size for name, size in sizes.items() if _routed_expert(name))
    skipped = experts * (shape.num_experts - shape.experts_per_token) // shape.num_experts
    assert shape.active_parameters == sum(sizes.values()) - skipped
