"""The job's environment (cfgopt/environment/stated.py, docs/environment.md): the packages of the node a job trains
on, as the project states them, never those of the machine cfgopt runs on (issue 32)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from job_configs import LORA_8B
from rule_cases import ROOT

from cfgopt.environment import Environment
from cfgopt.environment.stated import assumed, found_environment, read_packages
from cfgopt.lint.engine import lint_paths
from cfgopt.lint.project_config import CommandLine, Resolver

FULL_FT = ROOT / "bench" / "planner" / "examples" / "train_full" / "llama3_full_sft_fp16.yaml"
DS_Z3 = ROOT / "bench" / "planner" / "examples" / "deepspeed" / "ds_z3_config.json"


def _repository(tmp_path: Path) -> Path:
    """A repository of its own (a `.git` folder ends the walk for pins and environments)."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo


def _full_ft_repo(tmp_path: Path) -> Path:
    repo = _repository(tmp_path)
    (repo / "examples" / "train_full").mkdir(parents=True)
    (repo / "examples" / "deepspeed").mkdir(parents=True)
    shutil.copy(FULL_FT, repo / "examples" / "train_full" / FULL_FT.name)
    shutil.copy(DS_Z3, repo / "examples" / "deepspeed" / DS_Z3.name)
    return repo


def _fake_site(tmp_path: Path, packages: dict[str, str]) -> Path:
    """A site-packages folder holding only dist-info metadata: what cfgopt would see of installed packages."""
    site = tmp_path / "site"
    for name, version in packages.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


def _cfgopt(args: list[str], cwd: Path, site: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # this checkout's cfgopt (not one installed elsewhere), and the fake installed packages
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([str(site)] if site is not None else [])])
    return subprocess.run(
        [sys.executable, "-m", "cfgopt", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_same_files_give_the_same_fix_whatever_this_machine_has_installed(tmp_path: Path) -> None:
    """The issue's case: a Llama-3-8B full fine-tune with the stock ZeRO-3 JSON, fp16, 1 x H200. With or without
    bitsandbytes, liger-kernel and torchao (and another LLaMA-Factory) installed where cfgopt runs, `fix` prints
    the same bytes, plans without ZeRO-3 on the one GPU, and names the environment it planned for."""
    repo = _full_ft_repo(tmp_path)
    args = ["fix", "examples/train_full/llama3_full_sft_fp16.yaml", "--unsafe-fixes", "--target", "h200", "--gpus", "1"]
    bare = _cfgopt(args, repo)
    site = _fake_site(
        tmp_path, {"bitsandbytes": "0.50.2", "liger_kernel": "0.6.4", "torchao": "0.17.0", "llamafactory": "0.9.1"}
    )
    rich = _cfgopt(args, repo, site)
    assert bare.returncode == rich.returncode
    assert bare.stdout == rich.stdout and bare.stderr == rich.stderr
    text = bare.stdout + bare.stderr
    assert "-deepspeed: examples/deepspeed/ds_z3_config.json" in text and "+optim: adamw_bnb_8bit" in text
    assert "environment: assumed: LLaMA-Factory 0.9.5" in text


def test_a_requirement_file_without_bitsandbytes_says_why_no_plan_fits(tmp_path: Path) -> None:
    repo = _full_ft_repo(tmp_path)
    (repo / "requirements.txt").write_text("llamafactory==0.9.5\ndeepspeed>=0.16\n")
    out = _cfgopt(["lint", ".", "--target", "h200", "--gpus", "1"], repo)
    text = out.stdout + out.stderr
    assert "environment: requirements.txt" in text
    assert "no speed plan fits the job's environment" in text and "bitsandbytes (not in requirements.txt)" in text
    assert "ENV004" in text  # on the requirement file: the pin it lacks


def test_env004_names_the_jobs_config_and_how_it_is_launched(tmp_path: Path) -> None:
    """Finding 11 of a new user's hour: the message began with `train.sh:`, the script that only launches the
    config the plan is about. It names the config (relative to the requirement file), then the launch."""
    repo = _repository(tmp_path)
    (repo / "configs").mkdir()
    (repo / "configs" / "sft.yaml").write_text(LORA_8B)
    (repo / "requirements.txt").write_text("llamafactory==0.9.5\n")
    (repo / "train.sh").write_text("#!/bin/sh\nFORCE_TORCHRUN=1 llamafactory-cli train configs/sft.yaml\n")
    args = ["lint", ".", "--select", "ENV004", "--format", "json", "--target", "h200", "--gpus", "1"]
    [finding] = json.loads(_cfgopt(args, repo).stdout)["diagnostics"]
    assert finding["message"].startswith(
        "configs/sft.yaml as train.sh line 2 launches it: with liger-kernel (not in this file) the plan would be"
    )
    (repo / "train.sh").unlink()  # the config alone: named by itself
    [finding] = json.loads(_cfgopt(args, repo).stdout)["diagnostics"]
    assert finding["message"].startswith("configs/sft.yaml: with liger-kernel (not in this file)")


def _lora_plan(tmp_path: Path, requirements: str | None, command: str = "fix") -> str:
    repo = _repository(tmp_path)
    (repo / "train.yaml").write_text(LORA_8B)
    if requirements is not None:
        (repo / "requirements.txt").write_text(requirements)
    unsafe = ["--unsafe-fixes"] if command == "fix" else []
    out = _cfgopt([command, ".", *unsafe, "--target", "h200", "--gpus", "1"], repo)
    return out.stdout + out.stderr


def test_a_requirement_file_naming_liger_kernel_turns_liger_on(tmp_path: Path) -> None:
    text = _lora_plan(tmp_path, "llamafactory[liger-kernel]==0.9.5\n")
    assert "Liger kernels" in text and "+enable_liger_kernel: true" in text and "ENV004" not in text


def test_without_liger_kernel_the_output_names_what_it_would_bring(tmp_path: Path) -> None:
    text = _lora_plan(tmp_path, "llamafactory==0.9.5\n", command="lint")
    assert "with liger-kernel (not in requirements.txt)" in text and "ENV004" in text
    # with --unsafe-fixes, ENV004's fix adds the pin of LLaMA-Factory 0.9.5's extra, and the plan then uses it
    text = _lora_plan(tmp_path / "fix", "llamafactory==0.9.5\n")
    assert "+liger-kernel>=0.6.3" in text and "+enable_liger_kernel: true" in text


def test_the_plan_keeps_samples_apart_and_leaves_no_warning_it_decided_to_keep(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / "train.yaml").write_text(LORA_8B + "max_samples: 1000\n")
    _cfgopt(["fix", ".", "--write", "--unsafe-fixes", "--target", "h200", "--gpus", "1"], repo)
    fixed = (repo / "train.yaml").read_text()
    assert "neat_packing: true" in fixed and "packing: true\n" not in fixed.replace("neat_packing", "")
    assert "max_samples: 1000" in fixed  # display-only: what the job trains on is the user's choice
    out = _cfgopt(["lint", ".", "--format", "json", "--target", "h200", "--gpus", "1"], repo)
    codes = {d["code"] for d in json.loads(out.stdout)["diagnostics"] if d["severity"] != "info"}
    assert not codes & {"MEM003", "MEM004", "LF027", "PF005"}, codes


def test_pf005_is_quiet_where_the_environment_has_no_flash_attn(tmp_path: Path) -> None:
    """Keeping packed samples apart without flash-attn costs a block mask: the price, not a mistake."""
    repo = _repository(tmp_path)
    (repo / "train.yaml").write_text(LORA_8B + "neat_packing: true\n")
    out = _cfgopt(["lint", "train.yaml", "--select", "PF005", "--format", "json"], repo)
    assert json.loads(out.stdout)["diagnostics"] == []
    (repo / "requirements.txt").write_text("llamafactory==0.9.5\nflash-attn==2.7.4\n")
    out = _cfgopt(["lint", "train.yaml", "--select", "PF005", "--format", "json"], repo)
    assert [d["code"] for d in json.loads(out.stdout)["diagnostics"]] == ["PF005"]


def test_the_order_of_sources(tmp_path: Path) -> None:
    """--environment beats requirement files, which beat a doctor snapshot, which beats the default."""
    repo = _repository(tmp_path)
    sub = repo / "configs"
    sub.mkdir()
    assert found_environment(sub) is None
    (repo / "cfgopt-environment.json").write_text(json.dumps({"packages": {"llamafactory": "0.9.3", "torchao": ""}}))
    env = found_environment(sub, {})
    assert env is not None and env.has("torchao") and "cfgopt doctor" in env.source
    (repo / "requirements.txt").write_text("llamafactory==0.9.5\nbitsandbytes\n")
    env = found_environment(sub, {})
    assert env is not None and env.has("bitsandbytes") and not env.has("torchao")
    (sub / "train.yaml").write_text(LORA_8B)
    explicit = tmp_path / "node.txt"
    explicit.write_text("llamafactory==0.9.4\nliger-kernel==0.6.3\n")
    settings = Resolver(CommandLine(environment=str(explicit))).settings_for(sub / "train.yaml")
    assert settings.environment.has("liger_kernel") and not settings.environment.has("bitsandbytes")
    assert settings.llamafactory_version == "0.9.4"  # the release the stated environment names


def test_a_snapshot_names_the_release_judged(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / "cfgopt-environment.json").write_text(json.dumps({"packages": {"llamafactory": "0.9.3"}}))
    (repo / "train.yaml").write_text(LORA_8B)
    assert Resolver().settings_for(repo / "train.yaml").llamafactory_version == "0.9.3"


def test_a_project_table_states_the_environment(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / "cfgopt.toml").write_text('[environment]\nllamafactory = "0.9.5"\ntorchao = "0.17.0"\n')
    (repo / "train.yaml").write_text(LORA_8B)
    env = Resolver().settings_for(repo / "train.yaml").environment
    assert env.has("torchao") and not env.has("liger_kernel") and "environment" in env.source


def test_pyproject_optional_dependencies_are_not_the_jobs_install(tmp_path: Path) -> None:
    """cfgopt's own pyproject names llamafactory in a test extra: no job installs from that."""
    repo = _repository(tmp_path)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = [\n  "pyyaml",\n]\n\n[project.optional-dependencies]\n'
        'oracle = ["llamafactory==0.9.5"]\n'
    )
    assert read_packages(repo / "pyproject.toml") == {"pyyaml": ""}
    assert found_environment(repo) is None


def test_llamafactory_extras_are_expanded(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("llamafactory[liger-kernel,bitsandbytes]==0.9.5  # the trainer\n# torchao\n")
    packages = read_packages(path)
    assert packages is not None and {"llamafactory", "liger_kernel", "bitsandbytes"} <= set(packages)
    assert "torchao" not in packages


@pytest.mark.parametrize(("platform", "bnb"), [("cuda", True), ("rocm", False), ("unknown", True)])
def test_the_assumed_default(platform: str, bnb: bool) -> None:
    env = assumed("0.9.5", platform)
    assert env.assumed and env.has("liger_kernel") and env.has("bitsandbytes") is bnb and not env.has("torchao")
    assert "assumed" in env.describe() and "--environment" in env.describe()


def test_the_summary_line_names_the_environment(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / "requirements.txt").write_text("llamafactory==0.9.5\n")
    (repo / "train.yaml").write_text(LORA_8B)
    out = _cfgopt(["lint", "train.yaml", "--show-settings"], repo)
    assert "# environment: requirements.txt" in out.stdout
    result = lint_paths([repo / "train.yaml"], Resolver(CommandLine(target="h200", gpus=1), cwd=repo))
    assert result.files == 1


def test_doctor_writes_a_snapshot_that_lint_reads(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    site = _fake_site(tmp_path, {"llamafactory": "0.9.5", "liger_kernel": "0.6.4", "numpy": "2.0.0"})
    out = _cfgopt(["doctor", "--write-environment", "--site-packages", str(site), "--root", str(tmp_path)], repo)
    assert out.returncode in (0, 1), out.stderr
    data = json.loads((repo / "cfgopt-environment.json").read_text())
    assert data["packages"] == {"liger_kernel": "0.6.4", "llamafactory": "0.9.5"}  # training packages only
    env = found_environment(repo, {})
    assert isinstance(env, Environment) and env.has("liger-kernel")


def test_doctor_writes_no_snapshot_where_llamafactory_is_not_installed(tmp_path: Path) -> None:
    """A laptop's doctor (torch and the rest, no LLaMA-Factory) is not the training node: one line, exit 2, and
    no file that lint would have to pass over."""
    repo = _repository(tmp_path)
    site = _fake_site(tmp_path, {"torch": "2.5.1", "liger_kernel": "0.6.4"})
    out = _cfgopt(["doctor", "--write-environment", "--site-packages", str(site), "--root", str(tmp_path)], repo)
    assert out.returncode == 2 and not (repo / "cfgopt-environment.json").exists()
    assert out.stderr.splitlines() == [
        "cfgopt doctor: cfgopt-environment.json: not written: LLaMA-Factory is not installed here, so this is not "
        "the node the job trains on; run `cfgopt doctor --write-environment` on the training node (or point "
        "--site-packages DIR at its packages)"
    ]


def _laptop_snapshot(folder: Path) -> None:
    """What `cfgopt doctor --write-environment` wrote on a machine with no training packages before it refused."""
    snapshot = {"written_by": "cfgopt doctor --write-environment", "stack": "no training packages", "packages": {}}
    (folder / "cfgopt-environment.json").write_text(json.dumps(snapshot))


def test_a_snapshot_without_llamafactory_is_not_the_jobs_environment(tmp_path: Path) -> None:
    """Finding 5 of a new user's hour: such a snapshot took the place of the assumed default, and plans lost Liger
    and 8-bit AdamW. The default is judged, and the output says which and why the snapshot was not used."""
    repo = _repository(tmp_path)
    _laptop_snapshot(repo)
    (repo / "train.yaml").write_text(LORA_8B)
    settings = Resolver().settings_for(repo / "train.yaml")
    env = settings.environment
    assert env.assumed and env.has("liger_kernel") and env.has("bitsandbytes")
    assert "cfgopt-environment.json (cfgopt doctor) not used: it names no LLaMA-Factory" in env.passed_over
    out = _cfgopt(["lint", "train.yaml", "--target", "h100", "--gpus", "1"], repo)
    summary = out.stderr.splitlines()[-2:]  # the summary goes to stderr when stdout is not a terminal
    assert summary[0].startswith("  environment: assumed: LLaMA-Factory 0.9.5 with its liger-kernel and bitsandbytes")
    assert summary[1] == (
        "  cfgopt-environment.json (cfgopt doctor) not used: it names no LLaMA-Factory, so it was written on a "
        "machine the job cannot train on (write it on the training node: `cfgopt doctor --write-environment`)"
    )
    report = json.loads(_cfgopt(["lint", "train.yaml", "--format", "json"], repo).stdout)
    assert report["files"][0]["environment_passed_over"] == summary[1].strip()


def test_the_walk_goes_on_past_a_snapshot_without_llamafactory(tmp_path: Path) -> None:
    """A requirement file above it is the closest environment that can be the job's; the snapshot is named."""
    repo = _repository(tmp_path)
    sub = repo / "configs"
    sub.mkdir()
    _laptop_snapshot(sub)
    (repo / "requirements.txt").write_text("llamafactory==0.9.4\n")
    cache: dict = {}
    env = found_environment(sub, cache)
    assert env is not None and env.source.endswith("repo/requirements.txt") and env.has("llamafactory")
    assert "not used" in env.passed_over
    above = found_environment(repo, cache)  # the cache holds the note only below the snapshot
    assert above is not None and above.passed_over == ""


def test_a_named_snapshot_without_llamafactory_is_refused(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    _laptop_snapshot(repo)
    (repo / "train.yaml").write_text(LORA_8B)
    out = _cfgopt(["lint", "train.yaml", "--environment", "cfgopt-environment.json"], repo)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "cfgopt: error: --environment: cfgopt-environment.json is a doctor snapshot that names no LLaMA-Factory: "
        "not the training node's packages (write it there: `cfgopt doctor --write-environment`)"
    ]


def test_a_long_line_with_an_unclosed_quote_is_read_in_linear_time(tmp_path: Path) -> None:
    """Issue 34's class: the quoted requirements of setup.py are found in one pass (a 300 KB line, no closing
    quote, would take hours with a pattern that backtracks)."""
    path = tmp_path / "setup.py"
    path.write_text('install_requires = ["llamafactory==0.9.5", "a' + "b" * 300_000 + "\n")
    assert read_packages(path) == {"llamafactory": "==0.9.5"}


# ---------------------------------------------------------------- requirement files as pip reads them (issue 43)


def test_a_requirement_files_includes_are_its_requirements(tmp_path: Path) -> None:
    """`-r reqs/lf.txt` installs what that file lists: its LLaMA-Factory release is the one judged, its
    liger-kernel is in the environment (no ENV004, no pin added twice)."""
    repo = _repository(tmp_path)
    (repo / "reqs").mkdir()
    (repo / "reqs" / "lf.txt").write_text("llamafactory==0.9.3\nliger-kernel>=0.5.5\n-r ../requirements.txt\n")
    (repo / "requirements.txt").write_text("-r reqs/lf.txt\ntorch==2.5.1\n")
    (repo / "train.yaml").write_text(LORA_8B)
    out = _cfgopt(["lint", ".", "--format", "json", "--target", "h200", "--gpus", "1"], repo)
    report = json.loads(out.stdout)
    assert {f["llamafactory_version"] for f in report["files"]} == {"0.9.3"}
    assert {f["environment"] for f in report["files"]} == {"requirements.txt"}
    assert "ENV004" not in {d["code"] for d in report["diagnostics"]}
    assert read_packages(repo / "requirements.txt")["liger_kernel"] == ">=0.5.5"


def test_hashed_pins_are_read_without_their_options(tmp_path: Path) -> None:
    from cfgopt.text.requirements.files import requirement_pins

    text = "llamafactory==0.9.5 \\\n    --hash=sha256:abc\ntorch==2.5.1 --hash=sha256:def\n"
    (tmp_path / "requirements.txt").write_text(text)
    assert read_packages(tmp_path / "requirements.txt") == {"llamafactory": "==0.9.5", "torch": "==2.5.1"}
    assert [p.spec for p in requirement_pins("requirements.txt", text)[0]] == ["==0.9.5", "==2.5.1"]


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        # the added pin on a line of its own: pip would join it to a trailing `\` continuation line
        ("llamafactory==0.9.5 \\\n", "llamafactory==0.9.5 \\\n\nliger-kernel>=0.6.3\n"),
        ("llamafactory==0.9.5\r\n", "llamafactory==0.9.5\r\nliger-kernel>=0.6.3\r\n"),  # the file's line endings
        ("llamafactory==0.9.5 --hash=sha256:abc\n", None),  # hash-checking: pip would refuse a pin without hashes
    ],
)
def test_env004_adds_its_pin_as_pip_reads_the_file(tmp_path: Path, requirements: str, expected: str | None) -> None:
    repo = _repository(tmp_path)
    (repo / "train.yaml").write_text(LORA_8B)
    (repo / "requirements.txt").write_bytes(requirements.encode())
    # the default selection: ENV004's pin is written only with the plan that uses it (the speed findings' fix)
    args = ["fix", ".", "--write", "--unsafe-fixes", "--target", "h200", "--gpus", "1"]
    _cfgopt(args, repo)
    assert (repo / "requirements.txt").read_bytes().decode() == (expected or requirements)
