"""Never damage, hang or crash, round 3 (cfgopt issue 34): one test per defect, grouped as the issue groups
them. The shell-script defects and the plan's batch shape are tested elsewhere (tests/loaders/test_launch_shapes.py,
tests/plan/test_planner.py); the class-wide guards are tests/repository/test_closed_classes.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rule_cases import TRAIN, cfgopt_process, run_cli
from work_counter import assert_linear, backtracking_hazards

from cfgopt.environment import pins
from cfgopt.text.requirements import files, manifests, requirement

SAFE_FIX = "lr_scheduler_type: Cosine\n"  # LF003: a safe fix, to `cosine`


def cli(*args: str, cwd: Path, env: dict | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """`cfgopt ARGS` in a subprocess, bytes out (`cfgopt_process`: no traceback, no hang)."""
    return cfgopt_process(*args, cwd=cwd, env=env, stdin=stdin, text=False)


def codes(out: str) -> list[str]:
    return [d["code"] for d in json.loads(out)["diagnostics"]]


# =========================================================================== damage


def test_schema_export_never_writes_through_a_symlink_at_its_output_name(tmp_path: Path) -> None:
    bashrc = tmp_path / "bashrc"
    bashrc.write_text("export SECRET=1\n")
    (tmp_path / "llamafactory-train.schema.json").symlink_to(bashrc)
    code, _out, err = run_cli(["schema", "export", "--out", str(tmp_path)])
    assert code == 2 and "symbolic link" in err and "not overwritten" in err
    assert bashrc.read_text() == "export SECRET=1\n"
    (tmp_path / "llamafactory-train.schema.json").unlink()
    assert run_cli(["schema", "export", "--out", str(tmp_path)])[0] == 0
    written = tmp_path / "llamafactory-train.schema.json"
    assert not written.is_symlink() and json.loads(written.read_text())["$schema"]


def test_schema_export_out_naming_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("mine\n")
    run = cli("schema", "export", "--out", "f", cwd=tmp_path)
    assert run.returncode == 2 and b"not a folder" in run.stderr
    assert (tmp_path / "f").read_text() == "mine\n"


@pytest.mark.parametrize(
    ("written", "renamed"),
    [('"comment": "text"', None), ('"bf_16": true', None), ('"bf_16": {"enabled": true}', "bf16")],
)
def test_ds002_renames_only_to_a_value_deepspeed_accepts_there(tmp_path: Path, written: str, renamed) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text(f'{{"train_batch_size": 8, {written}}}\n')
    _code, out, _err = run_cli(["lint", "--format", "json", str(ds)])
    (found,) = [d for d in json.loads(out)["diagnostics"] if d["code"] == "DS002"]
    if renamed is None:
        assert found["fix"] is None and "not renamed" in found["message"]
    else:
        assert found["fix"]["description"] == f"Rename to `{renamed}`"


# The cases DS002's rename is held against the real DeepSpeed with: a typo of each kind of top-level key, with
# values of each type. A rename offered must give a config DeepSpeed 0.19.8 accepts.
RENAME_CASES = [
    (key, value)
    for key in (
        "comment",
        "bf_16",
        "fp_16",
        "zero_optimisation",
        "flops_profile",
        "wall_clock_breakdwn",
        "gradient_clippin",
    )
    for value in (True, "text", 1, 0.5, [], {}, {"enabled": True}, {"stage": 2}, {"stage": 9}, {"enabled": "x"}, None)
]


@pytest.mark.oracle
def test_ds002_rename_is_accepted_by_the_real_deepspeed() -> None:
    pytest.importorskip("deepspeed")
    from cfgopt.knowledge import schema
    from cfgopt.rules.ds002_unknown_top_level_key import accepted_as
    from cfgopt.text.suggest import closest

    ds = schema.deepspeed("0.19.8")
    offered = []
    for key, value in RENAME_CASES:
        guess = closest(key, ds.top_level_keys)
        assert guess is not None, key
        if accepted_as(ds, guess, value):
            offered.append({"train_batch_size": 1, guess: value})
    script = (
        "import json, sys\nfrom deepspeed.runtime.config import DeepSpeedConfig\nbad = []\n"
        "for case in json.loads(sys.stdin.read()):\n"
        "    try:\n        DeepSpeedConfig(case)\n    except Exception as exc:\n"
        "        bad.append([case, type(exc).__name__])\nprint(json.dumps(bad))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(offered), capture_output=True, text=True, timeout=300
    )
    assert len(offered) >= 8, offered  # the check is not vacuous: most kinds are offered for a plain value
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [], run.stderr[-2000:]


# =========================================================================== hangs


LONG = "torch" + " " * 3000 + "x"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("requirements.txt", LONG + "\n"),
        ("requirements.txt", "deepspeed [" + " " * 3000 + "\n"),
        ("setup.py", f'install_requires=["{LONG}", "deepspeed==0.16.4"]\n'),
        ("pyproject.toml", f'[project]\ndependencies = ["{LONG}", "deepspeed==0.16.4"]\n'),
        ("setup.py", 'x = "' + '\\"' * 3000 + "\n"),
    ],
)
def test_a_long_line_in_a_requirement_file_is_read_in_linear_time(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "train.yaml").write_text(TRAIN)
    # linear: the step count of the Python around the patterns (the patterns' own shape: the test below)
    assert_linear(lambda n: files.requirement_pins(name, text * n), 2)
    pins.pins_in(tmp_path)
    cli("lint", ".", cwd=tmp_path)


@pytest.mark.parametrize("text", [LONG, '"' + LONG, "torch @" + " " * 5000 + "x", "a" * 5000 + "[" + " " * 5000])
def test_the_requirement_patterns_are_linear(text: str) -> None:
    """No shape that backtracks (a nested quantifier, or `\\s*(?:x)?\\s*`: 42 s on a 3 KB line before), and
    the hostile lines are still matched."""
    for pattern in (requirement._REQUIREMENT, requirement._DIRECT):
        assert backtracking_hazards(pattern.compiled) == [], pattern.pattern
        pattern.match(text * 4)
    # the string scanners (one pass, each alternative consuming what it matches) find the quoted requirements
    for pattern in (manifests._TOKENS["toml"], manifests._TOKENS["python"], manifests._ARRAY_TOKENS):
        pattern.findall(text * 4)
    manifests.string_pins(text * 4)
    manifests.project_dependencies("[project]\ndependencies = [" + text * 4)


def _hostile(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_lf037_reads_the_models_config_json_bounded(tmp_path: Path, kind: str) -> None:
    (tmp_path / "model").mkdir()
    _hostile(tmp_path / "model" / "config.json", kind)
    (tmp_path / "train.yaml").write_text(
        TRAIN.replace("meta-llama/Meta-Llama-3-8B-Instruct", "model") + "lora_target: q_proj\n"
    )
    run = cli("lint", "train.yaml", cwd=tmp_path)
    assert run.returncode in (0, 1)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_doctor_reads_dataset_info_bounded(tmp_path: Path, kind: str) -> None:
    (tmp_path / "data").mkdir()
    _hostile(tmp_path / "data" / "dataset_info.json", kind)
    (tmp_path / "train.yaml").write_text(TRAIN.replace("alpaca_en_demo", "mine") + "dataset_dir: data\n")
    run = cli("doctor", "train.yaml", cwd=tmp_path)
    assert b"DOC006" in run.stdout and b"dataset_info.json unreadable" in run.stdout


def test_doctor_has_a_watchdog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.doctor import checks

    def endless(job, stack):
        while True:
            time.sleep(0.01)
        yield  # pragma: no cover

    (tmp_path / "train.yaml").write_text(TRAIN)
    monkeypatch.setattr(checks, "job_findings", endless)
    monkeypatch.setenv("CFGOPT_FILE_TIMEOUT", "0.5")
    code, _out, err = run_cli(["doctor", str(tmp_path / "train.yaml")])  # ends only if the watchdog fires
    assert code == 2 and "took longer than 0.5 s" in err


# =========================================================================== tracebacks


def test_unicode_digits_are_no_numbers_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(
        '{"zero_optimization": {"stage": "²"}, "train_micro_batch_size_per_gpu": "²", '
        '"gradient_accumulation_steps": "٣"}\n'
    )
    (tmp_path / "train.yaml").write_text(TRAIN + "deepspeed: ds.json\n")
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node ² src/train.py train.yaml\n")
    (tmp_path / "run2.sh").write_text("CUDA_VISIBLE_DEVICES=0,² llamafactory-cli train train.yaml\n")
    for args in (["lint", "."], ["fix", "--unsafe-fixes", "."], ["lint", "run.sh"]):
        run = cli(*args, cwd=tmp_path, env={"CUDA_VISIBLE_DEVICES": "0,²"})
        assert b"internal error" not in run.stderr, run.stderr
    run = cli("lint", "--format", "json", "ds.json", cwd=tmp_path)
    found = json.loads(run.stdout)["diagnostics"]
    assert {"DS005"} <= {d["code"] for d in found}  # DeepSpeed's int() refuses both: errors, without a fix
    assert not [d for d in found if d["fix"] and "Write the number" in d["fix"]["description"]]
    assert cli("lint", "--gpus", "²", "train.yaml", cwd=tmp_path).returncode == 2


def test_doctor_with_unicode_digits_in_visible_devices(tmp_path: Path) -> None:
    from fake_nodes import findings, mi300x_root, site

    root, folder = mi300x_root(tmp_path), site(tmp_path)
    _, found = findings(tmp_path, root, folder, {"HIP_VISIBLE_DEVICES": "0,²"})
    assert all(code != "DOC005" or "²" not in message for code, _, message in found)


def _deny(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make the folder `name` unreadable as a non-root user sees it (the tests may run as root, which reads all)."""
    real_scandir, real_stat = os.scandir, os.stat

    def denied(path) -> bool:
        text = os.fsdecode(path) if not isinstance(path, int) else ""
        return os.path.basename(text.rstrip("/")) == name or f"/{name}/" in text

    def scandir(path="."):
        if denied(path):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_scandir(path)

    def stat(path, *args, **kwargs):
        if not isinstance(path, int) and f"/{name}/" in os.fsdecode(path):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "stat", stat)


def test_an_unreadable_folder_named_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "train.yaml").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    _deny(monkeypatch, "locked")
    for command in ("lint", "fix"):
        code, _out, err = run_cli([command, "locked"])
        assert code == 2 and "locked: error: cannot list this folder (Permission denied)" in err


def test_an_unreadable_subfolder_is_an_error_after_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: bad input as an unreadable file is (exit 2), the other files still linted."""
    (tmp_path / "tree" / "inner").mkdir(parents=True)
    (tmp_path / "tree" / "train.yaml").write_text(TRAIN)
    (tmp_path / "tree" / "inner" / "train.yaml").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    _deny(monkeypatch, "inner")
    code, _out, err = run_cli(["lint", "--ignore", "PF", "tree"])
    assert code == 2 and "tree/inner: error: cannot list this folder (Permission denied); skipped" in err
    assert "Checked 1 file(s)" in err


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_fix_and_show_settings_with_a_stdout_that_is_not_utf8(tmp_path: Path, encoding: str) -> None:
    text = TRAIN + "run_name: 日本\n" + SAFE_FIX
    (tmp_path / "日本").mkdir()
    (tmp_path / "日本" / "train.yaml").write_text(text)
    env = {"PYTHONIOENCODING": encoding}
    run = cli("fix", "-", "--stdin-filename", "train.yaml", cwd=tmp_path, env=env, stdin=text.encode())
    fixed = run.stdout.decode("utf-8")  # the file's own bytes, never re-encoded or escaped
    assert "run_name: 日本\n" in fixed and "lr_scheduler_type: cosine\n" in fixed
    run = cli("fix", "日本/train.yaml", cwd=tmp_path, env=env)
    assert "+++ b/日本/train.yaml" in run.stdout.decode("utf-8") and b"+lr_scheduler_type: cosine" in run.stdout
    run = cli("lint", "--show-settings", "日本/train.yaml", cwd=tmp_path, env=env)
    assert run.returncode == 0 and b"\\u65e5" in run.stdout


@pytest.mark.parametrize("value", ["inf", "1e300", "nan", "-inf"])
def test_file_timeout_that_is_no_finite_number(tmp_path: Path, value: str) -> None:
    (tmp_path / "train.yaml").write_text(TRAIN)
    assert cli("lint", "train.yaml", cwd=tmp_path, env={"CFGOPT_FILE_TIMEOUT": value}).returncode in (0, 1)


# =========================================================================== wrong exit or output


@pytest.mark.parametrize("name", ["a\x1b[31mred.yaml", "b\n+++ forged.yaml"])
def test_fix_diff_headers_escape_the_file_name(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(TRAIN + SAFE_FIX)
    run = cli("fix", name, cwd=tmp_path)
    out = run.stdout.decode()
    assert "\x1b" not in out and not any(line.startswith("+++ forged") for line in out.splitlines())
    headers = [line for line in out.splitlines() if line.startswith(("--- ", "+++ "))]
    assert len(headers) == 2 and all(("\\x1b" in h) or ("\\x0a" in h) for h in headers)


def test_a_custom_targets_name_is_escaped(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(TRAIN)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cfgopt]\ntarget = { name = "evil\\u001b[31m\\nforged: line", memory-gib = 8, bf16 = true, '
        'vendor = "nvidia" }\n'
    )
    for args in (["lint", "train.yaml"], ["lint", "--show-settings", "train.yaml"], ["estimate", "train.yaml"]):
        run = cli(*args, cwd=tmp_path)
        assert b"\x1b" not in run.stdout + run.stderr and b"\nforged: line" not in run.stdout + run.stderr, args


def test_stdin_filename_naming_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "folder.yaml").mkdir()
    run = cli("fix", "-", "--stdin-filename", "folder.yaml", cwd=tmp_path, stdin=TRAIN.encode())
    assert run.returncode == 2 and b"names a folder" in run.stderr


def test_fix_stdin_force_exclude_echoes_the_input(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cfgopt]\nexclude = ["ex.yaml"]\n')
    text = TRAIN + "fp16: true\n"
    run = cli("fix", "-", "--force-exclude", "--stdin-filename", "ex.yaml", cwd=tmp_path, stdin=text.encode())
    assert run.returncode == 0 and run.stdout.decode() == text  # an editor's buffer is never wiped


def test_watch_reads_the_project_config_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.commands import watch as watch_module

    (tmp_path / "train.yaml").write_text(TRAIN + "fp16: true\n")  # LF004, an error
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.cfgopt]\n")
    real_watch = watch_module.watch
    codes_seen: list[int] = []

    def sleep(_seconds: float) -> None:
        config.write_text('[tool.cfgopt]\nignore = ["LF004"]\n')

    def two_rounds(paths, lint_once, **_kwargs):
        return real_watch(paths, lambda: codes_seen.append(lint_once()) or codes_seen[-1], rounds=2, sleep=sleep)

    monkeypatch.setattr(watch_module, "watch", two_rounds)
    monkeypatch.chdir(tmp_path)
    run_cli(["lint", "--watch", "train.yaml"])
    assert codes_seen == [1, 0]


@pytest.mark.parametrize("how", ["flag", "project config"])
def test_more_gpus_than_the_model_counts_is_refused_alike(tmp_path: Path, how: str) -> None:
    (tmp_path / "train.yaml").write_text(TRAIN)
    if how == "project config":
        (tmp_path / "pyproject.toml").write_text("[tool.cfgopt]\ngpus = 1048577\n")
    for command in ("lint", "fix", "estimate"):
        extra = ["--target", "h200"] if command == "estimate" else []
        extra += ["--gpus", "1048577"] if how == "flag" else []
        run = cli(command, *extra, "train.yaml", cwd=tmp_path)
        assert run.returncode == 2 and b"1048576" in run.stderr, (command, run.stderr)


def test_a_file_with_a_long_name_is_written(tmp_path: Path) -> None:
    name = "x" * 245 + ".yaml"  # 250 bytes: the temp name beside it must fit in 255
    (tmp_path / name).write_text(TRAIN + SAFE_FIX)
    run = cli("fix", "--write", name, cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    assert "lr_scheduler_type: cosine\n" in (tmp_path / name).read_text()


def test_fix_write_and_diff_are_exclusive(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(TRAIN + SAFE_FIX)
    run = cli("fix", "--write", "--diff", "train.yaml", cwd=tmp_path)
    assert run.returncode == 2 and b"not allowed with" in run.stderr
    assert SAFE_FIX in (tmp_path / "train.yaml").read_text()


def test_abbreviated_options_are_refused(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(TRAIN)
    run = cli("lint", "--fix", "LF", "train.yaml", cwd=tmp_path)
    assert run.returncode == 2 and b"unrecognized arguments: --fix" in run.stderr
    assert cli("lint", "--stat", "train.yaml", cwd=tmp_path).returncode == 2


# =========================================================================== false errors


def test_a_commented_out_pin_does_not_decide_the_release(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.yaml").write_text(TRAIN)
    (tmp_path / "setup.py").write_text(
        'from setuptools import setup\n# "llamafactory==0.9.1",\nsetup(install_requires=[\n'
        '    "torch>=2.0",  # "deepspeed==0.14.5" was too old\n    "llamafactory==0.9.4",\n'
        '    "deepspeed==0.16.4",  # "llamafactory==0.9.2"\n])\n'
    )
    run = cli("lint", "--show-settings", "train.yaml", cwd=tmp_path)
    out = run.stdout.decode()
    assert "0.9.4" in out and "0.9.1" not in out and "0.16.4" in out and "0.14.5" not in out
    found, _ = files.requirement_pins("setup.py", (tmp_path / "setup.py").read_text())
    assert [p.name + p.spec for p in found] == ["torch>=2.0", "llamafactory==0.9.4", "deepspeed==0.16.4"]
    toml = '[project]\ndependencies = [\n  "llamafactory==0.9.4",  # "deepspeed==0.14.5"\n  "x # y",\n]\n'
    assert [p.name for p in files.requirement_pins("pyproject.toml", toml)[0]] == ["llamafactory"]


PATH_TAGS = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
dataset_dir: !!python/object/apply:pathlib.PosixPath [data]
template: llama3
output_dir: !!python/object/apply:pathlib.Path [saves, run1]
logging_dir: !!python/object/apply:pathlib.Path []
bf16: true
"""


def test_omegaconfs_pathlib_tags_are_read_as_it_reads_them(tmp_path: Path) -> None:
    from cfgopt.loaders.yaml_loader import load_yaml
    from cfgopt.text.document import Document

    (tmp_path / "train.yaml").write_text(PATH_TAGS)
    code, out, _err = run_cli(["lint", "--format", "json", str(tmp_path / "train.yaml")])
    assert "CFG001" not in codes(out) and code in (0, 1)
    src = load_yaml(Document.from_bytes(tmp_path / "t.yaml", PATH_TAGS.encode()))
    assert src.error is None and src.root.value["output_dir"] == Path("saves", "run1")
    omegaconf = pytest.importorskip("omegaconf")
    real = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.create(PATH_TAGS))
    assert real == src.root.value
    for refused in ("k: !!python/object/apply:pathlib.Path [1]\n", "? !!python/object/apply:pathlib.Path [x]\n: 1\n"):
        assert load_yaml(Document.from_bytes(tmp_path / "t.yaml", refused.encode())).error is not None


# =========================================================================== caches


def test_verify_and_tune_keep_the_datasets_cache_under_cfgopts_cache(tmp_path: Path, monkeypatch) -> None:
    from cfgopt.verify import cache, runner

    seen: dict = {}

    class Child:
        def __init__(self, cmd, **kwargs) -> None:
            seen.update(kwargs["env"])
            self.stdout, self.returncode = iter(()), 0

        def wait(self, timeout=None) -> int:
            return 0

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "users-own"))
    monkeypatch.setattr(runner.subprocess, "Popen", Child)
    runner._run(["true"], tmp_path / "log", 5, None, tmp_path / "cache")
    assert seen["HF_DATASETS_CACHE"] == str(tmp_path / "cache" / "hf-datasets")
    (tmp_path / "cache" / "hf-datasets" / "x").mkdir(parents=True)
    (tmp_path / "cache" / "hf-datasets" / "x" / "data.arrow").write_bytes(b"0" * 1000)
    assert cache.clear(tmp_path / "cache") == (1, 1000) and not (tmp_path / "cache").exists()
