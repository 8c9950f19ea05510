"""`--format` means the same on `fix` as on `lint` (issue 45 item 3): json, json-lines, sarif and junit write the report
of the findings the fixes leave to stdout and nothing else there, with or without --write (no diff, no summary);
the human formats keep the diff on stdout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"


@pytest.fixture
def seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "seed"
    shutil.copytree(SEED, folder)
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("write", [False, True], ids=["diff", "write"])
def test_fix_format_json_is_pure_json_on_stdout(seed: Path, write: bool) -> None:
    before = (seed / "llama3_lora_sft.yaml").read_text()
    code, out, err = run_cli(["fix", "llama3_lora_sft.yaml", "--format", "json", *(["--write"] if write else [])])
    report = json.loads(out)  # the whole of stdout: no diff, no text line around it
    assert code == 1 and "{" not in err, err
    assert report["fixes"] == [
        {"file": "llama3_lora_sft.yaml", "written": write, "fixes": ["LF001 Replace with `bf16: true`"]}
    ]
    assert "compute_type" not in {d["key"] for d in report["diagnostics"]}  # the fixed finding is not left
    assert ((seed / "llama3_lora_sft.yaml").read_text() != before) is write


def test_fix_format_json_reports_what_lint_reports_after_the_write(seed: Path) -> None:
    _, out, _ = run_cli(["fix", ".", "--format", "json", "--write", "--unsafe-fixes"])
    _, after, _ = run_cli(["lint", ".", "--format", "json"])
    left = [(d["file"], d["code"], d["message"]) for d in json.loads(out)["diagnostics"]]
    assert left == [(d["file"], d["code"], d["message"]) for d in json.loads(after)["diagnostics"]]


@pytest.mark.parametrize("write", [False, True], ids=["diff", "write"])
def test_fix_format_sarif_and_json_lines_are_pure_on_stdout(seed: Path, write: bool) -> None:
    extra = ["--write"] if write else []
    _, sarif, _ = run_cli(["fix", "llama3_lora_sft.yaml", "--format", "sarif", *extra])
    assert json.loads(sarif)["version"] == "2.1.0"
    _, lines, _ = run_cli(["fix", "llama3_lora_sft.yaml", "--format", "json-lines"])
    assert all(json.loads(line)["code"] for line in lines.splitlines())


def test_fix_human_format_keeps_the_diff_on_stdout(seed: Path) -> None:
    code, out, err = run_cli(["fix", "llama3_lora_sft.yaml"])
    assert code == 1 and out.startswith("--- a/llama3_lora_sft.yaml") and "Would fix 1 problem(s)" in err
