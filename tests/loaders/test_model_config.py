"""A local model folder's config.json (cfgopt/loaders/model_config.py): found as LLaMA-Factory finds it (absolute,
else against the config's folder, then the current one), read through the bounded reader, so that a FIFO or a
device named config.json never hangs a lint, and handed to the model facts as a `LocalModel`."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from cfgopt.knowledge.model_family import SOURCE_CONFIG, SOURCE_NAME, LocalModel, model_name
from cfgopt.knowledge.model_shapes import shape_for
from cfgopt.loaders.model_config import local_model

TINY = {
    "model_type": "llama",
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "vocab_size": 64,
}


def _model(folder: Path, config: object = TINY) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_a_relative_path_is_tried_against_the_configs_folder(tmp_path: Path) -> None:
    folder = _model(tmp_path / "models" / "tiny")
    assert local_model(" models/tiny ", tmp_path) == LocalModel(folder, TINY)
    found = model_name("models/tiny", local_model("models/tiny", tmp_path))
    assert (found.model_type, found.source) == ("llama", SOURCE_CONFIG)
    assert shape_for("models/tiny", local_model("models/tiny", tmp_path)).name == "tiny"


def test_then_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _model(tmp_path / "tiny")
    monkeypatch.chdir(tmp_path)
    assert local_model("tiny", tmp_path / "elsewhere") == LocalModel(Path("tiny"), TINY)


@pytest.mark.parametrize("ref", [None, 3, "", "  ", "Qwen/Qwen3-8B"])
def test_no_local_folder_is_none(tmp_path: Path, ref: object) -> None:
    assert local_model(ref, tmp_path) is None


def test_a_config_json_that_is_not_a_json_object_is_none(tmp_path: Path) -> None:
    _model(tmp_path / "list", [1, 2])
    (tmp_path / "bytes").mkdir()
    (tmp_path / "bytes" / "config.json").write_bytes(b"\xff not json")
    assert local_model("list", tmp_path) is None
    assert local_model("bytes", tmp_path) is None


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
    assert _within(HANG_BOUND_S, lambda: local_model("qwen3-8b", tmp_path)) is None
    assert model_name("qwen3-8b", None).source == SOURCE_NAME


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_named_config_json_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").symlink_to("/dev/zero")
    assert _within(HANG_BOUND_S, lambda: local_model("qwen3-8b", tmp_path)) is None
