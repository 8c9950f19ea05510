"""Suppression comments (`# cfgopt: ignore[...]`, `ignore-file`), and CFG004 for the unused ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rule_cases import ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"
HEAD = "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
TAIL = "dataset: alpaca_en_demo\ntemplate: llama3\noutput_dir: output\n"
SELECT = ["--select", "CFG004,LF001,LF003"]


def lint(path: Path, *args: str) -> list[tuple[int, str, str]]:
    _, out, _ = run_cli(["lint", "--format", "json", str(path), *SELECT, *args])
    return [(d["line"], d["code"], d["message"]) for d in json.loads(out)["diagnostics"]]


def write(tmp_path: Path, body: str, name: str = "train.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_same_line_and_line_above(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEAD + "compute_type: bf16  # cfgopt: ignore[LF001]\n# cfgopt: ignore[LF003]\nflash_attn: true\n" + TAIL,
    )
    assert lint(path) == []


def test_only_the_named_codes_and_lines(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "compute_type: bf16  # cfgopt: ignore[LF003]\nflash_attn: true\n" + TAIL)
    found = lint(path)
    assert (5, "LF001") in [(line, code) for line, code, _ in found]
    assert (6, "LF003") in [(line, code) for line, code, _ in found]
    assert (5, "CFG004") in [(line, code) for line, code, _ in found]  # LF003 had nothing on line 5


def test_rule_names_and_lower_case_codes(tmp_path: Path) -> None:
    body = "compute_type: bf16  # cfgopt: ignore[unknown-key]\nflash_attn: true # CFGOPT: IGNORE[lf003]\n"
    path = write(tmp_path, HEAD + body + TAIL)
    assert lint(path) == []


def test_file_level(tmp_path: Path) -> None:
    path = write(tmp_path, "# cfgopt: ignore-file[LF001]\n" + HEAD + "compute_type: bf16\nflash_attn: true\n" + TAIL)
    assert [c for _, c, _ in lint(path)] == ["LF003"]
    path = write(tmp_path, HEAD + "compute_type: bf16\nflash_attn: true\n" + TAIL + "# cfgopt: ignore-file\n")
    assert lint(path) == []


def test_hash_inside_a_string_is_not_a_comment(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + 'compute_type: "bf16 # cfgopt: ignore[LF001]"\n' + TAIL)
    assert [c for _, c, _ in lint(path)] == ["LF001"]
    path = write(tmp_path, HEAD + "compute_type: |\n  x\n  # cfgopt: ignore[LF001]\n" + TAIL)
    assert [c for _, c, _ in lint(path)] == ["LF001"]


def test_shell_comment_above_a_command_covers_the_command(tmp_path: Path) -> None:
    text = (SEED / "train.sh").read_text()
    text = text.replace("llamafactory-cli train", "# cfgopt: ignore[LF003]\nllamafactory-cli train")
    path = write(tmp_path, text, "train.sh")
    assert lint(path) == []
    text = (SEED / "train.sh").read_text().replace("ds_z3_config.json", "ds_z3_config.json  # cfgopt: ignore[LF003]")
    path = write(tmp_path, text, "train.sh")
    assert lint(path) == []


def test_unused_and_unknown_are_reported_with_a_safe_fix(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEAD
        + "# cfgopt: ignore[LF001]\nflash_attn: sdpa\n"
        + "compute_type: bf16  # cfgopt: ignore[LF001, LF003, NOPE1]\n"
        + TAIL,
    )
    found = lint(path)
    assert [(line, code) for line, code, _ in found] == [(5, "CFG004"), (7, "CFG004")]
    assert "no LF001 finding on line 6" in found[0][2]
    assert "no LF003 finding" in found[1][2] and "unknown rule code `NOPE1`" in found[1][2]
    _code, _, _ = run_cli(["fix", "--write", str(path), *SELECT])
    assert path.read_text() == HEAD + "flash_attn: sdpa\ncompute_type: bf16  # cfgopt: ignore[LF001]\n" + TAIL
    assert lint(path) == []


def test_codes_of_rules_not_selected_are_left_alone(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "flash_attn: sdpa  # cfgopt: ignore[PF001, DS001]\n" + TAIL)
    assert lint(path) == []  # neither PF001 nor DS001 runs: whether they would fire is unknown
    found = lint(path, "--select", "CFG004,LF,DS001")
    assert [(line, code) for line, code, _ in found] == [(5, "CFG004")]
    assert "no DS001 finding" in found[0][2] and "PF001" not in found[0][2]


def test_cfg004_can_be_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "flash_attn: sdpa  # cfgopt: ignore[LF003]\n" + TAIL)
    assert lint(path, "--ignore", "CFG004") == []


def test_json_uses_per_file_ignores(tmp_path: Path) -> None:
    shutil.copy(SEED / "ds_z3_config.json", tmp_path / "ds.json")
    (tmp_path / "cfgopt.toml").write_text("[per-file-ignores]\n'ds.json' = ['DS001']\n")
    _, out, _ = run_cli(["lint", "--format", "json", str(tmp_path / "ds.json"), "--select", "DS001,CFG004"])
    assert json.loads(out)["diagnostics"] == []
