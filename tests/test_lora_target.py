"""LF037's model type: a local config.json's `model_type`, else the model's name for the families it knows; a
multimodal or mixture-of-experts name is not judged (its modules differ)."""

from __future__ import annotations

import json

import pytest

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
def test_model_type_from_the_name(tmp_path, name, expected):
    assert model_type_of(name, tmp_path) == expected


def test_a_local_config_json_wins(tmp_path):
    folder = tmp_path / "models" / "my-llama-3-8b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "chatglm"}), encoding="utf-8")
    assert model_type_of("models/my-llama-3-8b", tmp_path) == "chatglm"
