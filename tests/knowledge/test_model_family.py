"""Which model a config trains (cfgopt/knowledge/model_family.py): every path component, nearest first, and a local
config.json read through the bounded reader, so that a FIFO or a device named config.json never hangs a lint."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from cfgopt.knowledge import model_family
from cfgopt.knowledge.model_family import SOURCE_CONFIG, SOURCE_NAME, SOURCE_PARENT, liger_patches, model_name


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
def test_the_component_that_names_the_model(tmp_path: Path, ref: str, text: str, source: str) -> None:
    assert model_name(ref, tmp_path)[::3] == (text, source)


def test_a_local_config_json_says_the_family(tmp_path: Path) -> None:
    folder = tmp_path / "chatglm2-6b" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}), encoding="utf-8"
    )
    found = model_name("chatglm2-6b/model", tmp_path)
    assert (found.model_type, found.architectures, found.source) == ("llama", ("LlamaForCausalLM",), SOURCE_CONFIG)
    assert liger_patches("chatglm2-6b/model", tmp_path)


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
def test_liger_family_from_the_name(tmp_path: Path, ref: str, expected: bool) -> None:
    assert liger_patches(ref, tmp_path) is expected


@pytest.mark.parametrize(("model_type", "expected"), [("qwen3_vl", False), ("qwen2_moe", False), ("qwen3_5", True)])
def test_liger_family_from_the_model_type(tmp_path: Path, model_type: str, expected: bool) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": model_type}), encoding="utf-8")
    assert liger_patches("m", tmp_path) is expected


HANG_BOUND_S = 120  # a blocking read never returns; a loaded machine is slow, not stuck


def _within(seconds: float, call) -> object:
    """`call()` on a thread; fails when it does not return in time (a blocking read)."""
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the config.json read blocked"
    return result[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_config_json_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "qwen3-8b").mkdir()
    os.mkfifo(tmp_path / "qwen3-8b" / "config.json")
    found = _within(HANG_BOUND_S, lambda: model_name("qwen3-8b", tmp_path))
    assert found.source == SOURCE_NAME and found.model_type == ""


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_named_config_json_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").symlink_to("/dev/zero")
    found = _within(HANG_BOUND_S, lambda: model_name("qwen3-8b", tmp_path))
    assert found.source == SOURCE_NAME


def test_a_config_json_that_is_not_json_falls_back_to_the_name(tmp_path: Path) -> None:
    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").write_bytes(b"\xff not json")
    assert model_name("qwen3-8b", tmp_path).source == SOURCE_NAME
    assert model_family.local_config("qwen3-8b", tmp_path) is None
