"""A launch in a script with CRLF line endings (LF055): what bash passes it, checked against bash itself (a stand-in
`llamafactory-cli` that prints its arguments) and, as an oracle, against llamafactory 0.9.5's `get_train_args` on
those arguments; the rule's verdict, its fix and the plan it stops."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rule_cases import run_cli

from cfgopt.loaders.launch import find_commands
from cfgopt.text.document import Document

ARGS = "--model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --stage sft --do_train --dataset alpaca_en_demo --template qwen"
YAML = "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nstage: sft\ndo_train: true\ndataset: alpaca_en_demo\n"
# (script with LF line endings, made CRLF by each test; what the launch does: "fails", "value" (runs with a text
# value ending in a CR), "runs" (no CR that changes anything))
CASES = {
    "continuation-cut": (f"llamafactory-cli train \\\n  {ARGS} --output_dir out\n", "fails"),
    "yaml-name": ("llamafactory-cli train cfg.yaml\n", "fails"),
    "yaml-override-cut": ("llamafactory-cli train cfg.yaml \\\n  template=qwen\n", "fails"),
    "number-last": (f"llamafactory-cli train {ARGS} --output_dir out --num_train_epochs 3\n", "runs"),
    "text-last": (f"llamafactory-cli train {ARGS} --num_train_epochs 3 --output_dir out\n", "value"),
    "bool-value-last": (f"llamafactory-cli train {ARGS} --output_dir out --packing True\n", "fails"),
    "flag-last": (f"llamafactory-cli train {ARGS} --output_dir out --do_train\n", "fails"),
    "value-on-next-line": (f"llamafactory-cli train {ARGS} --output_dir \\\n  out --packing True\n", "value"),
    "comment-at-end": ("llamafactory-cli train cfg.yaml # go\n", "runs"),
}


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _found(text: str):
    (source,) = find_commands(Document(Path("train.sh"), _crlf(text)))
    return source.command.get("carriage_return")


def _bash_argv(tmp_path: Path, text: str) -> list[str]:
    """The arguments bash 5 passes `llamafactory-cli` in the CRLF script (a stand-in that prints them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "llamafactory-cli"
    stub.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "import json,sys; print(json.dumps(sys.argv[1:]))" "$@"\n')
    stub.chmod(0o755)
    (tmp_path / "train.sh").write_bytes(_crlf(text).encode())
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["bash", "train.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    return json.loads(run.stdout.splitlines()[0])


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cr_is_where_bash_puts_it(tmp_path: Path, name: str) -> None:
    text, _ = CASES[name]
    argv, found = _bash_argv(tmp_path, text), _found(text)
    if found is None:
        assert not any("\r" in word for word in argv)
        return
    assert argv[-1] == (found.word or "\r")  # the CR joins the word before it, or is a word of its own
    assert found.dropped == "" or found.dropped not in argv  # the lines below never reach the launch


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_verdict_is_what_the_launch_does(name: str) -> None:
    text, does = CASES[name]
    found = _found(text)
    verdict = "runs" if found is None or not (found.failure or found.value) else "fails" if found.failure else "value"
    assert verdict == does


def _train_args(argv: list[str], cwd: Path) -> str:
    """llamafactory 0.9.5's `get_train_args` as `llamafactory-cli train` runs it on `argv`: "ok", "value" (an
    output folder whose name ends in a CR) or "fails"."""
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    hparams = pytest.importorskip("llamafactory.hparams")
    saved, here = sys.argv, Path.cwd()
    sys.argv = ["llamafactory-cli", *argv[1:]]
    os.chdir(cwd)
    try:
        training = hparams.get_train_args()[2]
    except (Exception, SystemExit):  # noqa: BLE001 - the failure is the verdict (argparse exits 2)
        return "fails"
    finally:
        sys.argv = saved
        os.chdir(here)
    return "value" if "\r" in training.output_dir else "runs"


@pytest.mark.oracle
@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_llamafactory_does_what_the_verdict_says(tmp_path: Path, name: str) -> None:
    text, does = CASES[name]
    (tmp_path / "cfg.yaml").write_text(YAML + "finetuning_type: lora\ntemplate: qwen\noutput_dir: out\n")
    assert _train_args(_bash_argv(tmp_path, text), tmp_path) == does


# ---------------------------------------------------------------- the rule, its fix, the plan


def _lint(tmp_path: Path, text: str, *args: str, crlf: bool = True) -> list[dict]:
    (tmp_path / "cfg.yaml").write_text(YAML)
    (tmp_path / "train.sh").write_bytes((_crlf(text) if crlf else text).encode())
    _, out, _ = run_cli(["lint", "--format", "json", *args, str(tmp_path / "train.sh")])
    return json.loads(out)["diagnostics"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_lf055_is_an_error_only_where_the_launch_fails(tmp_path: Path, name: str) -> None:
    text, does = CASES[name]
    found = [d for d in _lint(tmp_path, text, "--select", "LF055") if d["code"] == "LF055"]
    expected = {"fails": ["error"], "value": ["warning"], "runs": []}[does]
    assert [d["severity"] for d in found] == expected


def test_the_fix_turns_every_line_ending_to_lf_and_converges(tmp_path: Path) -> None:
    text = f"#!/usr/bin/env bash\n# LoRA\nllamafactory-cli train \\\n  {ARGS} \\\n  --output_dir out\n"
    (tmp_path / "train.sh").write_bytes(_crlf(text).encode())
    run_cli(["fix", "--write", "--select", "LF055", str(tmp_path / "train.sh")])
    assert (tmp_path / "train.sh").read_bytes() == text.encode()
    assert "fixed:" not in run_cli(["fix", "--write", "--select", "LF055", str(tmp_path / "train.sh")])[2]


def test_no_fix_where_a_heredoc_holds_a_crlf_line(tmp_path: Path) -> None:
    """The heredoc's text is data written elsewhere (and its `EOF` + CR line ends it only as written)."""
    text = f"cat > notes.txt <<EOF\nrun\nEOF\nllamafactory-cli train \\\n  {ARGS} --output_dir out\n"
    (found,) = [d for d in _lint(tmp_path, text, "--select", "LF055")]
    assert found["fix"] is None and "no fix: a heredoc" in found["message"]


def test_no_speed_plan_for_a_launch_bash_never_gives_its_flags(tmp_path: Path) -> None:
    text = f"llamafactory-cli train \\\n  {ARGS} --finetuning_type lora --output_dir out --bf16 true\n"

    def planned(diagnostics: list[dict]) -> list[dict]:
        return [d for d in diagnostics if d["fix"] and d["fix"]["description"].startswith("Speed plan")]

    found = _lint(tmp_path, text, "--target", "h100", "--gpus", "1")
    assert not planned(found)
    assert any("no speed plan: the script has CRLF line endings" in d["message"] for d in found)
    assert planned(_lint(tmp_path, text, "--target", "h100", "--gpus", "1", crlf=False))  # as written: a plan
