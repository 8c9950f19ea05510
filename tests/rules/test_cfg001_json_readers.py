"""CFG001 on a DeepSpeed JSON with comments or a trailing comma names who rejects it: the HF Trainer (json.load) where
a config of the run reads the file; where none does, the assumption and DeepSpeed's own loader (hjson), which accepts
the file (explore-damage finding 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import run_cli

COMMENTED = """{
  // ZeRO-2 for the 1.3B run
  "train_batch_size": 32,
  "train_micro_batch_size_per_gpu": 4,
  "zero_optimization": {"stage": 2},
  "bf16": {"enabled": true},
}
"""
CONFIG = "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndataset: d\ntemplate: qwen\n"


def _cfg001(*paths: Path) -> str:
    _, out, _ = run_cli(["lint", "--format", "json", "--select", "CFG001", *map(str, paths)])
    (found,) = json.loads(out)["diagnostics"]
    return found["message"]


def test_a_json_no_config_reads_says_what_is_assumed(tmp_path: Path) -> None:
    (tmp_path / "ds_config.json").write_text(COMMENTED)
    message = _cfg001(tmp_path / "ds_config.json")
    assert "no config of the run reads this JSON: judged as the HF Trainer reads a `deepspeed:` file" in message
    assert "DeepSpeed's own loader (hjson" in message and "accepts comments and trailing commas" in message


def test_a_json_a_config_reads_names_the_hf_trainer(tmp_path: Path) -> None:
    (tmp_path / "ds_config.json").write_text(COMMENTED)
    (tmp_path / "train.yaml").write_text(CONFIG + "output_dir: out\ndeepspeed: ds_config.json\n")
    message = _cfg001(tmp_path)
    assert message.endswith("the HF Trainer reads the file for train.yaml with json.load")
    assert "hjson" not in message


@pytest.mark.oracle
def test_the_readers_named_do_what_the_message_says(tmp_path: Path) -> None:
    """deepspeed 0.19.8 reads the path with hjson (runtime/config.py L444) and takes the file; json.load does not."""
    config = pytest.importorskip("deepspeed.runtime.config")
    path = tmp_path / "ds_config.json"
    path.write_text(COMMENTED)
    loaded = config.DeepSpeedConfig(str(path))
    assert (loaded.train_batch_size, loaded.zero_optimization_stage) == (32, 2)
    with pytest.raises(json.JSONDecodeError):
        json.loads(COMMENTED)
