"""A launch line is one job (issue 33): the YAML it names under its overrides, as each release's `read_args` merges
them; the script's variables followed where their value is static; the launcher's GPU count. The verdicts on
what LLaMA-Factory does with the words after a YAML are checked against its real `read_args` (oracle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from cfgopt.job.settings import Settings
from cfgopt.lint.engine import build_project
from cfgopt.loaders.launch import find_commands
from cfgopt.project.launch_jobs import starts_torchrun
from cfgopt.text.document import Document

YAML = """\
model_name_or_path: Qwen/Qwen2.5-0.5B
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
template: qwen
output_dir: out
"""
ARGS = "--model_name_or_path m --stage sft --do_train --finetuning_type lora --dataset d --output_dir out"


def lint(folder: Path, *args: str) -> list[dict]:
    run = subprocess.run(
        [sys.executable, "-m", "cfgopt", "lint", "--format", "json", "run.sh", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)["diagnostics"]


def project(folder: Path, script: str, **settings):
    (folder / "run.sh").write_text(script)
    return build_project([folder / "run.sh"], Settings(**settings))


def lines_of(proj) -> list:
    return [s for s in proj.sources if s.command.get("launcher")]


# ---------------------------------------------------------------- the YAML's keys, then the line's overrides


@pytest.mark.parametrize("version", ["0.9.1", "0.9.5"])
def test_a_line_naming_a_yaml_with_a_template_is_no_missing_template(tmp_path: Path, version: str) -> None:
    (tmp_path / "x.yaml").write_text(YAML)
    (tmp_path / "run.sh").write_text("llamafactory-cli train x.yaml\n")
    found = lint(tmp_path, "--llamafactory-version", version)
    assert not [d for d in found if d["code"] == "LF042"]


def test_the_job_is_the_yaml_under_the_overrides(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(YAML + "learning_rate: 1.0e-5\n")
    proj = project(tmp_path, "llamafactory-cli train x.yaml learning_rate=1e-4 cutoff_len=4096 'run_name=a b'\n")
    (line,) = lines_of(proj)
    assert line.data["template"] == "qwen" and line.data["learning_rate"] == 1e-4
    assert line.data["cutoff_len"] == 4096 and line.data["run_name"] == "a b"
    assert [e.key for e in line.root.entries] == ["learning_rate", "cutoff_len", "run_name"]


def test_a_repeated_override_is_judged_on_its_last_value(tmp_path: Path) -> None:
    """Issue 43: `OmegaConf.from_cli` sets a key again each time it is given: the last value runs."""
    (tmp_path / "x.yaml").write_text(YAML)
    (tmp_path / "run.sh").write_text("llamafactory-cli train x.yaml flash_attn=Fa flash_attn=sdpa\n")
    assert not [d for d in lint(tmp_path) if d["code"] == "LF003"]
    (line,) = lines_of(project(tmp_path, "llamafactory-cli train x.yaml flash_attn=Fa flash_attn=sdpa\n"))
    assert line.data["flash_attn"] == "sdpa" and [e.node.value for e in line.root.entries] == ["sdpa"]


FUNCTION_SCRIPTS = [
    # a function's assignments apply where it is called, not where it is written
    "setup() {\n  local X=1\n  T=qwen\n}\nT=bad\nsetup\nllamafactory-cli train --template $T " + ARGS + "\n",
    # a launch in a function sees the variables of its call
    "T=bad\nrun() {\n  llamafactory-cli train --template $T " + ARGS + "\n}\nT=qwen\nrun\n",
    "function run { llamafactory-cli train --template $T " + ARGS + "; }\nT=qwen\nrun\n",
    "T=bad\nfunction set_t {\n  T=qwen\n}\nset_t\nllamafactory-cli train --template ${T} " + ARGS + "\n",
]


@pytest.mark.parametrize("script", FUNCTION_SCRIPTS)
def test_shell_functions_are_read_where_they_are_called(tmp_path: Path, script: str) -> None:
    """Issue 43: variables set inside a function were followed in text order (a false LF035)."""
    (line,) = lines_of(project(tmp_path, script))
    assert line.data["template"] == "qwen"


def test_a_functions_local_names_end_with_the_call(tmp_path: Path) -> None:
    script = "T=qwen\nf() {\n  local T=bad\n}\nf\nllamafactory-cli train --template $T " + ARGS + "\n"
    (line,) = lines_of(project(tmp_path, script))
    assert line.data["template"] == "qwen"


def test_calls_that_multiply_are_bounded(tmp_path: Path) -> None:
    """`f1() { f0; f0; f0; }` ... 30 levels: 3^29 calls; past the budget what functions set is unknown."""
    script = "f0() { T=bad; }\n" + "".join(f"f{i}() {{ f{i - 1}; f{i - 1}; f{i - 1}; }}\n" for i in range(1, 30))
    (line,) = lines_of(project(tmp_path, script + "f29\nllamafactory-cli train --template $T " + ARGS + "\n"))
    assert line.command["unknown"]


def test_a_missing_yaml_is_an_error_on_its_line(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("llamafactory-cli train configs/missing.yaml\n")
    found = lint(tmp_path, "--llamafactory-version", "0.9.1")
    assert [d["code"] for d in found] == ["LF044"]
    assert "`configs/missing.yaml` not found" in found[0]["message"] and found[0]["column"] == 24


@pytest.mark.parametrize(
    "writes",
    [
        "OUT=gen\nmkdir -p $OUT\ncat > $OUT/cfg.yaml <<EOF\nstage: sft\nEOF\n",
        "sed 's/a/b/' base.yaml > gen/cfg.yaml\n",
        "cp base.yaml ./gen/cfg.yaml\n",
        "envsubst < base.yaml | tee gen/cfg.yaml\n",
    ],
)
def test_a_yaml_the_script_writes_before_launching_it_is_not_missing(tmp_path: Path, writes: str) -> None:
    """Issue 43: a YAML the script writes (heredoc, `sed >`, `cp`) does not exist before it runs: no LF044."""
    (tmp_path / "run.sh").write_text(writes + "llamafactory-cli train gen/cfg.yaml\n")
    assert not [d for d in lint(tmp_path) if d["code"] == "LF044"]
    (tmp_path / "run.sh").write_text(writes + "llamafactory-cli train gen/other.yaml\n")
    assert [d["code"] for d in lint(tmp_path)] == ["LF044"]


def test_option_words_after_a_yaml_are_rejected_with_their_key_value_form(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(YAML)
    (tmp_path / "run.sh").write_text("llamafactory-cli train x.yaml --template qwen flash_attn=Fa\n")
    found = {d["code"]: d for d in lint(tmp_path)}
    assert "`--template` and `qwen`" in found["LF044"]["message"]
    assert found["LF044"]["fix"]["description"] == "Write `template=qwen`"
    fixed = subprocess.run(
        [sys.executable, "-m", "cfgopt", "fix", "--write", "--unsafe-fixes", "--select", "LF044,LF003", "run.sh"],
        cwd=tmp_path,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert fixed.returncode == 0, fixed.stderr
    assert (tmp_path / "run.sh").read_text() == "llamafactory-cli train x.yaml template=qwen flash_attn=sdpa\n"
    assert "`flash_attn: Fa` is not one of" in found["LF003"]["message"]  # a YAML value: parse_dict, no argparse


def test_releases_before_093_read_a_yaml_only_alone(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(YAML)
    (tmp_path / "run.sh").write_text("llamafactory-cli train x.yaml learning_rate=1e-4\n")
    found = lint(tmp_path, "--llamafactory-version", "0.9.2")
    assert [d["code"] for d in found if d["severity"] == "error"] == ["LF044"]
    assert lint(tmp_path, "--llamafactory-version", "0.9.3", "--select", "LF044") == []


def test_a_finding_of_the_yaml_is_reported_once_at_the_yaml(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(YAML.replace("template: qwen\n", "fp16: true\nbf16: true\n"))
    (tmp_path / "run.sh").write_text("llamafactory-cli train x.yaml\nllamafactory-cli train x.yaml seed=1\n")
    found = lint(tmp_path, "--llamafactory-version", "0.9.1", "--select", "LF004,LF042")
    assert sorted((Path(d["file"]).name, d["code"]) for d in found) == [("x.yaml", "LF004"), ("x.yaml", "LF042")]


# ---------------------------------------------------------------- variables


def test_a_yaml_named_through_a_variable_is_followed(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(YAML + "flash_attn: Fa\n")
    (tmp_path / "run.sh").write_text('YAML=x.yaml\nllamafactory-cli train "${YAML}"\n')
    found = lint(tmp_path, "--select", "LF003")
    assert [(Path(d["file"]).name, d["code"]) for d in found] == [("x.yaml", "LF003")]


def test_a_deepspeed_path_in_a_variable_is_followed(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto"}')
    script = f"DS_CONFIG_PATH=ds.json\nMISSING=nowhere.json\nllamafactory-cli train {ARGS} --template qwen "
    (tmp_path / "run.sh").write_text(f"{script}--deepspeed $DS_CONFIG_PATH\n{script} --deepspeed $MISSING\n")
    found = lint(tmp_path, "--select", "LF005")
    assert [(d["line"], "`nowhere.json` not found" in d["message"]) for d in found] == [(6, True)]


def test_a_value_from_the_scripts_arguments_is_unknown_never_an_error(tmp_path: Path) -> None:
    script = f"template=$1\nllamafactory-cli train {ARGS} --template ${{template}} --deepspeed ${{2:-ds.json}}\n"
    (tmp_path / "run.sh").write_text(script)
    assert [d for d in lint(tmp_path) if d["severity"] == "error"] == []


def test_train_bash_under_a_base_path_is_a_launch() -> None:
    text = f"base_path=$(pwd)\npython ${{base_path}}/src/train_bash.py {ARGS} --template qwen --flash_attn Fa\n"
    (src,) = find_commands(Document(path=Path("run.sh"), text=text))
    assert src.data["flash_attn"] == "Fa" and src.command["launcher"] == "python ${base_path}/src/train_bash.py"


@pytest.mark.parametrize(
    ("script", "gpus"),
    [
        ("FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train x.yaml\n", 8),
        ("export NNODES=2 NPROC_PER_NODE=4\nFORCE_TORCHRUN=1 llamafactory-cli train x.yaml\n", 8),
        ("NPROC=8\ntorchrun --nproc_per_node $NPROC src/train.py x.yaml\n", 8),
        ("NPROC=8\nN=2\ntorchrun --nnodes=$N --nproc_per_node=${NPROC} src/train.py x.yaml\n", 16),
        ("NPROC=$1\ntorchrun --nproc_per_node $NPROC src/train.py x.yaml\n", None),
    ],
)
def test_the_launchers_gpu_count_reaches_the_yamls_job(tmp_path: Path, script: str, gpus: int | None) -> None:
    (tmp_path / "x.yaml").write_text(YAML)
    proj = project(tmp_path, script)
    (line,) = lines_of(proj)
    (yaml_src,) = [s for s in proj.sources if s.document.path.name == "x.yaml"]
    for src in (line, yaml_src):
        hardware = proj.context(src).job.hardware(1)
        assert (hardware.gpus, hardware.gpus_stated) == ((gpus, True) if gpus else (1, False))


def test_launches_of_one_yaml_that_disagree_leave_its_count_unstated(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(YAML)
    script = "torchrun --nproc_per_node 8 src/train.py x.yaml\ntorchrun --nproc_per_node 2 src/train.py x.yaml\n"
    proj = project(tmp_path, script)
    (yaml_src,) = [s for s in proj.sources if s.document.path.name == "x.yaml"]
    assert proj.context(yaml_src).job.hardware(1).gpus_stated is False
    assert [proj.context(s).job.hardware(1).gpus for s in lines_of(proj)] == [8, 2]


# ---------------------------------------------------------------- the real read_args (oracle)


def _read_args(argv: list[str], cwd: Path):
    """LLaMA-Factory 0.9.5's `read_args` over `argv`, run in `cwd`: the dict, or the exception's type and text."""
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    parser = pytest.importorskip("llamafactory.hparams.parser")
    saved, here = sys.argv, Path.cwd()
    sys.argv = ["llamafactory-cli", *argv]
    os.chdir(cwd)
    try:
        return parser.read_args()
    except Exception as exc:  # noqa: BLE001 - the failure is the verdict
        return type(exc).__name__
    finally:
        sys.argv = saved
        os.chdir(here)


@pytest.mark.oracle
@pytest.mark.parametrize(
    "line",
    [
        "x.yaml learning_rate=1e-4 cutoff_len=4096",
        "x.yaml --template qwen",
        "x.yaml --flash_attn=sdpa",
        "x.yaml flash_attn=Fa do_train=false",
        "missing.yaml",
        "x.json",
    ],
)
def test_the_line_is_read_as_read_args_reads_it(tmp_path: Path, line: str) -> None:
    (tmp_path / "x.yaml").write_text(YAML)
    (tmp_path / "x.json").write_text(json.dumps({"template": "qwen"}))
    proj = project(tmp_path, f"llamafactory-cli train {line}\n")
    (src,) = lines_of(proj)
    real = _read_args(line.split(), tmp_path)
    errors = src.command["launch_errors"]
    if isinstance(real, str):  # the run stops in read_args: cfgopt says so on the line
        assert errors and real in errors[0][2]
        return
    from llamafactory.hparams.parser import _TRAIN_ARGS
    from transformers import HfArgumentParser

    unused = set(real) - {f for cls in _TRAIN_ARGS for f in cls.__dataclass_fields__}
    assert bool(unused) == bool(errors)  # keys parse_dict rejects: the words cfgopt reports
    if not unused:
        assert src.data == real
        HfArgumentParser(_TRAIN_ARGS).parse_dict(real, allow_extra_keys=False)  # and the values do parse


@pytest.mark.oracle
def test_before_093_argparse_keeps_the_yaml_path_unused() -> None:
    """0.9.0-0.9.2 hand a line with more than the YAML to `parse_args_into_dataclasses`: the path is left over."""
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    pytest.importorskip("llamafactory")
    from llamafactory.hparams.parser import _TRAIN_ARGS
    from transformers import HfArgumentParser

    *_, unknown = HfArgumentParser(_TRAIN_ARGS).parse_args_into_dataclasses(
        args=["x.yaml", "--model_name_or_path", "m", "--template", "qwen"], return_remaining_strings=True
    )
    assert unknown == ["x.yaml"]


# ---------------------------------------------------------------- issue 34: where launches hide, scripts not UTF-8

LAUNCH = f"llamafactory-cli train {ARGS} --template qwen --flash_attn Fa"


@pytest.mark.parametrize(
    "script",
    [
        f"function f {{ {LAUNCH}; }}\nf\n",
        f"function f {{ cd /x && {LAUNCH}; }}\n",
        f"coproc {LAUNCH}\n",
        f"coproc TRAIN {{ {LAUNCH}; }}\n",
    ],
)
def test_a_launch_in_a_one_line_function_or_behind_coproc_is_read(script: str) -> None:
    (src,) = find_commands(Document(path=Path("run.sh"), text=script))
    assert src.data["flash_attn"] == "Fa"


def test_a_locale_string_is_its_text() -> None:
    (src,) = find_commands(Document(path=Path("run.sh"), text=LAUNCH.replace("Fa", '$"fa2"') + "\n"))
    assert src.data["flash_attn"] == "fa2" and src.root.get("flash_attn").node.raw == "fa2"


GBK_SCRIPT = b"#!/bin/bash\n# \xd1\xb5\xc1\xb7\xbd\xc5\xb1\xbe\n# caf\xe9\n" + LAUNCH.encode() + b"\n"


@pytest.mark.parametrize("how", [["sub/train.sh"], ["."], ["--recognised-only", "--force-exclude", "sub/train.sh"]])
def test_a_script_with_gbk_or_latin1_comments_is_linted(tmp_path: Path, how: list[str]) -> None:
    """Named, found in a folder walk, or handed by pre-commit (`--recognised-only`): bash runs it, so it is read."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.sh").write_bytes(GBK_SCRIPT)
    run = subprocess.run(
        [sys.executable, "-m", "cfgopt", "lint", "--select", "LF003", "--format", "concise", *how],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert run.returncode == 1 and "not UTF-8" not in run.stdout + run.stderr, run.stdout + run.stderr
    assert "train.sh:4:" in run.stdout and "LF003" in run.stdout


def test_a_fix_keeps_the_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_bytes(GBK_SCRIPT)
    run = subprocess.run(
        [sys.executable, "-m", "cfgopt", "fix", "--write", "--unsafe-fixes", "--select", "LF003", "train.sh"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert run.returncode == 0, run.stderr
    assert script.read_bytes() == GBK_SCRIPT.replace(b"--flash_attn Fa", b"--flash_attn sdpa")


# ---------------------------------------------------------------- item 5: jobs of a sweep share their estimates


def test_jobs_share_an_estimate_only_where_every_key_it_read_agrees(tmp_path: Path) -> None:
    """`Job.estimate` shares `memory.estimate`'s result between jobs that agree on the keys it read: a sweep's
    lines differ in `output_dir`; a line with another `cutoff_len` gets its own."""
    base = f"llamafactory-cli train {ARGS.replace('--model_name_or_path m', '--model_name_or_path Qwen/Qwen2.5-7B')}"
    script = "".join(
        f"{base} --template qwen --bf16 --learning_rate 1e-{i} --cutoff_len {c}\n"
        for i, c in ((4, 1024), (5, 1024), (4, 4096))
    )
    proj = project(tmp_path, script, target_name="h200")
    a, b, c = (proj.context(s).job.estimate(1) for s in lines_of(proj))
    assert a is not None and a is b and c is not a and c.required_gib > a.required_gib


# ---------------------------------------------------------------- arguments cut off from the launch (issue 42)


@pytest.mark.parametrize(
    ("script", "why"),
    [
        (f"llamafactory-cli train {ARGS} \\\n  # --lora_rank 8 \\\n  --bf16 true\n", "comment"),
        (f"llamafactory-cli train {ARGS} \\\n\n  --bf16 true\n", "blank"),
        (f"llamafactory-cli train {ARGS}\n  --bf16 true\n", "no-continuation"),
        (f"llamafactory-cli train {ARGS}  # a note\n--bf16 true\n", "no-continuation"),
    ],
)
def test_arguments_below_a_cut_are_reported(tmp_path: Path, script: str, why: str) -> None:
    (line,) = lines_of(project(tmp_path, script))
    assert line.command["cut_off"][3] == why and "bf16" not in line.data
    assert [d["code"] for d in lint(tmp_path, "--select", "LF053")] == ["LF053"]


@pytest.mark.parametrize(
    "script",
    [
        f"llamafactory-cli train {ARGS}\n# --bf16 true\necho done\n",  # the comment after the command
        f"llamafactory-cli train {ARGS}; --bf16\n",  # `;`: written as two commands
        f"llamafactory-cli train {ARGS}\n\n\n\n\n--bf16\n",  # far below: not one command cut in two
    ],
)
def test_a_command_that_ends_where_it_is_written_is_no_cut(tmp_path: Path, script: str) -> None:
    (line,) = lines_of(project(tmp_path, script))
    assert line.command["cut_off"] is None


# ---------------------------------------------------------------- options accumulated before the launch (issue 42)


@pytest.mark.parametrize(
    "script",
    [
        f'OPTS="{ARGS}"\nOPTS+=" --template qwen"\nOPTS="$OPTS --bf16 true"\nllamafactory-cli train $OPTS\n',
        f'ARGS=({ARGS})\nARGS+=(--template qwen\n  --bf16 true)\nllamafactory-cli train "${{ARGS[@]}}"\n',
        f'BASE="{ARGS}"\nEXTRA=(--template "qwen")\nllamafactory-cli train ${{BASE}} "${{EXTRA[@]}}" --bf16 true\n',
    ],
)
def test_options_accumulated_in_variables_and_arrays_are_the_jobs(tmp_path: Path, script: str) -> None:
    (line,) = lines_of(project(tmp_path, script))
    assert line.data["template"] == "qwen" and line.data["bf16"] is True and line.data["stage"] == "sft"
    assert not line.command["open"]


@pytest.mark.parametrize(
    "script",
    [
        # a value added in a branch, a loop, a `case` or after `&&` may or may not be there: unknown
        f'OPTS="{ARGS}"\nif [ -n "$X" ]; then\n  OPTS+=" --fp16 true"\nfi\nllamafactory-cli train $OPTS\n',
        f'OPTS="{ARGS}"\n[ -n "$X" ] && OPTS+=" --fp16 true"\nllamafactory-cli train $OPTS\n',
        f'OPTS="{ARGS}"\ncase $1 in\n  v100) OPTS+=" --fp16 true";;\nesac\nllamafactory-cli train $OPTS\n',
        f'ARGS=({ARGS})\nfor x in a b; do ARGS+=(--fp16 true); done\nllamafactory-cli train "${{ARGS[@]}}"\n',
        f'ARGS=({ARGS})\nARGS[3]=--fp16\nllamafactory-cli train "${{ARGS[@]}}"\n',
        f'OPTS="{ARGS} --fp16 *"\nllamafactory-cli train $OPTS\n',  # bash would glob `*`
        'OPTS="$1"\nllamafactory-cli train $OPTS --fp16 true\n',
    ],
)
def test_accumulated_options_that_may_differ_at_run_time_stay_open(tmp_path: Path, script: str) -> None:
    (line,) = lines_of(project(tmp_path, script))
    assert line.command["open"] and "bf16" not in line.data


def test_no_fix_edits_the_variable_that_holds_the_options(tmp_path: Path) -> None:
    """The findings on `$OPTS`'s words stand at `$OPTS`; a fix there would rewrite or delete the variable."""
    script = (
        f'OPTS="{ARGS} --template qwen --flash_attn Fa --fp16 --bf16 true --fake_key 1"\nllamafactory-cli train $OPTS\n'
    )
    (tmp_path / "run.sh").write_text(script)
    codes = {d["code"] for d in lint(tmp_path)}
    assert {"LF003", "LF004"} <= codes
    subprocess.run(
        [sys.executable, "-m", "cfgopt", "fix", "--write", "--unsafe-fixes", "--select", "LF", "run.sh"],
        cwd=tmp_path,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert (tmp_path / "run.sh").read_text() == script


def test_the_summary_names_the_launch_that_states_the_gpu_count(tmp_path: Path) -> None:
    """Issue 42: `NPROC_PER_NODE=8 llamafactory-cli train cfg.yaml` judges cfg.yaml for 8 GPUs, and says so."""
    (tmp_path / "x.yaml").write_text(YAML)
    (tmp_path / "run.sh").write_text("#!/bin/bash\nNPROC_PER_NODE=8 llamafactory-cli train x.yaml\n")
    run = subprocess.run(
        [sys.executable, "-m", "cfgopt", "lint", "--format", "json", "--target", "h100", "run.sh"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    files = {f["file"]: f for f in json.loads(run.stdout)["files"]}
    for name in ("run.sh", "x.yaml"):
        assert files[name]["gpus"] == 8
        assert files[name]["hardware_source"] == "--target, run.sh: `NPROC_PER_NODE=8` (line 2)"
    run = subprocess.run(
        [sys.executable, "-m", "cfgopt", "lint", "--target", "h100", "run.sh"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    text = run.stdout + run.stderr
    assert "judged for 8 x h100 (--target, run.sh: `NPROC_PER_NODE=8` (line 2))" in text
    assert "GPU count not stated" not in text


@pytest.mark.parametrize(
    ("line", "launcher", "gpus"),
    [
        ("mpirun -np 16 -H a:8,b:8 -x NCCL_DEBUG=INFO python src/train.py", "mpirun python src/train.py", 16),
        (
            "mpirun --allow-run-as-root --bind-to none -mca pml ob1 python3 -u src/train.py",
            "mpirun python src/train.py",
            None,
        ),
        ("srun --nodes=2 --ntasks-per-node=8 --gres=gpu:8 python src/train.py", "srun python src/train.py", 16),
        ("srun --ntasks 4 python src/train.py", "srun python src/train.py", 4),
        ("srun torchrun --nnodes 2 --nproc_per_node 8 src/train.py", "srun torchrun src/train.py", 16),
        ("srun -N 2 --gpus-per-node 8 torchrun --nproc_per_node 8 src/train.py", "srun torchrun src/train.py", 16),
        ("deepspeed --hostfile=hosts --num_gpus 8 src/train.py", "deepspeed src/train.py", 8),
    ],
)
def test_mpi_and_slurm_launches_are_read_as_the_job_they_start(line: str, launcher: str, gpus: int | None) -> None:
    """Issue 42: `mpirun ... python src/train.py --key v` was not followed, so its arguments went unjudged."""
    (src,) = find_commands(Document(path=Path("run.sh"), text=f"{line} {ARGS} --template qwen --flash_attn Fa\n"))
    assert src.command["launcher"] == launcher and src.data["flash_attn"] == "Fa"
    assert (src.command["launcher_gpus"] or (None,))[0] == gpus


# ---------------------------------------------------------------- HF-Trainer scripts of other projects (issue 42)

DS_FP16 = '{"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": true}, "zero_optimization": {"stage": 2}}'
HF_LINE = (
    "torchrun --nproc_per_node 8 train.py --model_name_or_path Qwen/Qwen2.5-7B --data_path data.json "
    "--deepspeed ds.json --bf16 True --output_dir out --per_device_train_batch_size 4 --lora_enable True\n"
)


def test_an_hf_trainer_launch_is_judged_by_its_training_arguments(tmp_path: Path) -> None:
    """`torchrun train.py --deepspeed ds.json --bf16 ...` of another project: its DeepSpeed JSON, precision and GPU
    count are judged with TrainingArguments' names; its own arguments (`--data_path`, `--lora_enable`) are not."""
    (tmp_path / "ds.json").write_text(DS_FP16)
    (line,) = lines_of(project(tmp_path, HF_LINE))
    assert line.command["trainer"] == "hf" and line.data["bf16"] is True
    assert line.command["launcher_gpus"][0] == 8
    found = lint(tmp_path, "--target", "v100")
    codes = sorted(d["code"] for d in found)
    assert codes == ["LF008", "XF001"], codes  # bf16 on a V100; the JSON's fp16 against --bf16
    xf001 = next(d for d in found if d["code"] == "XF001")
    assert xf001["file"].endswith("ds.json") and xf001["severity"] == "error"


@pytest.mark.parametrize(
    "line",
    [
        "python train.py --data_path d.json --output_dir out --epochs 3\n",  # no TrainingArguments signature
        "deepspeed train.py --deepspeed --deepspeed_config ds.json --output_dir out\n",  # DeepSpeed's own flag
    ],
)
def test_other_python_scripts_are_not_judged(tmp_path: Path, line: str) -> None:
    assert lines_of(project(tmp_path, line)) == []


@pytest.mark.parametrize(
    ("options", "gpus"),
    [
        ("--hostfile hostfile", 16),  # every slot of every host (DeepSpeed's runner)
        ("--hostfile=hostfile --num_gpus 4", 8),
        ("--hostfile hostfile --num_nodes 1", 8),
        ("--hostfile missing --num_gpus 8", 8),  # not beside the script: the options alone
        ("--hostfile bad --num_gpus 8", 8),  # an entry DeepSpeed refuses: not read
    ],
)
def test_a_deepspeed_hostfile_beside_the_script_counts_its_hosts(tmp_path: Path, options: str, gpus: int) -> None:
    (tmp_path / "hostfile").write_text("worker-1 slots=8\n# the second node\nworker-2 slots=8\n")
    (tmp_path / "bad").write_text("worker-1 slots=8\nworker-1 slots=8\n")
    script = f"deepspeed {options} src/train.py {ARGS} --template qwen\n"
    (src,) = find_commands(Document(path=tmp_path / "run.sh", text=script))
    assert src.command["launcher_gpus"][0] == gpus


# ---------------------------------------------------------------- does the launch start torchrun (XF003)


@pytest.mark.parametrize(
    ("script", "started"),
    [
        ("FORCE_TORCHRUN=1 llamafactory-cli train x.yaml\n", True),
        ("export FORCE_TORCHRUN=true\nllamafactory-cli train x.yaml\n", True),
        ("FORCE_TORCHRUN=Y llamafactory-cli train x.yaml\n", True),  # 0.9.5's is_env_enabled: any case
        ("FORCE_TORCHRUN=0 llamafactory-cli train x.yaml\n", False),
        ("FORCE_TORCHRUN=yes llamafactory-cli train x.yaml\n", False),  # not one of "true", "y", "1"
        ("FORCE_TORCHRUN=1\nllamafactory-cli train x.yaml\n", False),  # not exported: the CLI never sees it
        ("FORCE_TORCHRUN=$1 llamafactory-cli train x.yaml\n", None),  # known only at run time
        ("llamafactory-cli train x.yaml\n", False),
        ("torchrun --nproc_per_node 1 src/train.py x.yaml\n", True),
        ("FORCE_TORCHRUN=1 python src/train.py x.yaml\n", False),  # only the CLI reads it
    ],
)
def test_which_launch_starts_torchrun(tmp_path: Path, script: str, started: bool | None) -> None:
    """llamafactory 0.9.5 launcher.py:57-62: torchrun with FORCE_TORCHRUN on or more than one visible GPU."""
    (tmp_path / "x.yaml").write_text(YAML)
    [line] = lines_of(project(tmp_path, script))
    assert starts_torchrun(line) is started


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("FORCE_TORCHRUN=1 llamafactory-cli train x.yaml\n", None),
        ("FORCE_TORCHRUN=${FT} llamafactory-cli train x.yaml\n", None),
        (
            "FORCE_TORCHRUN=1 llamafactory-cli train x.yaml\nllamafactory-cli train x.yaml output_dir=b\n",
            "`deepspeed` on 1 GPU: run.sh line 2 launches it without FORCE_TORCHRUN=1 (or torchrun), so LLaMA-Factory "
            "stops with `Please use FORCE_TORCHRUN=1 to launch DeepSpeed training`",
        ),
        (
            "FORCE_TORCHRUN=1 python src/train.py x.yaml\n",
            "`deepspeed` on 1 GPU: run.sh line 1 runs it in one process (`python src/train.py` reads no "
            "FORCE_TORCHRUN; launch with torchrun), so LLaMA-Factory stops with `Please use FORCE_TORCHRUN=1 to "
            "launch DeepSpeed training`",
        ),
    ],
)
def test_xf003_at_a_yaml_follows_the_lines_that_launch_it(tmp_path: Path, script: str, message: str | None) -> None:
    """A new user's hour, finding 12: with `--gpus 1`, XF003 reminded of FORCE_TORCHRUN=1 at a YAML that the
    script linted beside it launches with FORCE_TORCHRUN=1. The launch the run sees decides."""
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}\n')
    (tmp_path / "x.yaml").write_text(YAML + "deepspeed: ds.json\n")
    (tmp_path / "run.sh").write_text(script)
    found = lint(tmp_path, "x.yaml", "--gpus", "1", "--select", "XF003")
    assert [(d["file"], d["message"]) for d in found] == ([("x.yaml", message)] if message else [])
    alone = subprocess.run(  # the YAML linted without its script: its launch is not seen, the reminder stays
        [sys.executable, "-m", "cfgopt", "lint", "--format", "json", "x.yaml", "--gpus", "1", "--select", "XF003"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert [d["message"] for d in json.loads(alone.stdout)["diagnostics"]] == [
        "`deepspeed` on 1 GPU: launch with FORCE_TORCHRUN=1 (or torchrun), else LLaMA-Factory stops with `Please use "
        "FORCE_TORCHRUN=1 to launch DeepSpeed training`"
    ]
