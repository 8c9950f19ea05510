"""Issue 18, "never hang, never damage": each reproducer of the issue, run through the real command line in a
subprocess that must end (a pre-commit hook that hangs blocks a whole repository: HANG_BOUND_S is a bound on a hang,
not a speed contract, wide enough for a loaded CI machine; what a run costs is in bench/), and the
properties behind them: positions as the parser counts lines, the fixer's damage check, the write scope and
the per-file time limit."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from rule_cases import HANG_BOUND_S, ROOT, cfgopt_process

from cfgopt.job.settings import Settings
from cfgopt.lint.fixer import fix_paths
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.text.document import Document

SEED_YAML = ROOT / "fixtures" / "seed" / "llama3_lora_sft.yaml"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return cfgopt_process(*args, cwd=cwd)


def lint_and_fix_end(path: Path, *extra: str) -> None:
    for command in (["lint"], ["fix"], ["fix", "--unsafe-fixes"]):
        cli(*command, *extra, path.name, cwd=path.parent)


def omegaconf_load(path: Path):
    omegaconf = pytest.importorskip("omegaconf")
    return omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.load(path))


# ---------------------------------------------------------------- 1. the shell tokenizer never stalls


@pytest.mark.parametrize(
    "text", [b"llamafactory-cli train \\", b"llamafactory-cli train \\\r", b"lmf train --a \\\r\\"]
)
def test_backslash_at_end_or_before_lone_cr_ends(tmp_path: Path, text: bytes) -> None:
    script = tmp_path / "t.sh"
    script.write_bytes(text)
    lint_and_fix_end(script)


# ---------------------------------------------------------------- 2./3. line breaks PyYAML knows

REPRO_2 = "# header\u2028# more\ncompute_type: bf16\nlogging_steps: 10\nweight_decay: 1e-2\nmax_grad_norm: 1e9\n"
REPRO_3 = (
    'learning_rate: "1.0e-4"\r\r\nsave_steps: 500.0\r\r\ndisable_torch_compile: true\r\r\nrun_name: 12345\r\r\n'
    "max_grad_norm: 1e9\r\r\n"
)


@pytest.mark.parametrize("text", [REPRO_2, REPRO_3])
def test_unusual_line_breaks_are_refused_for_fixing_and_end(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_bytes(text.encode())
    lint_and_fix_end(path)
    run = cli("fix", "--write", "--unsafe-fixes", "cfg.yaml", cwd=tmp_path)
    assert "line break other than" in run.stderr
    assert path.read_bytes() == text.encode()


@pytest.mark.parametrize("brk", ["\n", "\r\n", "\r", "\x85", "\u2028", "\u2029"])
def test_positions_follow_the_parser_for_every_line_break(tmp_path: Path, brk: str) -> None:
    """Plant each break character PyYAML knows before a finding: the reported line is the parser's line and
    the span covers the key; a fix is either refused (unusual breaks) or leaves every other value as it was."""
    body = ["model_name_or_path: m", "compute_type: bf16", "logging_steps: 10", "weight_decay: 1e-2\n"]
    text = f"# header{brk}# more\n" + brk.join(body)
    doc = Document(path=tmp_path / "cfg.yaml", text=text)
    src = load_yaml(doc)
    entry = src.find(("compute_type",))
    assert entry is not None and text[entry.key_start : entry.key_end] == "compute_type"
    mark_line = yaml.compose(text).value[1][0].start_mark.line
    assert doc.position(entry.key_start) == (mark_line + 1, 1)
    path = tmp_path / "cfg.yaml"
    path.write_bytes(text.encode())
    result = fix_paths([path], Settings(unsafe_fixes=True))
    fixed = result.fixed.get(path.resolve())
    if brk in ("\n", "\r\n"):
        after = yaml.safe_load(fixed)
        assert after["logging_steps"] == 10 and after["weight_decay"] == "1e-2" and after["bf16"] is True
        assert "compute_type" not in after
    else:
        assert fixed is None and "line break" in result.not_fixed[path.resolve()]


# ---------------------------------------------------------------- 4. never a duplicate key


def test_rename_and_insert_never_write_a_duplicate_key(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    shutil.copy(SEED_YAML, path)
    run = cli("fix", "--write", "--unsafe-fixes", "--ignore", "CFG002", "cfg.yaml", cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    loaded = omegaconf_load(path)
    assert loaded["bf16"] is True


def test_explicit_key_syntax_never_writes_a_duplicate_key(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    text = SEED_YAML.read_text().replace("compute_type: bf16", "? compute_type\n: bf16\nbf16: false")
    path.write_text(text)
    for extra in ([], ["--unsafe-fixes"]):
        cli("fix", "--write", *extra, "cfg.yaml", cwd=tmp_path)
        omegaconf_load(path)


# ---------------------------------------------------------------- 5. anchors and tags survive


def test_quoting_keeps_anchor_and_refuses_tags_and_shared_anchors(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("model_name_or_path: m\nstage: sft\nrun_name: &r 123\nhub_model_id: !!int 5\n")
    cli("fix", "--write", "--unsafe-fixes", "cfg.yaml", cwd=tmp_path)
    assert path.read_text() == 'model_name_or_path: m\nstage: sft\nrun_name: &r "123"\nhub_model_id: !!int 5\n'
    shared = "model_name_or_path: m\nstage: sft\nrun_name: &r 123\noutput_dir: *r\n"
    path.write_text(shared)
    run = cli("fix", "--write", "--unsafe-fixes", "cfg.yaml", cwd=tmp_path)
    assert path.read_text() == shared
    # withheld, reported where the finding is: the alias (line 4), and the anchor's fix for what it shares
    assert "cfg.yaml:4:13: LF002 fix withheld" in run.stderr and "alias" in run.stderr
    assert "cfg.yaml:3:14: LF002 fix withheld" in run.stderr and "output_dir" in run.stderr


# ---------------------------------------------------------------- 6. command substitution


def test_command_substitution_survives_unsafe_fixes(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    text = (
        "llamafactory-cli train --model_name_or_path m --stage sft --do_train --finetuning_type lora "
        "--template llama3 --dataset x --output_dir out_$(date +%s) --bf16 True\n"
    )
    script.write_text(text)
    lint_and_fix_end(script)
    cli("fix", "--write", "--unsafe-fixes", "run.sh", cwd=tmp_path)
    after = script.read_text()
    assert "--output_dir out_$(date +%s) " in after or after.rstrip().endswith("--output_dir out_$(date +%s)")
    assert after.startswith(text.rstrip("\n").split(" --output_dir")[0])
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(script)], timeout=HANG_BOUND_S).returncode == 0


# ---------------------------------------------------------------- 7. suppression removal


def test_unused_suppression_removal_keeps_the_note_heredocs_and_strings(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        "model_name_or_path: m\nstage: sft\nlogging_steps: 10  # cfgopt: ignore[LF003] keep 10 for the dashboard\n"
    )
    cli("fix", "--write", "cfg.yaml", cwd=tmp_path)
    assert cfg.read_text().endswith("logging_steps: 10  # keep 10 for the dashboard\n")
    script = tmp_path / "run.sh"
    body = (
        "cat > gen.yaml <<EOF\nmodel_name_or_path: m\nlogging_steps: 10  # cfgopt: ignore[LF003]\nEOF\n"
        'python -c "\n# cfgopt: ignore[LF003]\nprint(1)"\n'
    )
    script.write_text(body + "llamafactory-cli train --model_name_or_path m --stage sft  # cfgopt: ignore[LF001]\n")
    lint_and_fix_end(script)
    cli("fix", "--write", "run.sh", cwd=tmp_path)
    assert script.read_text() == body + "llamafactory-cli train --model_name_or_path m --stage sft\n"


# ---------------------------------------------------------------- 8. writes only inside what was given

DS_FIXABLE = {"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": "true"}}


def _tree(tmp_path: Path) -> tuple[Path, list[Path]]:
    given, outside = tmp_path / "t", tmp_path / "outside"
    given.mkdir()
    outside.mkdir()
    (outside / "ds.json").write_text(json.dumps(DS_FIXABLE))
    (tmp_path / "parent_ds.json").write_text(json.dumps(DS_FIXABLE))
    for name in ("real.yaml", "other.yaml"):
        shutil.copy(SEED_YAML, outside / name)
    cfg = SEED_YAML.read_text()
    (given / "cfg.yaml").write_text(cfg.replace("deepspeed: ds_z3_config.json", "deepspeed: ../outside/ds.json"))
    (given / "up.yaml").write_text(cfg.replace("deepspeed: ds_z3_config.json", "deepspeed: parent_ds.json"))
    (given / "link.yaml").symlink_to(outside / "real.yaml")
    (given / "run.sh").write_text("llamafactory-cli train ../outside/other.yaml\n")
    watched = [outside / "ds.json", outside / "real.yaml", outside / "other.yaml", tmp_path / "parent_ds.json"]
    return given, watched


def test_fix_writes_only_files_given_or_found_under_given_folders(tmp_path: Path) -> None:
    given, watched = _tree(tmp_path)
    before = {p: p.read_bytes() for p in watched}
    run = cli("fix", "--write", "t", cwd=tmp_path)
    assert {p: p.read_bytes() for p in watched} == before
    assert "not fixed" in run.stderr and "--fix-references" in run.stderr and "symlink" in run.stderr
    assert (given / "cfg.yaml").read_text() != SEED_YAML.read_text()  # the given files are fixed


def test_referenced_file_is_fixed_when_named_or_with_fix_references(tmp_path: Path) -> None:
    _, watched = _tree(tmp_path)
    ds = watched[0]
    before = ds.read_bytes()
    cli("fix", "--write", "--unsafe-fixes", "--fix-references", "t/cfg.yaml", cwd=tmp_path)
    assert ds.read_bytes() != before
    ds.write_bytes(before)
    cli("fix", "--write", "--unsafe-fixes", "t/cfg.yaml", "outside/ds.json", cwd=tmp_path)
    assert ds.read_bytes() != before


def test_deepspeed_path_resolves_from_the_launch_directory_and_is_not_written(tmp_path: Path) -> None:
    """LLaMA-Factory opens `deepspeed:` relative to where it is launched: from another folder, `./ds.json` there
    is the file that run would use; cfgopt links to it but does not write it (it is not under `t/`)."""
    given = tmp_path / "t"
    given.mkdir()
    (given / "cfg.yaml").write_text(SEED_YAML.read_text().replace("ds_z3_config.json", "ds.json"))
    (given / "ds.json").write_text(json.dumps(DS_FIXABLE))
    (tmp_path / "ds.json").write_text(json.dumps(DS_FIXABLE))
    before = (tmp_path / "ds.json").read_bytes()
    cli("fix", "--write", "--unsafe-fixes", "t", cwd=tmp_path)
    assert (tmp_path / "ds.json").read_bytes() == before


# ---------------------------------------------------------------- minor items


def test_no_final_newline_is_added(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ncompute_type: bf16")
    cli("fix", "--write", "--unsafe-fixes", "cfg.yaml", cwd=tmp_path)
    text = path.read_text()
    assert "bf16: true" in text and not text.endswith("\n")


def test_deep_nesting_gives_a_clean_message(tmp_path: Path) -> None:
    deep: dict = {"x": 1}
    for _ in range(900):
        deep = {"a": deep}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 2, "deep": deep}, "train_batch_size": 8}))
    for command in ("lint", "fix"):
        run = cli(command, "ds.json", cwd=tmp_path)
        assert run.returncode == 2 and "internal error" not in run.stderr
        assert "nested too deeply" in run.stderr


# ---------------------------------------------------------------- the per-file time limit


def test_time_limit_turns_a_runaway_rule_into_a_one_line_error(tmp_path: Path, monkeypatch) -> None:
    from cfgopt.lint import engine
    from cfgopt.rules.lf001_unknown_key import UnknownKey

    slow = tmp_path / "slow.yaml"
    slow.write_text("model_name_or_path: m\nstage: sft\nslow_down: 1\n")
    good = tmp_path / "good.yaml"
    shutil.copy(SEED_YAML, good)
    original = UnknownKey.check

    def runaway(self, ctx):
        if ctx.source.document.path.name == "slow.yaml":
            time.sleep(60)
        return original(self, ctx)

    monkeypatch.setattr(UnknownKey, "check", runaway)
    monkeypatch.setenv("CFGOPT_FILE_TIMEOUT", "0.5")
    result = engine.lint_paths([slow, good], Settings())  # the 60 s sleep is cut by the 0.5 s watchdog
    assert result.exit_code() == 2
    [problem] = result.problems
    assert problem.path.name == "slow.yaml" and "took longer than 0.5 s" in problem.message
    assert "\n" not in problem.message
    assert any(d.path.name == "good.yaml" and d.code == "LF001" for d in result.diagnostics)
    assert not any(d.path.name == "slow.yaml" for d in result.diagnostics)
    fixed = fix_paths([slow, good], Settings())
    assert good.resolve() in fixed.fixed and slow.resolve() not in fixed.fixed


def test_time_limit_is_a_no_op_outside_the_main_thread() -> None:
    import threading

    from cfgopt.text.timelimit import time_limit

    done: list[bool] = []

    def work() -> None:
        with time_limit(0.01):
            time.sleep(0.05)
        done.append(True)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(HANG_BOUND_S)
    assert done == [True]


def test_doubling_assignments_end(tmp_path: Path) -> None:
    """Issue 43: `A=$A$A` doubles a value per line; 40 lines in a 370-byte script would build a terabyte. A value
    past `shell.MAX_EXPANDED` is known only at run time."""
    from cfgopt.loaders import launch

    text = "A=x\n" + "A=$A$A\n" * 40 + "llamafactory-cli train --template $A\n"
    script = tmp_path / "t.sh"
    script.write_text(text)
    lint_and_fix_end(script)
    (source,) = launch.find_commands(Document.from_bytes(script, text.encode()))
    assert source.command["unknown"]  # the template's value is not followed past the bound
