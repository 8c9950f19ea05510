"""`cfgopt estimate --data / --plot` and the memory estimate sized by the local data (issue 36)."""

from __future__ import annotations

import json
import sys

from repo_paths import ROOT
from rule_cases import run_cli

CASES = ROOT / "fixtures" / "data"


def test_data_profile_printed_and_used_for_memory(monkeypatch, tmp_path):
    monkeypatch.setenv("CFGOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(CASES / "short")
    code, out, _ = run_cli(["estimate", "train.yaml", "--target", "h200", "--data"])
    assert code == 0
    assert "data: short (alpaca; 60 rows); memory sized by the longest sample 56 tokens" in out
    assert "tokens per sample: p50" in out and "% of samples cut" in out and "padding at micro-batch 4" in out
    assert "(56 per sequence)" in out  # the peak batch: the longest sample, padded, not cutoff_len 2048
    code, out, _ = run_cli(["estimate", "train.yaml", "--target", "h200", "--format", "json"])
    data = json.loads(out)
    assert data["data"]["profiled"] and data["seq_len"] == 56


def test_the_template_allowance_is_stated(monkeypatch, tmp_path):
    """The counts include a fixed allowance for the chat template, not the job's template: both outputs say so."""
    monkeypatch.setenv("CFGOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(CASES / "short")
    said = (
        "plus a fixed template allowance of 10 tokens per turn (8 before the response, 2 after), not the job's "
        "template: its prefix, system markup and default system prompt are not counted"
    )
    _, out, _ = run_cli(["estimate", "train.yaml", "--target", "h200", "--data"])
    assert f"per-sample error median 11%, p90 28% (code: p90 44%); {said}\n" in out  # after the tokenizer
    _, out, _ = run_cli(["estimate", "train.yaml", "--target", "h200", "--format", "json"])
    allowance = json.loads(out)["data"]["template_allowance"]
    assert allowance == {"before_response": 8, "after_response": 2, "job_template_rendered": False, "said": said}


def test_without_local_data_the_assumption_is_said(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "train.yaml"
    config.write_text((CASES / "short" / "train.yaml").read_text())
    _code, out, _ = run_cli(["estimate", str(config), "--target", "h200"])
    assert (
        "data: not profiled (no dataset_info.json found under `dataset_dir: data`): sequences assumed "
        "cutoff_len (2048) tokens long" in out
    )
    assert "(2048 per sequence)" in out


def test_plot_without_matplotlib_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("CFGOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(CASES / "short")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run_cli(["estimate", "train.yaml", "--target", "h200", "--plot", str(tmp_path / "h.png")])
    assert code == 2 and "--plot needs matplotlib" in err


def test_a_given_fill_is_named_as_given_beside_the_profile(monkeypatch, tmp_path):
    """`--fill` sizes the memory (a run's own lengths); the line says so and keeps the profile's figure apart."""
    monkeypatch.setenv("CFGOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(CASES / "short")
    code, out, _ = run_cli(["estimate", "train.yaml", "--target", "h200", "--fill", "0.5"])
    assert code == 0
    assert "memory sized by --fill 0.50 (" in out and "the profile's longest sample 56 tokens)" in out
