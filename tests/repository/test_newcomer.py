"""The newcomer's path, as the README tells it: a fresh virtual environment, `pip install` of the project
(not editable, so a file missing from the package fails here), then the commands a new user tries.

Every wrong usage exits 2 with one line saying what is wrong (argparse's usage block aside) and no
traceback; the clean fixture passes; stdin works for lint and fix; verify and tune stop at once on a
machine without a GPU. The virtual environment is built once per run (about 40 s on 2 cores: `python -m
venv`, then pip with its usual index and cache). The package is installed from a copy of the files a
clone has, so nothing is written into the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml
from repo_paths import ROOT

CLEAN = "fixtures/clean/llama3_lora_sft.yaml"
SEED = "fixtures/seed/llama3_lora_sft.yaml"


def _env() -> dict[str, str]:
    """The user's environment, without this checkout on PYTHONPATH (the installed copy must answer)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["DISABLE_VERSION_CHECK"] = "1"
    env["NO_COLOR"] = "1"
    return env


@pytest.fixture(scope="module")
def cfgopt_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("newcomer")
    source = base / "clone"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "cfgopt", source / "cfgopt", ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(source)], capture_output=True, text=True, env=_env()
    )
    assert pip.returncode == 0, f"pip install of the project failed:\n{pip.stdout[-3000:]}\n{pip.stderr[-3000:]}"
    where = subprocess.run(
        [str(python), "-c", "import cfgopt; print(cfgopt.__file__)"],
        cwd=base,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert str(env_dir) in where.stdout, where.stdout + where.stderr  # the installed copy, not the checkout
    return env_dir / "bin" / "cfgopt"


def _run(binary: Path, args: list[str], cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(binary), *args], cwd=cwd, input=stdin, capture_output=True, text=True, env=_env(), timeout=120
    )


SUMMARY_LINES = ("Checked ", "Would fix ", "Fixed ")  # the run's usual last line, not a message


def _message_lines(stderr: str) -> list[str]:
    """stderr without argparse's usage block (`usage: ...` and its indented continuation lines) and without
    the summary line every lint / fix run ends with."""
    lines = []
    in_usage = in_summary = False
    for line in stderr.splitlines():
        if line.startswith("usage:"):
            in_usage = True
            continue
        if in_usage and line.startswith(" "):
            continue
        in_usage = False
        in_summary = line.startswith(SUMMARY_LINES) or (in_summary and line.startswith("  "))  # its parts below
        if line.strip() and not in_summary:
            lines.append(line)
    return lines


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files a newcomer might point cfgopt at by mistake."""
    base = tmp_path_factory.mktemp("playground")
    (base / "empty.yaml").write_text("")
    (base / "notes.txt").write_text("not a config\n")
    (base / "no_configs").mkdir()
    (base / "no_configs" / "README.md").write_text("# nothing to lint here\n")
    bad_select = base / "bad_select"
    bad_select.mkdir()
    (bad_select / "cfgopt.toml").write_text('select = ["LF9Z"]\n')
    shutil.copy2(ROOT / CLEAN, bad_select / "cfg.yaml")
    bad_toml = base / "bad_toml"
    bad_toml.mkdir()
    (bad_toml / "cfgopt.toml").write_text("target = \n")
    shutil.copy2(ROOT / CLEAN, bad_toml / "cfg.yaml")
    return base


# (what a newcomer typed, the arguments); `{p}` is the playground folder.
WRONG_USAGES: list[tuple[str, list[str]]] = [
    # a bare `cfgopt` prints the whole help, as ruff (tests/commands/test_cli_consistency.py)
    ("unknown subcommand", ["check", "."]),
    ("unknown lint flag", ["lint", "--bogus", "fixtures/clean"]),
    ("unknown fix flag", ["fix", "--bogus", "fixtures/clean"]),
    ("unknown estimate flag", ["estimate", "--bogus", CLEAN]),
    ("unknown rules flag", ["rules", "--bogus"]),
    ("unknown schema export flag", ["schema", "export", "--bogus"]),
    ("negative --gpus", ["lint", "--gpus", "-3", "fixtures/clean"]),
    ("non-integer --gpus", ["lint", "--gpus", "two", "fixtures/clean"]),
    ("unknown --target", ["lint", "--target", "tpu", "fixtures/clean"]),
    ("unknown --format", ["lint", "--format", "xml", "fixtures/clean"]),
    ("unknown --fail-on", ["lint", "--fail-on", "fatal", "fixtures/clean"]),
    ("unknown fix --fail-on", ["fix", "--fail-on", "fatal", "fixtures/clean"]),
    ("unknown --select prefix", ["lint", "--select", "ZZZ", "fixtures/clean"]),
    ("unknown --ignore code", ["lint", "--ignore", "ZZZ999", "fixtures/clean"]),
    ("misspelt --ignore code", ["lint", "--ignore", "LF0O3", "fixtures/clean"]),
    ("unknown --extend-select", ["lint", "--extend-select", "QQ1", "fixtures/clean"]),
    ("unknown --fixable", ["fix", "--fixable", "NOPE", "fixtures/clean"]),
    ("unknown code in --config", ["lint", "--config", 'select=["NOPE"]', "fixtures/clean"]),
    ("unknown option in --config", ["lint", "--config", "bogus=1", "fixtures/clean"]),
    ("--config without =", ["lint", "--config", "select", "fixtures/clean"]),
    ("unknown LLaMA-Factory version", ["lint", "--llamafactory-version", "0.1", "fixtures/clean"]),
    ("unknown DeepSpeed version", ["lint", "--deepspeed-version", "9.9", "fixtures/clean"]),
    ("unknown code in cfgopt.toml", ["lint", "{p}/bad_select"]),
    ("invalid cfgopt.toml", ["lint", "{p}/bad_toml"]),
    ("missing file to lint", ["lint", "missing.yaml"]),
    ("missing file to fix", ["fix", "missing.yaml"]),
    ("empty file named", ["lint", "{p}/empty.yaml"]),
    ("stdin with other paths", ["lint", "-", CLEAN]),
    ("--stdin-filename without -", ["lint", "--stdin-filename", "x.yaml", CLEAN]),
    ("--watch on stdin", ["lint", "-", "--watch"]),
    ("unknown rule", ["rule", "LF999"]),
    ("estimate a DeepSpeed JSON", ["estimate", "fixtures/clean/ds_z2_config.json"]),
    ("estimate a shell script", ["estimate", "fixtures/seed/train.sh"]),
    ("estimate a non-config YAML", ["estimate", ".pre-commit-hooks.yaml"]),
    ("estimate a text file", ["estimate", "{p}/notes.txt"]),
    ("estimate a folder without configs", ["estimate", "{p}/no_configs"]),
    ("estimate a missing file", ["estimate", "missing.yaml"]),
    ("estimate --gpus 0", ["estimate", "--gpus", "0", CLEAN]),
    ("estimate --fill 2", ["estimate", "--fill", "2", CLEAN]),
    ("estimate for the CPU", ["estimate", "--target", "cpu", CLEAN]),
    ("verify without a GPU", ["verify", CLEAN, "--steps", "2"]),
    ("tune without a GPU", ["tune", CLEAN]),
    ("verify a folder", ["verify", "fixtures/clean"]),
    ("verify a missing file", ["verify", "missing.yaml"]),
    ("verify --steps 0", ["verify", CLEAN, "--steps", "0"]),
    ("verify an unknown --target", ["verify", CLEAN, "--target", "tpu"]),
    ("tune --gpus 0", ["tune", CLEAN, "--gpus", "0"]),
    ("tune an unknown knob", ["tune", CLEAN, "--knobs", "warp"]),
]


def test_there_are_at_least_30_wrong_usages() -> None:
    assert len(WRONG_USAGES) >= 30 and len({name for name, _ in WRONG_USAGES}) == len(WRONG_USAGES)


@pytest.mark.parametrize(("name", "args"), WRONG_USAGES, ids=[name for name, _ in WRONG_USAGES])
def test_wrong_usage_exits_2_with_one_line(cfgopt_bin: Path, playground: Path, name: str, args: list[str]) -> None:
    argv = [a.replace("{p}", str(playground)) for a in args]
    proc = _run(cfgopt_bin, argv, stdin="")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, f"{name}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = _message_lines(proc.stderr)
    assert len(lines) == 1, f"{name}: expected one line on stderr, got:\n{proc.stderr}"


def test_subcommand_usage_on_unknown_flag(cfgopt_bin: Path) -> None:
    proc = _run(cfgopt_bin, ["lint", "--bogus"])
    assert proc.stderr.startswith("usage: cfgopt lint ") and "--bogus" in proc.stderr


def test_did_you_mean_for_a_misspelt_code(cfgopt_bin: Path) -> None:
    proc = _run(cfgopt_bin, ["lint", "--select", "LF0O3", "fixtures/clean"])
    assert "did you mean" in proc.stderr and proc.returncode == 2


def test_the_clean_fixture_passes_and_has_nothing_to_fix(cfgopt_bin: Path) -> None:
    lint = _run(cfgopt_bin, ["lint", "fixtures/clean"])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert lint.stderr.endswith("\n")  # the summary line ends its line
    fix = _run(cfgopt_bin, ["fix", "fixtures/clean"])
    assert fix.returncode == 0 and fix.stdout == "", fix.stdout + fix.stderr


def test_a_folder_without_configs_warns(cfgopt_bin: Path, playground: Path) -> None:
    proc = _run(cfgopt_bin, ["lint", str(playground / "no_configs")])
    assert proc.returncode == 0 and "warning: no config files found" in proc.stderr
    quiet = _run(cfgopt_bin, ["lint", "-q", str(playground / "no_configs")])
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_stdin_for_lint_and_fix(cfgopt_bin: Path) -> None:
    seed = (ROOT / SEED).read_text()
    lint = _run(cfgopt_bin, ["lint", "-", "--stdin-filename", SEED, "--format", "concise"], stdin=seed)
    assert lint.returncode == 1, lint.stderr
    assert f"{SEED}:15:13: LF003 error" in lint.stdout
    clean = _run(cfgopt_bin, ["lint", "-", "--stdin-filename", CLEAN], stdin=(ROOT / CLEAN).read_text())
    assert clean.returncode == 0, clean.stdout + clean.stderr
    fix = _run(cfgopt_bin, ["fix", "-", "--stdin-filename", SEED], stdin=seed)
    fixed = yaml.safe_load(fix.stdout)
    assert "compute_type" not in fixed and fixed["bf16"] is True, fix.stdout  # LF001's safe fix, on stdout
    assert fix.returncode == 1  # LF003 needs --unsafe-fixes: it remains
    unchanged = _run(cfgopt_bin, ["fix", "-", "--stdin-filename", CLEAN], stdin=(ROOT / CLEAN).read_text())
    assert unchanged.returncode == 0 and unchanged.stdout == (ROOT / CLEAN).read_text()


def test_show_settings_is_toml(cfgopt_bin: Path) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    proc = _run(cfgopt_bin, ["lint", "--show-settings", "fixtures/clean"])
    settings = tomllib.loads(proc.stdout)
    assert proc.returncode == 0 and settings["target"] == "mi300x" and "gpus" not in settings


def test_verify_without_a_gpu_says_so_in_seconds() -> None:
    """In the development environment (torch, transformers, llamafactory installed): no GPU, exit 2 at once,
    nothing built. The fresh environment above lacks the packages and says that instead."""
    pytest.importorskip("llamafactory")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for command in ("verify", "tune"):
        proc = subprocess.run(
            [sys.executable, "-m", "cfgopt", command, CLEAN],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
        )
        assert proc.returncode == 2 and "no GPU here" in proc.stderr, proc.stderr
        assert len(_message_lines(proc.stderr)) == 1
