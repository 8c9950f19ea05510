"""LF037's model type: a local config.json's `model_type`, else the model's name for the families it knows; a
multimodal or mixture-of-experts name is not judged (its modules differ)."""

from __future__ import annotations

import json

import pytest

from cfgopt.loaders.model_config import local_model
from cfgopt.rules.lf037_lora_target_not_in_model import model_type_of


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("THUDM/chatglm3-6b", "chatglm"),
        ("THUDM/glm-4-9b-chat", "chatglm"),
        ("THUDM/glm-4-9b-chat-hf", ""),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", ""),
        ("Qwen/Qwen3-30B-A3B", ""),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("mistralai/Mixtral-8x7B-v0.1", ""),
        ("some/unknown-model", ""),
    ],
)
def test_model_type_from_the_name(name, expected):
    assert model_type_of(name, None) == (expected, bool(expected))


def test_a_local_config_json_wins(tmp_path):
    folder = tmp_path / "models" / "my-llama-3-8b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "chatglm"}), encoding="utf-8")
    assert model_type_of("models/my-llama-3-8b", local_model("models/my-llama-3-8b", tmp_path)) == ("chatglm", True)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/data/models/chatglm2-6b/model", ("chatglm", False)),  # a folder above the last: not certain
        ("/ckpt/Meta-Llama-3-8B-Instruct/checkpoint-500", ("llama", False)),
        ("/hub/models--Qwen--Qwen3-8B/snapshots/0123abcd", ("qwen3", False)),
        ("/data/chatglm-runs/Qwen3-8B", ("qwen3", True)),  # the nearest component that names a family wins
        ("/data/chatglm-runs/merged", ("chatglm", False)),
    ],
)
def test_model_type_from_every_path_component(name, expected):
    assert model_type_of(name, None) == expected


TINY = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 64,
    "head_dim": 8,
}


@pytest.mark.parametrize("model_type", ["llama", "mistral", "qwen2", "qwen3", "gemma2"])
def test_module_names_are_the_real_models(model_type):
    """The table holds every module name of a (tiny) real model of each family, so a name outside it matches
    nothing there."""
    transformers = pytest.importorskip("transformers")
    from cfgopt.rules.lf037_lora_target_not_in_model import MODULES

    config = transformers.AutoConfig.for_model(model_type, **TINY)
    model = transformers.AutoModelForCausalLM.from_config(config)
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules() if name and not name[-1].isdigit()}
    assert names <= MODULES[model_type], sorted(names - MODULES[model_type])


def test_peft_stops_when_no_target_matches():
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model("llama", **TINY))
    with pytest.raises(ValueError, match="not found in the base model"):
        peft.get_peft_model(model, peft.LoraConfig(target_modules=["query_key_value"]))
    adapted = peft.get_peft_model(model, peft.LoraConfig(target_modules=["q_proj", "query_key_value"]))
    assert adapted is not None  # one matching name is enough: the others adapt nothing


def test_plain_module_names_as_the_pattern_took_them() -> None:
    """`_plain_name` (an ASCII identifier) takes the names `[A-Za-z_][A-Za-z0-9_]*` took, kept here as the oracle:
    a dotted path, a pattern or a non-ASCII name is not judged."""
    import itertools
    import re

    from cfgopt.rules.lf037_lora_target_not_in_model import _plain_name

    old = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    for n in range(5):
        for name in map("".join, itertools.product("aZ_09.*\u00e9\u0663 ", repeat=n)):
            assert _plain_name(name) == bool(old.fullmatch(name)), name
