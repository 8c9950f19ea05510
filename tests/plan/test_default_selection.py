"""Issue 22: the optimizer by default. What holds for the judged job (speed and memory included) is on without
any flag, `fix --write --unsafe-fixes` writes the speed plan, and the plan keeps a YAML and its DeepSpeed JSON
consistent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from repo_paths import TESTS_DATA
from rule_cases import run_cli

DATA = TESTS_DATA / "lora_fp16_zero3_offload"  # Llama-3-8B LoRA, fp16, ZeRO-3 + CPU offload


def _lint(*args: str) -> tuple[int, list[dict]]:
    code, out, _ = run_cli(["lint", "--format", "json", *args])
    return code, json.loads(out)["diagnostics"]


def _copy(tmp_path: Path, with_project_config: bool = True) -> Path:
    folder = tmp_path / "job"
    shutil.copytree(DATA, folder)
    if not with_project_config:
        (folder / "pyproject.toml").unlink()
    return folder


def test_plain_lint_reports_fp16_offload_and_zero3_for_the_stated_target(tmp_path: Path) -> None:
    folder = _copy(tmp_path)  # pyproject.toml: target = "mi300x", gpus = 8
    code, found = _lint(str(folder))
    warnings = {d["code"] for d in found if d["severity"] == "warning"}
    assert {"PF001", "PF051", "MEM003"} <= warnings, found  # fp16, the offload, the unneeded ZeRO-3
    assert code == 1


def test_fix_with_unsafe_fixes_writes_the_plan_and_leaves_a_clean_pair(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    json_before = (folder / "ds_z3_offload_config.json").read_text()
    code, _, err = run_cli(["fix", "--write", "--unsafe-fixes", str(folder)])
    assert code == 0, err
    assert "Speed plan for 8 x mi300x" in err
    yaml_text = (folder / "llama3_lora_fp16.yaml").read_text()
    assert "bf16: true" in yaml_text and "fp16: true" not in yaml_text
    assert "\ndeepspeed:" not in yaml_text  # no DeepSpeed, so no ZeRO-3 and no offload
    # the removed key's end-of-line comment goes with its line; the comment on the line above it stays
    assert "# the team's standard JSON" not in yaml_text and "# ZeRO-3 with the optimizer on the CPU" in yaml_text
    # the plan dropped DeepSpeed: the JSON's offload fix is moot and the JSON is not edited for it
    assert '"offload_optimizer"' in (folder / "ds_z3_offload_config.json").read_text()
    assert json_before.count("offload_optimizer") == 1
    code, found = _lint(str(folder))
    assert [d for d in found if d["severity"] in ("error", "warning")] == [] and code == 0


def test_plain_fix_says_how_many_unsafe_fixes_wait_and_names_the_plan(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _, _, err = run_cli(["fix", "--write", str(folder)])
    assert "unsafe fix(es) wait: `--unsafe-fixes` applies them, among them 1 speed plan(s) (expected" in err


def test_offload_for_lora_fires_with_no_target_and_no_project_config(tmp_path: Path) -> None:
    folder = _copy(tmp_path, with_project_config=False)
    _, found = _lint("--isolated", str(folder))
    assert "PF051" in {d["code"] for d in found}


@pytest.mark.parametrize("keep_deepspeed", [False, True])
def test_the_plan_keeps_the_batch_shape_a_kept_deepspeed_json_states(tmp_path: Path, keep_deepspeed: bool) -> None:
    """A JSON with explicit batch values next to a YAML: the plan may not change the YAML's batch while it keeps
    DeepSpeed (the HF Trainer refuses a mismatch, XF002), and a fix never leaves the pair inconsistent."""
    folder = tmp_path / "job"
    folder.mkdir()
    ds = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 8,
        "train_batch_size": 64,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2},
    }
    (folder / "ds.json").write_text(json.dumps(ds, indent=2) + "\n")
    text = (DATA / "llama3_lora_fp16.yaml").read_text()
    text = text.replace("ds_z3_offload_config.json", "ds.json").replace("fp16: true", "bf16: true")
    (folder / "train.yaml").write_text(text)
    (folder / "pyproject.toml").write_text('[tool.cfgopt]\ntarget = "mi300x"\ngpus = 8\n')
    keep = ["--ignore", "MEM003,PF050"] if keep_deepspeed else []  # no ZeRO knob: the plan keeps DeepSpeed
    code, _, err = run_cli(["fix", "--write", "--unsafe-fixes", *keep, str(folder / "train.yaml")])
    assert code in (0, 1), err
    _, found = _lint(str(folder))
    assert not [d for d in found if d["code"] == "XF002"], found
    written = (folder / "train.yaml").read_text()
    assert ("deepspeed: ds.json" in written) == keep_deepspeed, written
    if keep_deepspeed:  # DeepSpeed kept: the batch as the JSON states it, the rest of the plan still written
        assert "disable_gradient_checkpointing: true" in written
        assert "per_device_train_batch_size: 1\n" in written and "gradient_accumulation_steps: 8\n" in written


def test_a_note_about_the_run_appears_once(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"acc{i}.yaml").write_text(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: bf16\n"
        )
    _, found = _lint(str(tmp_path))
    notes = [d for d in found if d["code"] == "CFG003"]
    assert len(notes) == 1 and "(and 2 more such file(s) in this run)" in notes[0]["message"], found


def test_estimate_on_a_chat_config_says_it_estimates_training_only(tmp_path: Path) -> None:
    cfg = tmp_path / "chat.yaml"
    cfg.write_text(
        "model_name_or_path: Qwen/Qwen3-4B-Instruct-2507\ntemplate: qwen3_nothink\ninfer_backend: huggingface\n"
    )
    code, out, err = run_cli(["estimate", "--target", "h200", str(cfg)])
    assert code == 2 and out == ""
    assert "models the memory of training only" in err and "chat / export / eval config" in err
