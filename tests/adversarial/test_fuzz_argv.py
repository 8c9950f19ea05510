"""Script fixes seen through bash (issue 34, damage 1): launch lines whose option words are written with quotes,
escapes, continuation lines or `$"..."`, fixed by cfgopt, then run by bash with a fake `llamafactory-cli` on PATH
that records its argv. The fixed script passes `bash -n`, and bash's argv differs from the original only in the
words of the keys a fix names (`--flash_attn Fa` -> `sdpa`, `--compute_type bf16` -> `--bf16 True`,
`evaluation_strategy` -> `eval_strategy`); cfgopt's own reading of the fixed script is bash's argv."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sampling import examples

from cfgopt.job.settings import Settings
from cfgopt.lint.fixer import fix_paths
from cfgopt.loaders.launch import find_commands
from cfgopt.text.document import Document, encode

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

EXAMPLES = int(os.environ.get("CFGOPT_FUZZ_EXAMPLES") or examples(120, 30))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

BASE = ["--model_name_or_path", "m", "--stage", "sft", "--do_train", "--finetuning_type", "lora", "--dataset", "d"]
FIXED_KEYS = ("flash_attn", "compute_type", "bf16", "evaluation_strategy", "eval_strategy")  # what a fix may touch
YAML = "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndataset: d\ntemplate: qwen\n"
FAKE_CLI = '#!/bin/sh\nprintf \'%s\\0\' "$@" >> "$ARGV_LOG"\nprintf \'\\1\\0\' >> "$ARGV_LOG"\n'


def _spell(draw, text: str) -> str:
    """`text` as one shell word written one of the ways scripts write it (it decodes to `text`)."""
    cut = draw(st.integers(0, len(text)))
    head, tail = text[:cut], text[cut:]
    form = draw(st.sampled_from(["plain", "double", "single-tail", "escape", "continuation", "locale", "double-tail"]))
    if form == "double":
        return f'"{text}"'
    if form == "single-tail":
        return f"{head}'{tail}'"
    if form == "double-tail":
        return f'{head}"{tail}"'
    if form == "escape" and tail and tail[0].isalnum():
        return f"{head}\\{tail}"
    if form == "continuation" and head and tail:
        return f"{head}\\\n{tail}"
    if form == "locale":
        return f'$"{text}"'
    return text


OPTIONS = [("flash_attn", "Fa"), ("flash_attn", "sdpa"), ("compute_type", "bf16"), ("evaluation_strategy", "steps")]


def option(draw, key: str, value: str, dotlist: bool) -> str:
    """An option the fixer rewrites (or a near miss it leaves), written with quotes or escapes."""
    if dotlist:
        return _spell(draw, f"{key}={value}")
    if draw(st.booleans()):
        return _spell(draw, f"--{key}={value}")
    return f"{_spell(draw, f'--{key}')} {_spell(draw, value)}"


@st.composite
def launch_scripts(draw) -> str:
    lines = ["#!/bin/bash"]
    for _ in range(draw(st.integers(1, 3))):
        dotlist = draw(st.booleans())
        words = ["x.yaml"] if dotlist else [*BASE, "--template", "qwen", "--output_dir", "out"]
        chosen = draw(st.lists(st.sampled_from(OPTIONS), min_size=1, max_size=3, unique_by=lambda o: o[0]))
        options = [option(draw, key, value, dotlist) for key, value in chosen]  # a repeated key: the last is read
        sep = draw(st.sampled_from([" ", " \\\n  "]))
        lines.append("llamafactory-cli train" + sep + sep.join([*words, *options]))
    return "\n".join(lines) + "\n"


def _argv(script: Path, folder: Path) -> list[list[str]]:
    """The argv each `llamafactory-cli` call of the script receives when bash runs it."""
    log = folder / "argv.log"
    log.write_bytes(b"")
    env = {"PATH": f"{folder / 'bin'}:/usr/bin:/bin", "ARGV_LOG": str(log)}
    run = subprocess.run(["bash", str(script)], cwd=folder, env=env, capture_output=True, timeout=30)
    assert run.returncode == 0, run.stderr
    calls, current = [], []
    for part in log.read_bytes().split(b"\0")[:-1]:
        if part == b"\1":
            calls.append(current)
            current = []
        else:
            current.append(part.decode())
    return calls


def _untouched(argv: list[str]) -> list[str]:
    """The words of an argv no fix may change: all but the fixed keys' option and value words."""
    out, skip = [], False
    for word in argv:
        name = word.lstrip("-").partition("=")[0]
        if name in FIXED_KEYS:
            skip = word.startswith("--") and "=" not in word
            continue
        if skip and not word.startswith("-"):
            skip = False
            continue
        out.append(word)
    return out


NOT_UTF8 = b"# caf\xe9, \xd1\xb5\xc1\xb7 (Latin-1 and GBK comments: bash runs the bytes)\n"


@SETTINGS
@given(launch_scripts(), st.booleans())
def test_fixed_option_words_keep_bashs_argv(text: str, not_utf8: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bin").mkdir()
        (folder / "bin" / "llamafactory-cli").write_text(FAKE_CLI)
        (folder / "bin" / "llamafactory-cli").chmod(0o755)
        (folder / "x.yaml").write_text(YAML)
        script = folder / "run.sh"
        script.write_bytes((NOT_UTF8 if not_utf8 else b"") + text.encode())
        before = _argv(script, folder)
        result = fix_paths([script], Settings(unsafe_fixes=True, select=("LF001", "LF003")))
        fixed = result.fixed.get(script.resolve())
        if fixed is None:
            return
        script.write_bytes(encode(fixed))
        assert fixed.startswith(NOT_UTF8.decode("utf-8", "surrogateescape")) == not_utf8
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=30).returncode == 0, fixed
        after = _argv(script, folder)
        assert [_untouched(a) for a in after] == [_untouched(b) for b in before], fixed
        read = [src.command for src in find_commands(Document(path=script, text=fixed))]
        assert len(read) == len(after)
        for argv in after:  # the fixes did what they say: no Fa, no WebUI key, no removed key is left
            assert not {"Fa", "--compute_type", "--evaluation_strategy"} & set(argv), (fixed, argv)
            assert not [w for w in argv if w.startswith(("flash_attn=Fa", "--flash_attn=Fa", "compute_type="))]


@pytest.mark.parametrize(
    ("written", "fixed"),
    [
        ('"--compute_type" bf16', "--bf16 True"),
        ('"--flash_attn=Fa"', '"--flash_attn"=sdpa'),
        ("--flash_\\\nattn=Fa", "--flash_\\\nattn=sdpa"),
        ('--compute_type="bf16"', "--bf16=True"),
        ("--flash'_attn' $\"Fa\"", "--flash'_attn' sdpa"),
    ],
)
def test_quoted_and_escaped_option_words_are_edited_as_written(tmp_path: Path, written: str, fixed: str) -> None:
    """Issue 34 damage (1): edits at the decoded word's offsets left an open quote or `--flash_attsdpa`."""
    head = "llamafactory-cli train " + " ".join([*BASE, "--template", "qwen", "--output_dir", "out"]) + " "
    script = tmp_path / "run.sh"
    script.write_text(head + written + "\n")
    result = fix_paths([script], Settings(unsafe_fixes=True, select=("LF001", "LF003")))
    assert result.fixed[script.resolve()] == head + fixed + "\n"
