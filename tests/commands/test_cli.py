"""The command line a user (and CI, and pre-commit) relies on: output formats, exit codes, selection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"
CLEAN = ROOT / "fixtures" / "clean"


def test_seed_gives_the_five_fatal_diagnostics_and_the_missing_batch_size() -> None:
    """The five crashes DEVELOPERS.md names, plus one more cfgopt finds: the seed's JSON gives neither
    `train_batch_size` nor `train_micro_batch_size_per_gpu`, which DeepSpeed refuses under the HF Trainer
    (DS007; confirmed by the oracle harness, tests/oracle/test_oracle_seed.py)."""
    code, out, _ = run_cli(["lint", "--format", "json", str(SEED)])
    errors = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "error"]
    found = sorted((Path(d["file"]).name, d["code"], d["key"]) for d in errors)
    assert found == [
        ("ds_z3_config.json", "DS001", "zero_optimization.stage3_parition_grads"),
        ("ds_z3_config.json", "DS007", ""),
        ("llama3_lora_sft.yaml", "LF001", "compute_type"),
        ("llama3_lora_sft.yaml", "LF001", "disable_torch_compile"),
        ("llama3_lora_sft.yaml", "LF003", "flash_attn"),
        ("train.sh", "LF003", "flash_attn"),
    ]
    assert code == 1


def test_json_format_fields() -> None:
    _, out, _ = run_cli(["lint", "--format", "json", str(SEED / "llama3_lora_sft.yaml")])
    data = json.loads(out)
    d = data["diagnostics"][0]
    assert set(d) == {
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "code",
        "name",
        "severity",
        "message",
        "key",
        "fix",
    }
    assert set(d["fix"]) == {"applicability", "description"}
    assert data["summary"]["errors"] >= 1


def test_fix_write_then_clean(tmp_path: Path) -> None:
    work = tmp_path / "seed"
    shutil.copytree(SEED, work)
    code, out, _ = run_cli(["fix", str(work)])
    assert code == 1 and "-compute_type: bf16" in out  # diff only, nothing written
    assert (work / "llama3_lora_sft.yaml").read_bytes() == (SEED / "llama3_lora_sft.yaml").read_bytes()
    code, _, _ = run_cli(["fix", "--write", "--unsafe-fixes", str(work)])
    assert code == 0
    code, out, _ = run_cli(["lint", "--format", "json", str(work)])
    # without a target the plan packs nothing (no memory estimate says packing fits): PF006 stays, an info saying so
    left = json.loads(out)["diagnostics"]
    assert code == 0 and {(d["code"], d["severity"]) for d in left} == {("PF006", "info")}
    assert all("not planned" in d["message"] and "--target NAME" in d["message"] for d in left)
    code, _, _ = run_cli(["fix", "--write", "--unsafe-fixes", "--target", "h100", str(work)])
    assert code == 0
    code, out, _ = run_cli(["lint", "--format", "json", "--target", "h100", str(work)])
    assert code == 0 and json.loads(out)["diagnostics"] == []


def test_safe_fixes_only_by_default(tmp_path: Path) -> None:
    work = tmp_path / "seed"
    shutil.copytree(SEED, work)
    run_cli(["fix", "--write", str(work)])
    text = (work / "llama3_lora_sft.yaml").read_text()
    assert "bf16: true" in text and "flash_attn: true" in text  # flash_attn's fix is unsafe


def test_fix_keeps_mode(tmp_path: Path) -> None:
    work = tmp_path / "seed"
    shutil.copytree(SEED, work)
    target = work / "ds_z3_config.json"
    target.chmod(0o640)
    run_cli(["fix", "--write", str(work)])
    assert target.stat().st_mode & 0o777 == 0o640
    assert "stage3_parition_grads" not in target.read_text()


def test_select_and_ignore() -> None:
    def codes(*args: str) -> set[str]:
        out = run_cli(["lint", "--format", "json", *args, str(SEED)])[1]
        return {d["code"] for d in json.loads(out)["diagnostics"]}

    everything = codes()
    assert {"DS001", "LF001", "LF003"} <= everything
    assert codes("--select", "DS") == {c for c in everything if c.startswith("DS")}
    assert codes("--ignore", "LF,PF,XF,MEM") == {c for c in everything if c.startswith(("DS", "CFG"))}
    # the longest matching prefix wins: select LF, but not LF003
    assert codes("--select", "LF", "--ignore", "LF003") == {c for c in everything if c.startswith("LF")} - {"LF003"}
    assert codes("--select", "LF003", "--ignore", "LF") == {"LF003"}


def test_fail_on_and_exit_zero(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 3}}')
    assert run_cli(["lint", str(ds)])[0] == 1  # DS008 warning
    assert run_cli(["lint", "--fail-on", "error", str(ds)])[0] == 0
    assert run_cli(["lint", "--exit-zero", str(ds)])[0] == 0


def test_bad_file_exit_2_and_others_still_linted(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"zero_optimization": {"stage": 3,}}')
    (tmp_path / "bin.yaml").write_bytes(b"model_name_or_path: \x00\x01")
    shutil.copy(SEED / "llama3_lora_sft.yaml", tmp_path / "cfg.yaml")
    code, out, err = run_cli(["lint", "--format", "json", str(tmp_path), str(tmp_path / "missing.yaml")])
    data = json.loads(out)
    assert code == 2
    codes = {d["code"] for d in data["diagnostics"]}
    assert {"CFG001", "LF001", "LF003"} <= codes
    assert any("missing.yaml" in p["file"] for p in data["problems"])
    assert any("bin.yaml" in p["file"] and "binary" in p["message"] for p in data["problems"])
    assert "Traceback" not in err


def test_unrelated_files_are_skipped_silently(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1.0.0"}')
    (tmp_path / ".pre-commit-config.yaml").write_text("repos: []\n")
    (tmp_path / "docker-compose.yml").write_text("services:\n  web:\n    image: nginx\n")
    (tmp_path / "tsconfig.json").write_text('{ // comments are fine here\n "compilerOptions": {}}')
    code, out, _ = run_cli(["lint", "--format", "json", str(tmp_path)])
    assert code == 0 and json.loads(out)["diagnostics"] == []


def test_rules_and_rule_docs() -> None:
    code, out, _ = run_cli(["rules"])
    assert code == 0 and "LF001" in out and "unknown-key" in out
    code, out, _ = run_cli(["rule", "DS001"])
    assert code == 0 and "Evidence" in out and "stage3_parition_grads" in out
    assert "page: rules/DS001.md" in out  # the top-level catalog's page, generated from the same docs
    assert run_cli(["rule", "unknown-key"])[0] == 0
    assert run_cli(["rule", "XX999"])[0] == 2


def test_usage_error_is_exit_2() -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(["lint", "--target", "tpu"])
    assert exc.value.code == 2


def test_target_changes_verdict(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text('{"train_batch_size": 1, "zero_optimization": {"stage": 2}, "aio": {"use_gds": true}}')
    assert run_cli(["lint", "--fail-on", "error", str(ds)])[0] == 1
    assert run_cli(["lint", "--fail-on", "error", "--target", "h100", str(ds)])[0] == 0


def test_deepspeed_reference_is_followed(tmp_path: Path) -> None:
    shutil.copy(SEED / "ds_z3_config.json", tmp_path / "ds.json")
    (tmp_path / "cfg.yaml").write_text(
        "model_name_or_path: m\nstage: sft\ndo_train: true\ndataset: d\n"
        "template: llama3\noutput_dir: o\nbf16: true\ndeepspeed: ds.json\n"
    )
    _, out, _ = run_cli(["lint", "--format", "json", str(tmp_path / "cfg.yaml")])
    codes = {d["code"] for d in json.loads(out)["diagnostics"] if d["severity"] == "error"}
    assert codes == {"DS001", "DS007"}  # found in ds.json, which only the YAML names


def test_every_option_has_help_text() -> None:
    from cfgopt.cli import build_parser

    def parsers(parser):
        yield parser
        for action in parser._actions:  # argparse keeps subparsers as an action's `choices`
            if isinstance(action.choices, dict):
                for sub in action.choices.values():
                    yield from parsers(sub)

    missing = [
        f"{p.prog} {action.option_strings or action.dest}"
        for p in parsers(build_parser())
        for action in p._actions
        if not action.help and action.dest not in ("help", "command", "schema_command")
    ]
    assert not missing, missing


def test_watch_lints_again_when_a_file_changes(tmp_path: Path) -> None:
    from cfgopt.commands.watch import watch

    config = tmp_path / "cfg.yaml"
    config.write_text("model_name_or_path: x\n")
    runs: list[str] = []

    def lint_once() -> int:
        runs.append(config.read_text())
        return 0

    def sleep(_seconds: float) -> None:  # the user edits the file while cfgopt waits
        if len(runs) == 1:
            config.write_text("model_name_or_path: y\nstage: sft\n")

    assert watch([tmp_path], lint_once, rounds=2, sleep=sleep) == 0
    assert runs == ["model_name_or_path: x\n", "model_name_or_path: y\nstage: sft\n"]


def test_summary_line_ends_with_a_newline(capsys) -> None:
    from cfgopt.cli import main

    main(["lint", "fixtures/clean"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("note:")]  # references found elsewhere
    assert lines[0].startswith("Checked 2 file(s)") and err.endswith("\n")
    assert all(line.startswith("  ") for line in lines[1:])  # then what was judged, a part a line
