"""Wording that said something untrue (issue 35): each message now says what holds."""

from __future__ import annotations

import json

import pytest
from rule_cases import ROOT, run_cli

from cfgopt.cli import build_parser
from cfgopt.job.settings import Settings


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_select_help_says_advice_is_on() -> None:
    lint = build_parser("lint")
    (select,) = [a for a in lint._actions if "--select" in a.option_strings]
    assert "opt-in);" not in select.help and "PF and MEM included" in select.help


def test_doc003_name_covers_deepspeed_missing() -> None:
    from cfgopt.doctor.checks import NAMES

    assert NAMES["DOC003"] == "deepspeed-or-cpu-adam-unavailable"


def test_pf009_says_liger_is_off() -> None:
    _, out, _ = run_cli(["lint", "--format", "json", "--target", "h200", "fixtures/rules/PF009/liger/train.yaml"])
    (pf009,) = [d for d in json.loads(out)["diagnostics"] if d["code"] == "PF009"]
    assert pf009["message"].startswith("Liger kernels are off here; turning them on")


def test_pf007_and_mem004_count_the_same_tokens_for_dpo(tmp_path) -> None:
    """DPO's micro-batch holds chosen and rejected: both rules count 2 x batch x cutoff_len."""
    config = tmp_path / "train.yaml"
    text = (ROOT / "fixtures/rules/PF007/dpo/train.yaml").read_text(encoding="utf-8")
    config.write_text(text, encoding="utf-8")
    _, out, _ = run_cli(["lint", "--format", "json", "--select", "ALL", "--target", "h200", str(config)])
    said = {d["code"]: d["message"] for d in json.loads(out)["diagnostics"]}
    assert "4096 tokens per micro-batch" in said["PF007"]
    assert "2048 tokens" not in " ".join(said.values())


def test_a_target_without_memory_is_not_called_unstated() -> None:
    from cfgopt.plan.wording import no_memory

    assert no_memory(Settings(target_name="cpu")) == "cpu: no GPU memory to estimate against"
    assert no_memory(Settings()) == "no target stated"


def test_verify_target_none_and_cpu_are_stated() -> None:
    from cfgopt.verify.machine import run_target

    assert run_target("none") == (None, "--target")
    assert run_target("cpu") == ("cpu", "--target")


def test_tune_labels_cpu_runs_fp32() -> None:
    from cfgopt.plan.space import Knobs

    knobs = Knobs(1, 1, True, "sdpa", False, False, "none", precision="fp16")
    assert " fp16 " in knobs.label()
    assert "fp32 (run; fp16 planned)" in knobs.label(on_cpu=True)


def test_tune_counts_device_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    import inspect

    from cfgopt.tune import report

    assert "GPU s " not in inspect.getsource(report.verdict) and "device-seconds" in inspect.getsource(report.verdict)


def test_verify_mfu_footnote_only_with_an_mfu() -> None:
    from cfgopt.verify.comparison import FLOP_CONVENTION, table

    assert FLOP_CONVENTION not in table({"mfu": None}, {}, {})
    assert FLOP_CONVENTION in table({"mfu": 0.31}, {"mfu": 0.4}, {})


def test_not_fixed_reason_names_scripts_too() -> None:
    from cfgopt.lint.fixer import _OUTSIDE

    assert "config or launch script names it" in _OUTSIDE
