"""The pre-commit hooks, run for real: a temporary git repository with the seed's broken LLaMA-Factory config,
a `.pre-commit-config.yaml` whose `repo: local` hooks are the shipped `.pre-commit-hooks.yaml` entries run
by this checkout's interpreter (so the test needs no commit and no network), and `pre-commit run --all-files`:
lint fails, fix rewrites (pre-commit fails the hook because files changed), and a second run passes.
Unrelated YAML/JSON/shell files pass silently; the project config's `exclude` holds for named files; the requirement
files cfgopt judges reach the hooks too (their `files` pattern), so a pin pip cannot install fails the commit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rule_cases import ROOT

SEED = ROOT / "fixtures" / "seed"
PRE_COMMIT = shutil.which("pre-commit") or shutil.which("pre-commit", path=str(Path(sys.executable).parent))

pytestmark = pytest.mark.skipif(
    PRE_COMMIT is None or shutil.which("git") is None, reason="pre-commit (pip install pre-commit) or git missing"
)


def shipped_hooks() -> dict[str, dict]:
    return {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}


def local_hook(hook: dict, args: list[str] | None = None) -> dict:
    """A shipped hook as a `repo: local` hook running this checkout (`cfgopt` -> `python -m cfgopt`)."""
    entry = hook["entry"]
    assert entry.startswith("cfgopt ")
    local = {k: v for k, v in hook.items() if k not in ("language", "minimum_pre_commit_version")}
    local["entry"] = f"{sys.executable} -m cfgopt {entry[len('cfgopt ') :]}"
    local["language"] = "system"
    local["args"] = args if args is not None else hook.get("args", [])
    return local


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def run_hooks(repo: Path, hooks: list[dict]) -> subprocess.CompletedProcess:
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}))
    git(repo, "add", "-A")
    env = dict(os.environ)
    env["PRE_COMMIT_HOME"] = str(repo.parent / "pre-commit-home")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [PRE_COMMIT, "run", "--all-files", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    git(repo, "config", "commit.gpgsign", "false")
    configs = repo / "configs"
    configs.mkdir()
    shutil.copy(SEED / "llama3_lora_sft.yaml", configs / "llama3_lora_sft.yaml")
    shutil.copy(SEED / "ds_z3_config.json", configs / "ds_z3_config.json")
    # unrelated files pre-commit will hand over too: they must pass silently
    (repo / "ci.yml").write_text("on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n")
    (repo / "chart.yaml").write_text("name: {{ .Values.name }}\n  bad: [\n")  # a template, not YAML
    (repo / "package.json").write_text('{"name": "x", "version": "1.0.0"}\n')
    (repo / "empty.yaml").write_text("")
    (repo / "build.sh").write_text("#!/bin/sh\necho hello\n")
    # excluded by the project config, even though pre-commit names it
    legacy = repo / "legacy"
    legacy.mkdir()
    (legacy / "old.yaml").write_text("model_name_or_path: x\nstage: sft\nflash_attn: true\nbogus_key: 1\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "demo"\n\n[tool.cfgopt]\nexclude = ["legacy/"]\n')
    return repo


def test_hooks_file_is_well_formed() -> None:
    hooks = shipped_hooks()
    assert set(hooks) == {"cfgopt-lint", "cfgopt-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["types"] == ["text"] and "types_or" not in hook
        assert "--force-exclude" in hook["entry"] and hook["require_serial"] is True
    assert hooks["cfgopt-fix"]["files"] == hooks["cfgopt-lint"]["files"]
    assert hooks["cfgopt-fix"]["entry"].startswith("cfgopt fix --write")


# (path in the repository, handed to the hooks): what a folder walk of cfgopt reads (cfgopt.loaders.discovery)
HANDED_OVER = [
    ("configs/sft.yaml", True),
    ("configs/SFT.YML", True),
    ("ds_z3.json", True),
    ("scripts/train.sh", True),
    ("run.bash", True),
    ("requirements.txt", True),
    ("envs/requirements-dev.txt", True),
    ("pyproject.toml", True),
    ("uv.lock", True),
    ("poetry.lock", True),
    ("setup.py", True),
    ("setup.cfg", True),
    ("environment.yml", True),
    ("README.md", False),
    ("train.py", False),
    ("data/alpaca.jsonl", False),
    ("notes.txt", False),
    ("my_requirements.txt", False),  # pip reads any name with -r; cfgopt judges requirements*.txt only
    ("Pipfile", False),
]


@pytest.mark.parametrize(("path", "handed"), HANDED_OVER)
def test_files_pattern_hands_over_what_a_folder_walk_reads(path: str, handed: bool) -> None:
    """pre-commit passes a file when `files` matches its path (re.search) and it has every tag of `types`."""
    from cfgopt.loaders.discovery import CONFIG_SUFFIXES, SCRIPT_SUFFIXES
    from cfgopt.text.requirements.files import is_requirement_file

    suffix = Path(path).suffix.lower()
    walked = suffix in CONFIG_SUFFIXES or suffix in SCRIPT_SUFFIXES or is_requirement_file(Path(path).name)
    assert walked == handed
    for hook in shipped_hooks().values():
        assert bool(re.search(hook["files"], path)) == handed, (hook["id"], path)


def test_lint_fails_fix_rewrites_second_run_passes(repo: Path) -> None:
    hooks = shipped_hooks()
    lint = local_hook(hooks["cfgopt-lint"])
    fix = local_hook(hooks["cfgopt-fix"], args=["--unsafe-fixes"])
    original = (repo / "configs" / "llama3_lora_sft.yaml").read_text()

    first = run_hooks(repo, [lint])
    assert first.returncode == 1, first.stdout + first.stderr
    assert "LF003" in first.stdout and "configs/llama3_lora_sft.yaml" in first.stdout
    for quiet in ("ci.yml", "chart.yaml", "package.json", "empty.yaml", "build.sh", "legacy/old.yaml"):
        assert quiet not in first.stdout, quiet
    assert (repo / "configs" / "llama3_lora_sft.yaml").read_text() == original  # lint never writes

    second = run_hooks(repo, [fix, lint])
    assert second.returncode == 1
    assert "files were modified by this hook" in second.stdout
    fixed = (repo / "configs" / "llama3_lora_sft.yaml").read_text()
    assert fixed != original and "flash_attn: true" not in fixed and "compute_type" not in fixed
    assert "stage3_parition_grads" not in (repo / "configs" / "ds_z3_config.json").read_text()
    assert (repo / "legacy" / "old.yaml").read_text().endswith("bogus_key: 1\n")  # excluded: untouched

    third = run_hooks(repo, [fix, lint])
    assert third.returncode == 0, third.stdout + third.stderr
    assert "Passed" in third.stdout


def test_a_requirements_file_pip_cannot_install_fails_the_lint_hook(repo: Path) -> None:
    """Issue: the hooks took only YAML, JSON and shell files, so ENV005 (pip's ResolutionImpossible) never failed a
    commit. torch 2.5.1 requires triton==3.1.0 (its PyPI metadata, shipped with cfgopt)."""
    (repo / "requirements.txt").write_text("torch==2.5.1\ntriton==3.0.0\n")
    run = run_hooks(repo, [local_hook(shipped_hooks()["cfgopt-lint"], args=["--select", "ENV005"])])
    assert run.returncode == 1, run.stdout + run.stderr
    assert "requirements.txt:2:7: error ENV005" in run.stdout


def test_safe_fix_hook_with_only_safe_problems(repo: Path) -> None:
    """Default args (safe fixes only) on a config whose problems are all safely fixable: fix, then clean."""
    cfg = repo / "configs" / "llama3_lora_sft.yaml"
    shutil.copy(ROOT / "fixtures" / "clean" / "llama3_lora_sft.yaml", cfg)
    shutil.copy(ROOT / "fixtures" / "clean" / "ds_z2_config.json", repo / "configs" / "ds_z2_config.json")
    (repo / "configs" / "ds_z3_config.json").unlink()
    # judged for errors in the LLaMA-Factory config and cfgopt's own (CFG) findings only
    (repo / "pyproject.toml").write_text('[tool.cfgopt]\nexclude = ["legacy/"]\nselect = ["CFG", "LF"]\n')
    hooks = shipped_hooks()
    lint, fix = local_hook(hooks["cfgopt-lint"]), local_hook(hooks["cfgopt-fix"])
    clean = run_hooks(repo, [fix, lint])
    assert clean.returncode == 0, clean.stdout + clean.stderr
    cfg.write_text(cfg.read_text() + "# cfgopt: ignore[LF003]\n")  # a stale suppression: CFG004, safe fix
    broken = run_hooks(repo, [lint])
    assert broken.returncode == 1 and "CFG004" in broken.stdout
    fixed = run_hooks(repo, [fix, lint])
    assert fixed.returncode == 1 and "files were modified by this hook" in fixed.stdout
    assert "cfgopt: ignore" not in cfg.read_text()
    assert run_hooks(repo, [fix, lint]).returncode == 0


def test_each_finding_and_each_fix_is_printed_once_with_both_hooks(repo: Path) -> None:
    """cfgopt-fix reports what it changed, cfgopt-lint what remains: with both hooks nothing is printed twice;
    the fix hook fails only because it changed files, and once they are in, what remains is lint's to fail."""
    hooks = shipped_hooks()
    both = [local_hook(hooks["cfgopt-fix"]), local_hook(hooks["cfgopt-lint"])]
    run = run_hooks(repo, both)
    assert run.returncode == 1 and "files were modified by this hook" in run.stdout
    for finding in ("configs/llama3_lora_sft.yaml:15:13", "configs/llama3_lora_sft.yaml:16:1"):  # LF003, LF001
        assert run.stdout.count(finding) == 1, run.stdout
    for applied in ("DS007 Add", "DS001 Remove", "LF001 Replace"):
        assert run.stdout.count(applied) == 1, run.stdout
    again = run_hooks(repo, both)  # nothing left to fix: the fix hook passes, lint fails on the unfixable errors
    fix_part, lint_part = again.stdout.split("cfgopt lint (", 1)
    assert "Passed" in fix_part and "Failed" in lint_part and "LF003" in lint_part and "LF003" not in fix_part
