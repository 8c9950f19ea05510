"""LF048 and LF057 treat the launch folder as LF005 does: an error where no folder a run may be launched from
changes the outcome (only one holds a `dataset_info.json`), a warning naming the other file where several do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import run_cli

CONFIG = """\
model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
stage: kto
do_train: true
finetuning_type: lora
dataset: dpo_en_demo, missing
template: qwen3_nothink
output_dir: out
"""
INFO = {"dpo_en_demo": {"file_name": "dpo.json", "ranking": True}}


def _data(folder: Path, info: dict) -> None:
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "dataset_info.json").write_text(json.dumps(info))
    (folder / "data" / "dpo.json").write_text('[{"instruction": "a", "output": "b"}]')


def _lint(config: Path) -> list[dict]:
    _, out, err = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF048,LF057", str(config)])
    assert out.strip(), err
    return json.loads(out)["diagnostics"]


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()  # the repository root: the folders above the config are tried up to it
    config = tmp_path / "configs" / "train.yaml"
    config.parent.mkdir()
    config.write_text(CONFIG)
    _data(config.parent, INFO)
    monkeypatch.chdir(tmp_path)
    return config


def test_one_dataset_info_the_run_can_read_is_an_error(project: Path) -> None:
    found = {d["code"]: d for d in _lint(project)}
    assert set(found) == {"LF048", "LF057"}
    assert all(d["severity"] == "error" for d in found.values())
    assert "Undefined dataset missing" in found["LF048"]["message"]
    assert "The dataset is not applicable in the current training stage." in found["LF057"]["message"]


def test_another_launch_folder_with_its_own_file_makes_a_warning_that_names_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _data(project.parent.parent, {"missing": {"file_name": "m.json"}})  # the repository root's data/
    monkeypatch.chdir(project.parent)  # configs/data is read first; a run launched at the root reads the other
    found = {d["code"]: d for d in _lint(project)}
    assert set(found) == {"LF048", "LF057"}
    for diag in found.values():
        assert diag["severity"] == "warning", diag
        assert "a run launched elsewhere reads" in diag["message"], diag


def test_a_file_cfgopts_reader_cannot_parse_stays_a_warning(project: Path) -> None:
    """`datasets` reads a JSON line broken over two lines; cfgopt's reader does not: not certain."""
    (project.parent / "data" / "dpo.json").write_text('{"instruction": "a",\n "output": "b"}\n')
    project.write_text(CONFIG.replace("stage: kto", "stage: dpo").replace(", missing", ""))
    (diag,) = _lint(project)
    assert diag["code"] == "LF048" and diag["severity"] == "warning" and "cannot be read" in diag["message"]


@pytest.mark.parametrize(
    ("ranking", "stage", "refused"), [(None, "sft", False), (None, "dpo", False), (1, "sft", False)]
)
def test_only_json_true_and_false_count(project: Path, ranking: object, stage: str, refused: bool) -> None:
    """LLaMA-Factory compares with `is True` / `is False`: a null or a 1 is neither."""
    info = {"dpo_en_demo": {"file_name": "dpo.json", "ranking": ranking}}
    (project.parent / "data" / "dataset_info.json").write_text(json.dumps(info))
    project.write_text(CONFIG.replace("stage: kto", f"stage: {stage}").replace(", missing", ""))
    assert bool([d for d in _lint(project) if d["code"] == "LF057"]) == refused
