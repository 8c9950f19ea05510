"""The summary line says what each group of files was judged for (its own project config, target, GPU count and
environment), whatever the order of the paths; messages stay whole in the machine formats (`detail`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

from cfgopt.rules.base import MAX_MESSAGE


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _summary(*argv: str) -> str:
    _, _, err = run_cli(list(argv))
    return err.strip().splitlines()[-1 if argv[0] == "lint" else -2]


@pytest.mark.parametrize("order", [("fixtures/seed", "fixtures/clean"), ("fixtures/clean", "fixtures/seed")])
@pytest.mark.parametrize("command", ["lint", "fix"])
def test_summary_names_each_settings_group_in_any_order(command: str, order: tuple[str, str]) -> None:
    line = _summary(command, *order)
    assert "fixtures/seed: no target stated: 14 hardware checks skipped" in line
    assert "fixtures/clean: judged for mi300x (cfgopt.toml)" in line
    assert "fixtures/seed: environment: assumed" in line and "fixtures/clean: environment: assumed" in line


def test_summary_is_one_description_when_every_file_is_judged_alike() -> None:
    line = _summary("lint", "fixtures/seed/llama3_lora_sft.yaml", "fixtures/seed/train.sh")
    assert line.endswith("(--environment FILE, or `cfgopt doctor --write-environment` on the node)")
    assert "fixtures/seed" not in line and "; no target stated: 14 hardware checks skipped" in line


def test_long_message_is_whole_in_detail(tmp_path: Path) -> None:
    config = tmp_path / "train.yaml"
    long_name = "x" * 3000
    config.write_text(
        f"model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ntemplate: {long_name}\n"
    )
    _, out, _ = run_cli(["lint", "--format", "json", str(config)])
    (long,) = [d for d in json.loads(out)["diagnostics"] if len(d["message"]) >= MAX_MESSAGE]
    assert long["message"].endswith("…") and "x" * 3000 in long["detail"]
