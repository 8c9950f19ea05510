"""The CPU runs of verify's real trainer that more than one test reads (tests/verify/conftest.py makes each once a
session): the job, and the run as the tests see it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_paths import ROOT
from tiny_model import TINY

# A LoRA SFT job with neat packing and the seed's mistake, `flash_attn: true`: the original crashes at model load,
# and `cfgopt fix` changes the attention alone (LF003, to sdpa), so the fixed run is this job neat-packed under SDPA.
NEAT_PACKED_FLASH_TRUE = """model_name_or_path: tiny
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
cutoff_len: 256
neat_packing: true
output_dir: {out}
per_device_train_batch_size: 2
learning_rate: 1.0e-4
flash_attn: true
"""


@dataclass(frozen=True)
class VerifyRun:
    """One `cfgopt verify` invocation: its process, its --json report and the folder it ran in."""

    proc: subprocess.CompletedProcess[str]
    report: dict[str, Any]
    folder: Path


def verify_tiny(folder: Path, config_text: str, cache_dir: Path, *args: str) -> VerifyRun:
    """`cfgopt verify` of `config_text` (with `{out}`: an output_dir in `folder`) on the tiny model, synthetic
    data, on the CPU (no GPU in CI), run in `folder`."""
    (folder / "tiny").mkdir()
    (folder / "tiny" / "config.json").write_text(json.dumps(TINY))
    cfg = folder / "cfg.yaml"
    cfg.write_text(config_text.format(out=folder / "users_output_dir"))
    report = folder / "report.json"
    options = ["--target", "cpu", "--mode", "synthetic", "--cache-dir", str(cache_dir), "--json", str(report)]
    proc = subprocess.run(
        [sys.executable, "-m", "cfgopt", "verify", str(cfg), *options, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "DISABLE_VERSION_CHECK": "1", "PYTHONPATH": str(ROOT)},
    )
    assert report.exists(), proc.stderr[-3000:]
    return VerifyRun(proc, json.loads(report.read_text()), folder)
