"""The Python API (`cfgopt.lint_text`, `cfgopt.fix_text`)."""

from __future__ import annotations

import pytest
from rule_cases import ROOT

import cfgopt

SEED = ROOT / "fixtures" / "seed"
SEED_YAML = (SEED / "llama3_lora_sft.yaml").read_text()


def test_lint_text_returns_the_cli_diagnostics() -> None:
    diags = cfgopt.lint_text(SEED_YAML, kind="yaml", select=["LF"], base_dir=SEED)
    assert {(d.code, d.key) for d in diags if d.severity.name == "ERROR"} == {
        ("LF001", "compute_type"),
        ("LF001", "disable_torch_compile"),
        ("LF003", "flash_attn"),
    }
    line, column = next(d for d in diags if d.key == "flash_attn").line_column
    assert SEED_YAML.splitlines()[line - 1][column - 1 :].startswith("true")


def test_fix_text_safe_and_unsafe() -> None:
    safe, _ = cfgopt.fix_text(SEED_YAML, kind="yaml", select=["LF"], base_dir=SEED)
    assert "bf16: true" in safe and "flash_attn: true" in safe
    unsafe, remaining = cfgopt.fix_text(SEED_YAML, kind="yaml", select=["LF"], unsafe_fixes=True, base_dir=SEED)
    assert "flash_attn: sdpa" in unsafe and not [d for d in remaining if d.severity.name == "ERROR"]
    assert unsafe.splitlines()[0] == SEED_YAML.splitlines()[0]  # comments kept


def test_json_and_targets() -> None:
    text = '{"train_batch_size": 1, "zero_optimization": {"stage": 2}, "aio": {"use_gds": true}}'
    assert [d.code for d in cfgopt.lint_text(text, kind="json", select=["DS009"])] == ["DS009"]
    assert cfgopt.lint_text(text, kind="json", select=["DS009"], target="h100") == []
    with pytest.raises(KeyError):
        cfgopt.lint_text(text, kind="json", target="tpu")
    with pytest.raises(ValueError, match="kind"):
        cfgopt.lint_text(text, kind="toml")


def test_the_text_is_judged_as_a_file_in_base_dir_and_nothing_is_written_there(tmp_path) -> None:
    """`base_dir`: the text stands in for `base_dir / name` (the DeepSpeed JSON it names is found beside it, a file
    of that name on disk is not read), and the folder is left as it was: no temporary file or folder in it."""
    import shutil

    folder = tmp_path / "seed"
    shutil.copytree(SEED, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    found = cfgopt.lint_text(SEED_YAML, select=["LF005"], base_dir=folder)
    alone = cfgopt.lint_text(SEED_YAML, select=["LF005"])  # an empty temporary folder: the JSON is not there
    assert found == [] and [d.code for d in alone] == ["LF005"]
    clean = SEED_YAML.replace("compute_type: bf16", "bf16: true")
    stood_in = cfgopt.lint_text(clean, select=["LF001"], name="llama3_lora_sft.yaml", base_dir=folder)
    assert [d.key for d in stood_in] == ["disable_torch_compile"]  # the text's findings, not the file's
    fixed, _ = cfgopt.fix_text(SEED_YAML, select=["LF"], base_dir=folder, name="llama3_lora_sft.yaml")
    assert "bf16: true" in fixed
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
