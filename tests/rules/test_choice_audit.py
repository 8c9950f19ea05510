"""One test per field with choices: what a YAML value outside them does in the real run, and so the severity
LF003 gives it (cfgopt/rules/support/choices.py holds the outcomes with their file:line evidence).

`error`: the run stops. `warning`: it goes on doing something else (the message says what). A field read only
in some runs is tested both ways. On the command line argparse rejects every such value at once (exit 2), which
tests/rules/test_rule_fixtures.py (LF003/cli-invalid-choice) covers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import run_cli

from cfgopt.knowledge import schema
from cfgopt.rules.support.choices import OUTSIDE

TRAIN = {
    "model_name_or_path": "meta-llama/Meta-Llama-3-8B",
    "stage": "sft",
    "do_train": True,
    "finetuning_type": "lora",
    "dataset": "alpaca_en_demo",
    "template": "llama3",
    "output_dir": "out",
}
INFER = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "template": "llama3"}

# field -> [(extra keys, base config, expected severity of `field: bogus_value`)]
VERDICTS: dict[str, list[tuple[dict, dict, str]]] = {
    "stage": [({}, TRAIN, "error")],
    "finetuning_type": [({}, TRAIN, "error")],
    "flash_attn": [({}, TRAIN, "error")],
    "pref_loss": [({"stage": "dpo"}, TRAIN, "error"), ({}, TRAIN, "warning")],
    "mix_strategy": [({"dataset": "alpaca_en_demo,alpaca_zh_demo"}, TRAIN, "error"), ({}, TRAIN, "warning")],
    "badam_mode": [({"use_badam": True, "finetuning_type": "full"}, TRAIN, "error"), ({}, TRAIN, "warning")],
    "infer_dtype": [({}, INFER, "error"), ({}, TRAIN, "warning")],
    "infer_backend": [({}, INFER, "error"), ({}, TRAIN, "error")],
    "rope_scaling": [({}, TRAIN, "error")],
    "log_level": [({}, TRAIN, "error")],
    "log_level_replica": [({}, TRAIN, "error")],
    "ddp_backend": [({"deepspeed": "ds.json"}, TRAIN, "error")],
    "optim": [({}, TRAIN, "error")],
    "lr_scheduler_type": [({}, TRAIN, "error")],
    "eval_strategy": [({}, TRAIN, "error")],
    "save_strategy": [({}, TRAIN, "error")],
    "logging_strategy": [({}, TRAIN, "error")],
    "hub_strategy": [({}, TRAIN, "error")],
    "export_device": [({"export_dir": "exported"}, INFER, "warning")],
    "quantization_method": [({"quantization_bit": 4}, TRAIN, "warning")],
    "init_special_tokens": [({}, TRAIN, "warning")],
    "quantization_device_map": [({}, INFER, "warning")],
    "mixture_of_depths": [({}, TRAIN, "warning")],
    "reward_model_type": [({"stage": "ppo", "reward_model": "rm"}, TRAIN, "warning")],
    "train_sampling_strategy": [({}, TRAIN, "warning")],
    "badam_switch_mode": [({"use_badam": True}, TRAIN, "warning")],
    "badam_mask_mode": [({"use_badam": True}, TRAIN, "warning")],
    "galore_proj_type": [({"use_galore": True}, TRAIN, "warning")],
    "apollo_proj": [({"use_apollo": True}, TRAIN, "warning")],
    "apollo_proj_type": [({"use_apollo": True}, TRAIN, "warning")],
    "apollo_scale_type": [({"use_apollo": True}, TRAIN, "warning")],
    "quantization_type": [({"quantization_bit": 4}, TRAIN, "warning")],
    "sglang_lora_backend": [({"infer_backend": "sglang"}, INFER, "warning")],
    "swanlab_mode": [({"use_swanlab": True}, TRAIN, "warning")],
}
# Read only by `llamafactory-cli eval` (EvaluationArguments): a train/infer YAML never holds them.
EVAL_ONLY = {"lang", "download_mode"}
# Fields of LLaMA-Factory 0.9.4 (transformers 4.57.1) only, judged with `--llamafactory-version 0.9.4`.
ONLY_094: dict[str, str] = {
    "placement_strategy": "warning",
    "ray_storage_filesystem": "warning",
    "half_precision_backend": "warning",
    "fp16_backend": "warning",
}
# Fields of the oldest releases only (renamed later), judged with that release.
ONLY_OLDER: dict[str, tuple[str, str]] = {"evaluation_strategy": ("0.9.0", "error")}  # transformers 4.45
CASES = [(f, extra, base, sev) for f, cases in VERDICTS.items() for extra, base, sev in cases]


def lf003(tmp_path: Path, config: dict, *args: str) -> list[dict]:
    path = tmp_path / "cfg.yaml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()))
    _, out, err = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF003", str(path), *args])
    assert out.strip(), err
    return json.loads(out)["diagnostics"]


@pytest.mark.parametrize(("field", "extra", "base", "severity"), CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_value_outside_the_choices(tmp_path: Path, field: str, extra: dict, base: dict, severity: str) -> None:
    (diag,) = lf003(tmp_path, {**base, **extra, field: "bogus_value"})
    assert diag["key"] == field and diag["severity"] == severity, diag
    assert "LLaMA-Factory 0.9.5 " in diag["message"]


@pytest.mark.parametrize(("field", "severity"), sorted(ONLY_094.items()))
def test_value_outside_the_choices_094(tmp_path: Path, field: str, severity: str) -> None:
    (diag,) = lf003(tmp_path, {**TRAIN, field: "bogus_value"}, "--llamafactory-version", "0.9.4")
    assert diag["key"] == field and diag["severity"] == severity, diag
    assert "LLaMA-Factory 0.9.4 " in diag["message"]


@pytest.mark.parametrize(("field", "judged"), sorted(ONLY_OLDER.items()))
def test_value_outside_the_choices_older(tmp_path: Path, field: str, judged: tuple[str, str]) -> None:
    version, severity = judged
    (diag,) = lf003(tmp_path, {**TRAIN, field: "bogus_value"}, "--llamafactory-version", version)
    assert diag["key"] == field and diag["severity"] == severity, diag
    assert f"LLaMA-Factory {version} " in diag["message"]


def test_every_field_with_choices_is_audited() -> None:
    """A new field with choices (a new release) needs its outcome read in the code, and a test here."""
    for version in schema.shipped_versions("llamafactory"):
        with_choices = {n for n, s in schema.llamafactory(version).fields.items() if s.choices is not None}
        assert with_choices <= set(OUTSIDE), (version, with_choices - set(OUTSIDE))
    assert set(OUTSIDE) == set(VERDICTS) | EVAL_ONLY | set(ONLY_094) | set(ONLY_OLDER)


def test_export_device_cuda_means_auto(tmp_path: Path) -> None:
    """`cuda` is what LLaMA-Factory runs as `auto`: the safe fix says so, never `cpu`."""
    (diag,) = lf003(tmp_path, {**INFER, "export_dir": "exported", "export_device": "cuda"})
    assert diag["severity"] == "warning" and diag["fix"]["applicability"] == "safe"
    assert diag["fix"]["description"] == "Use `auto` (what it means now)"


def test_yaml11_no_is_explained_and_quoted(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in TRAIN.items()) + "save_strategy: no\n")
    _, out, _ = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF003", str(path)])
    (diag,) = json.loads(out)["diagnostics"]
    assert "reads an unquoted `no` as the boolean false" in diag["message"]
    assert diag["fix"]["description"] == 'Quote it: `"no"`'
