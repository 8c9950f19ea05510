"""setup.cfg and a conda environment.yml state a job's environment as requirements.txt does: the same pins judge
the same LLaMA-Factory and DeepSpeed releases and give the same packages (cfgopt/text/requirements/,
cfgopt/environment/pins.py, cfgopt/environment/stated.py), the requirement rules lint them, and no fix edits them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from job_configs import LORA_8B
from rule_cases import run_cli

from cfgopt.environment.pins import find_pins
from cfgopt.environment.stated import found_environment, read_packages

# the same pins in each format: LLaMA-Factory 0.9.4 with its liger-kernel extra, a DeepSpeed series, torch
STATED = {
    "requirements.txt": "llamafactory[liger-kernel]==0.9.4\ndeepspeed==0.15.*\ntorch==2.5.1\n",
    "setup.cfg": """[metadata]
name = job

[options]
install_requires =
    llamafactory[liger-kernel]==0.9.4  # the release
    deepspeed==0.15.*
    torch==2.5.1

[options.extras_require]
bnb = bitsandbytes>=0.43
""",
    "environment.yml": """name: job
channels:
  - pytorch
  - conda-forge
dependencies:
  - python=3.11
  - pytorch==2.5.1
  - conda-forge::deepspeed=0.15
  - pip
  - pip:
      - llamafactory[liger-kernel]==0.9.4
""",
}
PACKAGES = {"llamafactory": "==0.9.4", "liger_kernel": "", "deepspeed": "==0.15.*", "torch": "==2.5.1"}


def _repository(tmp_path: Path, name: str, text: str) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "configs").mkdir()
    (repo / "configs" / "train.yaml").write_text(LORA_8B)
    (repo / name).write_text(text)
    return repo


def _judged(repo: Path) -> tuple[list[str], tuple[str, str, str]]:
    """The releases `--show-settings` judges, and the JSON report's for the config: its LLaMA-Factory and DeepSpeed
    releases and the file its environment is read from."""
    _, out, _ = run_cli(["lint", "--show-settings", str(repo / "configs" / "train.yaml")])
    versions = [line for line in out.splitlines() if line.startswith(("llamafactory-version", "deepspeed-version"))]
    _, report, _ = run_cli(["lint", "--format", "json", "--target", "h200", "--gpus", "1", str(repo)])
    config = next(f for f in json.loads(report)["files"] if f["file"].endswith("train.yaml"))
    return versions, (config["llamafactory_version"], config["deepspeed_version"], Path(config["environment"]).name)


@pytest.mark.parametrize("name", ["setup.cfg", "environment.yml"])
def test_a_setup_cfg_or_environment_yml_judges_as_requirements_txt_does(tmp_path: Path, name: str) -> None:
    txt = _repository(tmp_path / "txt", "requirements.txt", STATED["requirements.txt"])
    other = _repository(tmp_path / "other", name, STATED[name])
    versions, config = _judged(other)
    assert versions == ['llamafactory-version = "0.9.4"', 'deepspeed-version = "0.15.4"']
    assert config == ("0.9.4", "0.15.4", name)
    txt_versions, txt_config = _judged(txt)
    assert (versions, config[:2]) == (txt_versions, txt_config[:2])
    env = found_environment(other / "configs")
    assert env is not None and env.packages == PACKAGES == read_packages(txt / "requirements.txt")
    assert not env.assumed and env.requirement_file is None  # no requirements*.txt: nowhere to add a pin
    pins = find_pins(other / "configs")
    assert {p: r.spec for p, r in pins.items()} == {"llamafactory": "==0.9.4", "deepspeed": "==0.15.*"}


def test_an_environment_yml_pip_list_includes_its_requirement_files(tmp_path: Path) -> None:
    """conda hands the `- pip:` lines to pip as a requirements file in the environment file's folder: `-r` there
    includes a file relative to it, and pip's pin of a package is the one installed (pip runs after conda)."""
    text = "dependencies:\n  - pytorch=2.4\n  - pip:\n    - -r reqs/train.txt\n"
    repo = _repository(tmp_path, "environment.yml", text)
    (repo / "reqs").mkdir()
    (repo / "reqs" / "train.txt").write_text("llamafactory==0.9.3\ntorch==2.5.1\n")
    assert read_packages(repo / "environment.yml") == {"llamafactory": "==0.9.3", "torch": "==2.5.1"}
    assert find_pins(repo / "configs")["llamafactory"].spec == "==0.9.3"


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("setup.cfg", "[options]\ninstall_requires =\n    llamafactory==0.9.5\n    torch==2.5.1+cu121\n", (4, 10)),
        ("environment.yml", "dependencies:\n  - pip:\n    - llamafactory==0.9.5\n    - torch==2.5.1+cu121\n", (4, 12)),
    ],
)
def test_the_requirement_rules_lint_the_new_formats_at_the_pin(
    tmp_path: Path, name: str, text: str, where: tuple[int, int]
) -> None:
    repo = _repository(tmp_path, name, text)
    _, report, _ = run_cli(["lint", "--format", "json", "--target", "mi300x", str(repo / name)])
    found = [(d["code"], d["line"], d["column"]) for d in json.loads(report)["diagnostics"]]
    assert ("ENV001", *where) in found


@pytest.mark.parametrize("name", ["setup.cfg", "environment.yml"])
def test_no_fix_edits_a_setup_cfg_or_an_environment_yml(tmp_path: Path, name: str, monkeypatch) -> None:
    """The plan would bring liger-kernel (ENV004 adds its pin to a requirements*.txt); these files are not
    edited: the unsafe fixes leave them byte for byte, as a pyproject.toml."""
    text = STATED[name].replace("[liger-kernel]", "").replace("0.9.4", "0.9.5")
    repo = _repository(tmp_path, name, text)
    monkeypatch.chdir(repo)
    _, out, _ = run_cli(["lint", ".", "--target", "h200", "--gpus", "1"])
    assert f"with liger-kernel (not in {name})" in out and "ENV004" not in out
    run_cli(["fix", ".", "--write", "--unsafe-fixes", "--target", "h200", "--gpus", "1"])
    assert (repo / name).read_text() == text
    assert "enable_liger_kernel" not in (repo / "configs" / "train.yaml").read_text()


def test_an_environment_yaml_that_names_no_package_judged_is_read_as_any_yaml(tmp_path: Path, monkeypatch) -> None:
    """A file is a requirement file by its name, but an `environment.yaml` that lists none of the packages judged
    is read as before: a LLaMA-Factory config of that name is linted and fixed as one (its fixes checked as YAML)."""
    repo = _repository(tmp_path, "environment.yml", "name: tools\ndependencies:\n  - numpy\n")
    (repo / "environment.yaml").write_text(LORA_8B)
    monkeypatch.chdir(repo)
    _, report, _ = run_cli(["lint", "--format", "json", "environment.yaml", "environment.yml"])
    assert {d["file"] for d in json.loads(report)["diagnostics"]} == {"environment.yaml"}
    run_cli(["fix", "environment.yaml", "--write", "--unsafe-fixes", "--target", "h200", "--gpus", "1"])
    assert "enable_liger_kernel: true" in (repo / "environment.yaml").read_text()
