"""The summary line says what each group of files was judged for (its own project config, target, GPU count and
environment), whatever the order of the paths; messages stay whole in the machine formats (`detail`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli, summary_of

from cfgopt.rules.base import MAX_MESSAGE


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _summary(*argv: str) -> str:
    _, _, err = run_cli(list(argv))
    return summary_of(err)


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


def test_summary_wraps_a_part_a_line() -> None:
    """Issue 45: the counts on the first line, then each part of what was judged on its own indented line (the
    hardware, the GPU count, the environment), never one line of several hundred characters."""
    _, _, err = run_cli(["lint", "fixtures/clean/llama3_lora_sft.yaml", "--target", "h100"])
    lines = err[err.index("Checked ") :].splitlines()
    assert lines[0].startswith("Checked 2 file(s): ") and "judged" not in lines[0]  # the YAML and its JSON
    assert [line.split(" (")[0].split(":")[0] for line in lines[1:]] == [
        "  judged for h100",
        "  GPU count not stated",
        "  environment",
    ]
    assert max(len(line) for line in lines) < 200


def test_summary_of_several_groups_is_a_group_a_line() -> None:
    _, _, err = run_cli(["lint", "fixtures/seed", "fixtures/clean"])
    parts = err[err.index("Checked ") :].splitlines()[1:]
    assert [part.split(":")[0] for part in parts] == [
        "  fixtures/seed",
        "  fixtures/clean",
        "  fixtures/seed",
        "  fixtures/clean",
    ]
