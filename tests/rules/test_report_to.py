"""LF003 on `report_to`: an error exactly where the HF Trainer refuses the value when it is built.

The value goes through the real path (OmegaConf reads the YAML line, TrainingArguments makes the list, the
Trainer's `get_reporting_integration_callbacks` checks it) and LF003's verdict must agree, for the typos, the
words meant as "no reporting", lists and the words that only stand alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import TRAIN, run_cli

from cfgopt.knowledge import schema

VALUES = [
    "none",
    "all",
    "wandb",
    "tensorboard",
    "[wandb, tensorboard]",
    "[none]",
    "[all]",
    "[]",
    "'none'",
    "tensorbord",
    "wanb",
    "Wandb",
    "NONE",
    "false",
    "no",
    "None",
    "null",
    "~",
    "''",
    "[wandb, tensorbord]",
    "[none, wandb]",
    "[all, wandb]",
    "0",
]


def lf003(tmp_path: Path, line: str, *args: str) -> list[dict]:
    path = tmp_path / "cfg.yaml"
    path.write_text(TRAIN + line + "\n")
    _, out, err = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF003", str(path), *args])
    assert out.strip(), err
    return json.loads(out)["diagnostics"]


def trainer_refuses(text: str) -> bool:
    """The real verdict: the value as OmegaConf reads it, through TrainingArguments and the Trainer's check."""
    omegaconf = pytest.importorskip("omegaconf")
    transformers = pytest.importorskip("transformers")
    from transformers.integrations import integration_utils

    value = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.create(f"report_to: {text}\n"))["report_to"]
    args = transformers.TrainingArguments(output_dir="unused", report_to=value)
    try:
        integration_utils.get_reporting_integration_callbacks(args.report_to)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("text", VALUES)
def test_error_exactly_where_the_trainer_refuses(tmp_path: Path, text: str) -> None:
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != schema.llamafactory().transformers:
        pytest.skip("the snapshot's transformers is not the installed one")
    found = lf003(tmp_path, f"report_to: {text}")
    assert bool(found) == trainer_refuses(text), found
    assert all(d["severity"] == "error" and d["key"] == "report_to" for d in found)


def test_the_snapshot_holds_the_installed_transformers_names() -> None:
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != schema.llamafactory().transformers:
        pytest.skip("the snapshot's transformers is not the installed one")
    from transformers.integrations import integration_utils

    allowed = schema.llamafactory().report_to
    assert allowed is not None and allowed.integrations == tuple(integration_utils.INTEGRATION_TO_CALLBACK)


@pytest.mark.parametrize("text", ["false", "None", "null"])
def test_no_reporting_is_written_none_safely(tmp_path: Path, text: str) -> None:
    (diag,) = lf003(tmp_path, f"report_to: {text}")
    assert diag["fix"]["applicability"] == "safe" and diag["fix"]["description"] == "Use `none` (no reporting)"


def test_a_typo_gets_the_closest_name_as_a_guess(tmp_path: Path) -> None:
    (diag,) = lf003(tmp_path, "report_to: tensorbord")
    assert "did you mean `tensorboard`?" in diag["message"] and "after the dataset is tokenised" in diag["message"]
    assert diag["fix"]["applicability"] == "unsafe" and diag["fix"]["description"] == "Use `tensorboard`"


def test_the_command_line_value_is_judged(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        "llamafactory-cli train --model_name_or_path m --stage sft --do_train --finetuning_type lora "
        "--dataset alpaca_en_demo --template llama3 --output_dir o --report_to wanb\n"
    )
    _, out, _ = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF003", str(script)])
    (diag,) = json.loads(out)["diagnostics"]
    assert diag["key"] == "report_to" and "did you mean `wandb`?" in diag["message"]


def test_a_snapshot_without_the_names_says_nothing(tmp_path: Path) -> None:
    """LLaMA-Factory 0.9.4's snapshot (transformers 4.57.1) was taken without them: nothing is guessed."""
    assert schema.llamafactory("0.9.4").report_to is None
    assert lf003(tmp_path, "report_to: tensorbord", "--llamafactory-version", "0.9.4") == []
