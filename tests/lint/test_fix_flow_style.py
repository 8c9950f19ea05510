"""A finding with no fix because of how the YAML is written (cfgopt/lint/unwritable.py): a flow mapping, where no
key can be added or removed by a span edit, and the keys a `<<:` merge brings in. `cfgopt fix` says which fix the
same job in block style gets and why it is not made here (as for tags and aliases), instead of leaving the error
without a word; a block-style file, and a fix `fix` would not apply anyway, get no such line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from rule_cases import ROOT, run_cli

from cfgopt.lint.unwritable import FLOW_STYLE, MERGED_KEY

SEED = ROOT / "fixtures" / "seed"
JOB = {
    "model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct",
    "stage": "sft",
    "do_train": True,
    "finetuning_type": "lora",
    "lora_target": "q_proj,v_proj",
    "deepspeed": "ds_z3_config.json",
    "compute_type": "bf16",
    "flash_attn": True,
    "disable_torch_compile": False,
    "dataset": "alpaca_en_demo",
    "template": "llama3",
    "cutoff_len": 1024,
    "output_dir": "output",
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 4,
    "learning_rate": 5.0e-5,
    "num_train_epochs": 3.0,
}
MI300X = ["--unsafe-fixes", "--target", "mi300x", "--gpus", "8"]


def job_folder(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(SEED / "ds_z3_config.json", tmp_path / "ds_z3_config.json")
    (tmp_path / "train.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "train.yaml"


def not_fixed(err: str) -> dict[str, str]:
    """`train.yaml:L:C: CODE not fixed: DESCRIPTION: WHY` lines, by code."""
    found = {}
    for line in err.splitlines():
        where, _, rest = line.partition(" not fixed: ")
        if rest and where.startswith("train.yaml:"):
            found[where.rsplit(" ", 1)[1]] = rest
    return found


def test_a_one_line_flow_mapping_says_why_the_removal_and_the_plan_are_not_made(tmp_path, monkeypatch) -> None:
    flow = yaml.safe_dump(JOB, default_flow_style=True, sort_keys=False, width=10_000)
    assert flow.count("\n") == 1
    config = job_folder(tmp_path, flow, monkeypatch)
    code, _, err = run_cli(["fix", "--write", *MI300X, "train.yaml"])
    said = not_fixed(err)
    assert said["LF001"] == f"Remove `disable_torch_compile`: {FLOW_STYLE}"
    [plan] = [why for why in said.values() if why.startswith("Speed plan for 8 x mi300x")]
    assert plan.endswith(FLOW_STYLE)
    assert code == 1 and "bf16: true" in config.read_text()  # what span edits can write is written


def test_keys_a_merge_brings_in_say_so(tmp_path, monkeypatch) -> None:
    block = yaml.safe_dump({k: v for k, v in JOB.items() if k not in ("compute_type", "flash_attn")}, sort_keys=False)
    job_folder(tmp_path, block + "<<: {compute_type: bf16, flash_attn: true}\n", monkeypatch)
    _, _, err = run_cli(["fix", *MI300X, "train.yaml"])
    said = not_fixed(err)
    assert said["LF001"].endswith(f": {MERGED_KEY}") and said["LF003"].startswith("Use `sdpa`")
    assert said["LF003"].endswith(f": {MERGED_KEY}")


def test_block_style_and_fixes_not_applied_anyway_get_no_line(tmp_path, monkeypatch) -> None:
    job_folder(tmp_path, yaml.safe_dump(JOB, sort_keys=False), monkeypatch)
    assert not_fixed(run_cli(["fix", *MI300X, "train.yaml"])[2]) == {}
    flow = yaml.safe_dump(JOB, default_flow_style=True, sort_keys=False, width=10_000)
    (tmp_path / "train.yaml").write_text(flow)
    # without --unsafe-fixes the unsafe removal and the plan would not be applied in block style either
    assert not_fixed(run_cli(["fix", "--target", "mi300x", "--gpus", "8", "train.yaml"])[2]) == {}
