"""Which model a config trains (cfgopt/knowledge/model_family.py): every path component, nearest first, and a local
config.json where the job's loader read one (`LocalModel`; the reading is tests/loaders/test_model_config.py's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgopt.knowledge import model_family
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


# The family words as one pattern, as they were before `names_a_family` (the oracle of its words and numbered words)
OLD_FAMILY_WORDS = re.compile(
    r"llama|qwen|qwq|mistral|mixtral|ministral|gemma|phi-?\d|granite|glm|olmo|llava|gpt-?oss|gpt-?2|baichuan|"
    r"internlm|intern-?vl|deepseek|falcon|bloom|starcoder|minicpm|yi-\d|yi-coder|xverse|aquila|orion|cohere|"
    r"command-r|dbrx|jamba|pixtral|idefics|smollm|nemotron|exaone|hunyuan|kimi|ernie|seed-|mamba|stablelm|"
    r"vicuna|zephyr|tinyllama|openchat|solar|codegen|opt-\d|bert|t5-|flan|mpt-"
)
NAME_FRAGMENTS = sorted(
    set(re.findall(r"[a-z0-9]+", OLD_FAMILY_WORDS.pattern))
    | set(re.findall(r"[a-z0-9]+", model_family.LIGER_NAMES.pattern))
    | set("-_.0123456789 /")
    | {"gpt", "intern", "\u0663", "LLAMA", "Llama-4", "\u212a"}
)


@settings(max_examples=400)
@given(st.lists(st.sampled_from(NAME_FRAGMENTS), max_size=7).map("".join))
def test_family_words_and_liger_names_answer_as_their_patterns(text: str) -> None:
    """`names_a_family` (words looked up with `in`) finds a family where the old single pattern did; the Llama
    shortcut of `liger_patches` says yes only where `LIGER_NAMES` would."""
    assert model_family.names_a_family(text) == bool(OLD_FAMILY_WORDS.search(text)), text
    liger = re.compile(model_family.LIGER_NAMES.pattern, model_family.LIGER_NAMES.flags)
    if model_family._llama_before_4(text):
        assert liger.search(text), text
    assert liger_patches(text) == bool(liger.search(model_name(text).text)) if text.strip() else True


def test_a_llama_name_compiles_no_family_pattern() -> None:
    """The seed's model names its family and Liger's by plain words: no family pattern is compiled for it."""
    fresh = [model_family.NUMBERED_FAMILY_WORDS, model_family.LIGER_NAMES, model_family.BF16_TRAINED_NAMES]
    saved = [p._compiled for p in fresh]
    try:
        for p in fresh:
            p._compiled = None
        ref = "meta-llama/Meta-Llama-3-8B-Instruct"
        assert liger_patches(ref) and not model_family.overflows_fp16(ref)
        assert not model_family.soft_capped_attention(ref)
        assert all(p._compiled is None for p in fresh)
    finally:
        for p, c in zip(fresh, saved, strict=True):
            p._compiled = c
