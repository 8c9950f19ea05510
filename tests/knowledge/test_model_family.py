"""Which model a config trains (cfgopt/knowledge/model_family.py): every path component, nearest first, and a local
config.json where the job's loader read one (`LocalModel`; the reading is tests/loaders/test_model_config.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.knowledge.model_family import (
    SOURCE_CONFIG,
    SOURCE_NAME,
    SOURCE_PARENT,
    LocalModel,
    liger_patches,
    model_name,
)


@pytest.mark.parametrize(
    ("ref", "text", "source"),
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama-3-8b-instruct", SOURCE_NAME),
        ("/data/chatglm2-6b/model", "chatglm2-6b", SOURCE_PARENT),
        ("C:\\\\models\\\\Qwen2.5-7B\\\\final", "qwen2.5-7b", SOURCE_PARENT),
        ("/hub/models--Qwen--Qwen3-8B/snapshots/abc", "models--qwen--qwen3-8b", SOURCE_PARENT),
        ("/data/llama-runs/mistral-7b-sft/", "mistral-7b-sft", SOURCE_NAME),
        ("/data/unnamed/model", "model", SOURCE_NAME),
    ],
)
def test_the_component_that_names_the_model(ref: str, text: str, source: str) -> None:
    assert model_name(ref)[::3] == (text, source)


def test_a_local_config_json_says_the_family() -> None:
    local = LocalModel(Path("chatglm2-6b/model"), {"model_type": "llama", "architectures": ["LlamaForCausalLM", 1]})
    found = model_name("chatglm2-6b/model", local)
    assert (found.model_type, found.architectures, found.source) == ("llama", ("LlamaForCausalLM",), SOURCE_CONFIG)
    assert liger_patches("chatglm2-6b/model", local)
    assert not liger_patches("chatglm2-6b/model")  # by its name: ChatGLM2


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", True),
        ("/ckpt/Meta-Llama-3-8B-Instruct/checkpoint-500", True),
        ("/data/chatglm2-6b/model", False),
        ("Qwen/Qwen3-VL-8B-Instruct", False),
        ("meta-llama/Llama-4-Scout-17B-16E", False),
    ],
)
def test_liger_family_from_the_name(ref: str, expected: bool) -> None:
    assert liger_patches(ref) is expected


@pytest.mark.parametrize(("model_type", "expected"), [("qwen3_vl", False), ("qwen2_moe", False), ("qwen3_5", True)])
def test_liger_family_from_the_model_type(model_type: str, expected: bool) -> None:
    assert liger_patches("m", LocalModel(Path("m"), {"model_type": model_type})) is expected


def test_a_config_json_without_a_string_model_type_says_none() -> None:
    found = model_name("qwen3-8b", LocalModel(Path("qwen3-8b"), {"model_type": 3, "architectures": "Qwen3"}))
    assert (found.model_type, found.architectures, found.source) == ("", (), SOURCE_CONFIG)


def test_knowledge_reads_no_file(tmp_path: Path) -> None:
    """A local folder with a config.json changes nothing here: only the loader's `LocalModel` does."""
    (tmp_path / "chatglm2-6b").mkdir()
    (tmp_path / "chatglm2-6b" / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    assert model_name(str(tmp_path / "chatglm2-6b")).source == SOURCE_NAME
