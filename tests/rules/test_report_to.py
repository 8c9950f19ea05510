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


PPO = TRAIN.replace("stage: sft", "stage: ppo") + "reward_model: saves/rm\n"


def ppo_refuses(text: str) -> bool:
    """The real verdict of LLaMA-Factory's PPO check at start-up (hparams/parser.py L344-347) on the list
    TrainingArguments makes of the value as OmegaConf reads it."""
    omegaconf = pytest.importorskip("omegaconf")
    transformers = pytest.importorskip("transformers")
    value = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.create(f"report_to: {text}\n"))["report_to"]
    loggers = transformers.TrainingArguments(output_dir="unused", report_to=value).report_to
    return bool(loggers) and any(x not in ("wandb", "tensorboard", "trackio", "none") for x in loggers)


@pytest.mark.parametrize("text", [t for t in VALUES if "all" not in t] + ["mlflow", "wandb,tensorboard", "trackio"])
def test_ppo_gets_one_finding_from_the_check_that_stops_it_first(tmp_path: Path, text: str) -> None:
    """Under PPO LLaMA-Factory's own check stops a refused logger at start-up, before the Trainer is built: LF017
    reports it (with LF003's fix where the value it writes passes PPO), LF003 only what passes PPO and the Trainer
    refuses; one finding where the run stops, none where it runs. `all` depends on what is installed: elsewhere."""
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != schema.llamafactory().transformers:
        pytest.skip("the snapshot's transformers is not the installed one")
    path = tmp_path / "cfg.yaml"
    path.write_text(PPO + f"report_to: {text}\n")
    _, out, _ = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF003,LF017", str(path)])
    found = [d for d in json.loads(out)["diagnostics"] if d["key"] == "report_to"]
    stops = "LF017" if ppo_refuses(text) else "LF003" if trainer_refuses(text) else None
    assert [d["code"] for d in found] == ([stops] if stops else []), found
    assert all(d["severity"] == "error" for d in found)
    fix = found[0]["fix"] if found else None
    assert fix is None or fix["description"].split("`")[1] in ("none", "wandb", "tensorboard", "trackio")


def test_ppo_report_to_all_is_a_warning(tmp_path: Path) -> None:
    """`all` becomes every integration installed where the job runs: PPO stops on one it does not take."""
    path = tmp_path / "cfg.yaml"
    path.write_text(PPO + "report_to: all\n")
    _, out, _ = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF003,LF017", str(path)])
    (found,) = json.loads(out)["diagnostics"]
    assert (
        found["code"] == "LF017"
        and found["severity"] == "warning"
        and "installed where the job runs" in found["message"]
    )


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
