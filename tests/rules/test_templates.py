"""LF035: the chat-template registry of the LLaMA-Factory release judged, and `extra-templates` for forks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rule_cases import ROOT, run_cli

from cfgopt.knowledge import schema

sys.path.insert(0, str(ROOT / "scripts"))
import sync_schemas

CONFIG = """model_name_or_path: Qwen/Qwen2.5-7B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
template: {template}
output_dir: out
"""


def lf035(tmp_path: Path, template: str, *args: str, pyproject: str = "") -> list[str]:
    (tmp_path / "train.yaml").write_text(CONFIG.format(template=template))
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    _, out, err = run_cli(["lint", "--format", "json", "--select", "LF035", str(tmp_path / "train.yaml"), *args])
    assert out.strip(), err
    return [d["message"] for d in json.loads(out)["diagnostics"]]


def test_every_shipped_snapshot_lists_its_templates() -> None:
    for version in schema.shipped_versions("llamafactory"):
        templates = schema.llamafactory(version).templates
        assert templates and {"default", "empty", "llama3", "qwen"} <= templates, version


def test_registry_differs_per_release(tmp_path: Path) -> None:
    assert lf035(tmp_path, "baichuan2", "--llamafactory-version", "0.9.4") == []
    (message,) = lf035(tmp_path, "baichuan2", "--llamafactory-version", "0.9.5")
    assert message.startswith(
        "LLaMA-Factory 0.9.5 has no chat template `baichuan2` (registered by LLaMA-Factory 0.9.0 to 0.9.4)"
    )
    assert "Template baichuan2 does not exist." in message


def test_did_you_mean(tmp_path: Path) -> None:
    (message,) = lf035(tmp_path, "llama_3")
    assert "(did you mean `llama3`?)" in message


def test_extra_templates_of_a_fork(tmp_path: Path) -> None:
    assert len(lf035(tmp_path, "videor1")) == 1
    assert lf035(tmp_path, "videor1", pyproject='[tool.cfgopt]\nextra-templates = ["videor1"]\n') == []


def test_extra_templates_must_be_strings(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(CONFIG.format(template="qwen"))
    (tmp_path / "cfgopt.toml").write_text("extra-templates = 3\n")
    code, _, err = run_cli(["lint", str(tmp_path / "train.yaml")])
    assert code == 2 and "extra-templates" in err


def test_registry_is_read_from_register_template_calls() -> None:
    source = 'register_template(name="a", format_user=None)\nregister_template("b")\nregister_template(name=x)\n'
    assert sync_schemas.templates_in_source(source) == ["a", "b"]
