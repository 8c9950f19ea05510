"""Project configuration: discovery (closest wins), options, overrides, --isolated, --show-settings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"


def seed_project(tmp_path: Path) -> Path:
    work = tmp_path / "proj"
    shutil.copytree(SEED, work)
    return work


def codes(out: str) -> list[tuple[str, str]]:
    return sorted((Path(d["file"]).name, d["code"]) for d in json.loads(out)["diagnostics"])


def lint_json(*args: str) -> tuple[int, list[tuple[str, str]], str]:
    code, out, err = run_cli(["lint", "--format", "json", *args])
    return code, (codes(out) if out.strip() else []), err


def test_pyproject_tool_table_applies(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.cfgopt]\nselect = ["LF001"]\n')
    code, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"))
    assert found == [("llama3_lora_sft.yaml", "LF001"), ("llama3_lora_sft.yaml", "LF001")]
    assert code == 1


def test_closest_config_wins_and_pyproject_without_table_is_skipped(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text('select = ["LF001"]\n')
    sub = work / "sub"
    sub.mkdir()
    shutil.copy(SEED / "llama3_lora_sft.yaml", sub / "a.yaml")
    shutil.copy(SEED / "ds_z3_config.json", sub / "ds_z3_config.json")
    (sub / "cfgopt.toml").write_text('select = ["LF003"]\n')
    deeper = sub / "deeper"
    deeper.mkdir()
    shutil.copy(SEED / "llama3_lora_sft.yaml", deeper / "b.yaml")
    (deeper / "pyproject.toml").write_text('[project]\nname = "no-cfgopt-table"\n')  # skipped: no [tool.cfgopt]
    _, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"), str(sub / "a.yaml"), str(deeper / "b.yaml"))
    assert ("llama3_lora_sft.yaml", "LF001") in found and ("llama3_lora_sft.yaml", "LF003") not in found
    assert ("a.yaml", "LF003") in found and ("a.yaml", "LF001") not in found
    assert ("b.yaml", "LF003") in found and ("b.yaml", "LF001") not in found


def test_unknown_option_is_a_usage_error_with_did_you_mean(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "pyproject.toml").write_text("[tool.cfgopt]\nselet = ['LF']\n")
    code, _out, err = run_cli(["lint", str(work)])
    assert code == 2
    assert "unknown option 'selet'" in err and "did you mean 'select'" in err and "pyproject.toml" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("target = 'mi301x'\n", "did you mean 'mi300x'"),
        ("gpus = 0\n", "integer from 1 to 1048576"),
        ("select = ['LF9999']\n", "unknown rule 'LF9999'"),
        ("fail-on = 'fatal'\n", "error, warning, info"),
        ("fail_on = 'error'\n", "did you mean 'fail-on'"),
        ("llamafactory-version = '0.1'\n", "no LLaMA-Factory '0.1' snapshot"),
        ("select = [\n", "invalid TOML"),
    ],
)
def test_bad_values_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text(text)
    code, _, err = run_cli(["lint", str(work)])
    assert code == 2 and message in err, err


def test_command_line_overrides_config(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("select = ['LF001']\ntarget = 'cpu'\n")
    _, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"), "--select", "LF003")
    assert found == [("llama3_lora_sft.yaml", "LF003")]
    code, out, _ = run_cli(["lint", "--show-settings", "--target", "h100", str(work / "llama3_lora_sft.yaml")])
    assert code == 0 and 'target = "h100"' in out


def test_config_override_flag(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("select = ['LF001']\n")
    _, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"), "--config", "select=['LF003']")
    assert found == [("llama3_lora_sft.yaml", "LF003")]
    code, out, _ = run_cli(["lint", "--show-settings", "--config", "target=h200", "--config", "gpus = 4", str(work)])
    assert code == 0 and 'target = "h200"' in out and "gpus = 4" in out
    code, _, err = run_cli(["lint", "--config", "nope", str(work)])
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run_cli(["lint", "--config", "colour=1", str(work)])
    assert code == 2 and "unknown option 'colour'" in err


@pytest.mark.parametrize("flag", ["--isolated", "--no-config"])
def test_isolated_ignores_config_files(tmp_path: Path, flag: str) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("select = ['LF001']\nbogus = 1\n")
    code, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"), flag)
    assert code == 1 and ("llama3_lora_sft.yaml", "LF003") in found


def test_show_settings_names_the_config_file(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text(
        "select = ['LF']\nextend-select = ['DS001']\nignore = ['LF023']\ngpus = 8\n"
        "llamafactory-version = '0.9.4'\ndeepspeed-version = '0.16'\nfail-on = 'error'\n"
        "[per-file-ignores]\n'*.json' = ['DS']\n"
    )
    code, out, _ = run_cli(["lint", "--show-settings", str(work / "llama3_lora_sft.yaml")])
    assert code == 0
    assert f"config file: {(work / 'cfgopt.toml').resolve()}" in out  # outside the working directory: as it is
    for line in (
        'select = ["LF"]',
        'extend-select = ["DS001"]',
        'ignore = ["LF023"]',
        "gpus = 8",
        'llamafactory-version = "0.9.4"',
        'deepspeed-version = "0.16.4"',
        'fail-on = "error"',
        '"*.json" = ["DS"]',
    ):
        assert line in out, line


def test_config_file_paths_are_shown_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As every report shows a path: the same project gives the same bytes from any checkout path (--show-settings,
    where a version came from, and a config file's errors)."""
    work = seed_project(tmp_path)
    (work / "pyproject.toml").write_text("[tool.cfgopt]\nllamafactory-version = '>=0.9.3,<0.9.5'\n")
    monkeypatch.chdir(work)
    code, out, _ = run_cli(["lint", "--show-settings", "."])
    assert code == 0 and "# config file: pyproject.toml\n" in out and str(work) not in out
    assert "# pyproject.toml: llamafactory-version: LLaMA-Factory >=0.9.3,<0.9.5" in out
    (work / "pyproject.toml").write_text("[tool.cfgopt]\nllamafactory-version = '0.7'\n")
    code, _, err = run_cli(["lint", "."])
    assert code == 2 and err.startswith("cfgopt: error: pyproject.toml: llamafactory-version: no LLaMA-Factory")
    (work / "pyproject.toml").write_text("[tool.cfgopt\n")
    code, _, err = run_cli(["lint", "."])
    assert code == 2 and err.startswith("cfgopt: error: pyproject.toml: invalid TOML") and str(work) not in err


def test_per_file_ignores_for_json(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("[per-file-ignores]\n'ds_*.json' = ['DS001', 'DS007']\n")
    _, found, _ = lint_json(str(work))
    assert ("ds_z3_config.json", "DS001") not in found and ("ds_z3_config.json", "DS007") not in found
    assert ("llama3_lora_sft.yaml", "LF003") in found


def test_exclude_and_force_exclude(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("exclude = ['train.sh', 'legacy/']\n")
    legacy = work / "legacy"
    legacy.mkdir()
    shutil.copy(SEED / "llama3_lora_sft.yaml", legacy / "old.yaml")
    _, found, _ = lint_json(str(work))
    names = {f for f, _ in found}
    assert "train.sh" not in names and "old.yaml" not in names and "llama3_lora_sft.yaml" in names
    # named explicitly: linted (as ruff), unless --force-exclude
    _, found, _ = lint_json(str(work / "train.sh"), str(legacy / "old.yaml"))
    assert {f for f, _ in found} == {"train.sh", "old.yaml", "ds_z3_config.json"}
    code, found, _ = lint_json("--force-exclude", str(work / "train.sh"), str(legacy / "old.yaml"))
    assert found == [] and code == 0


def test_excluded_deepspeed_json_still_gives_context_but_no_findings(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("exclude = ['ds_*.json']\n")
    _, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"))
    assert all(f != "ds_z3_config.json" for f, _ in found)


def test_unfixable_rules_keep_their_findings_but_not_their_fixes(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("unfixable = ['LF001']\n")
    _code, out, _ = run_cli(["lint", "--format", "json", str(work / "llama3_lora_sft.yaml")])
    lf001 = [d for d in json.loads(out)["diagnostics"] if d["code"] == "LF001"]
    assert lf001 and all(d["fix"] is None for d in lf001)
    run_cli(["fix", "--write", "--unsafe-fixes", str(work / "llama3_lora_sft.yaml")])
    text = (work / "llama3_lora_sft.yaml").read_text()
    assert "compute_type: bf16" in text and "flash_attn: true" not in text
    (work / "cfgopt.toml").write_text("fixable = ['LF003']\n")
    shutil.copy(SEED / "llama3_lora_sft.yaml", work / "llama3_lora_sft.yaml")
    run_cli(["fix", "--write", "--unsafe-fixes", str(work / "llama3_lora_sft.yaml")])
    text = (work / "llama3_lora_sft.yaml").read_text()
    assert "compute_type: bf16" in text and "flash_attn: true" not in text


def test_fail_on_from_config(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    shutil.copy(ROOT / "fixtures" / "clean" / "llama3_lora_sft.yaml", work / "cfg.yaml")
    shutil.copy(ROOT / "fixtures" / "clean" / "ds_z2_config.json", work / "ds_z2_config.json")
    code, _, _ = run_cli(["lint", "--fail-on", "info", str(work)])
    (work / "cfgopt.toml").write_text("fail-on = 'error'\n")
    assert run_cli(["lint", str(work)])[0] == 0
    if code == 1:  # the clean fixture has infos: the command line still wins over the config
        assert run_cli(["lint", "--fail-on", "info", str(work)])[0] == 1


def test_versions_from_config(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("deepspeed-version = '0.16'\nllamafactory-version = '0.9.4'\n")
    code, out, _ = run_cli(["lint", "--show-settings", str(work)])
    assert code == 0 and 'deepspeed-version = "0.16.4"' in out and 'llamafactory-version = "0.9.4"' in out
    _code, out, _ = run_cli(["lint", "--show-settings", "--deepspeed-version", "0.17", str(work)])
    assert 'deepspeed-version = "0.17.6"' in out


def test_rule_names_are_accepted_in_selectors(tmp_path: Path) -> None:
    work = seed_project(tmp_path)
    (work / "cfgopt.toml").write_text("select = ['invalid-choice']\n")
    _, found, _ = lint_json(str(work / "llama3_lora_sft.yaml"))
    assert found == [("llama3_lora_sft.yaml", "LF003")]


def test_glob_matching() -> None:
    from cfgopt.job.settings import glob_match

    assert glob_match("*.json", "a/b/ds.json")
    assert glob_match("examples", "examples/v1/x.yaml")
    assert glob_match("examples/v1/*.yaml", "examples/v1/x.yaml")
    assert glob_match("**/ds_*.json", "ds_z3.json") and glob_match("**/ds_*.json", "a/ds_z3.json")
    assert glob_match("./legacy/", "legacy/old.yaml")
    assert not glob_match("examples/v1/*.yaml", "other/examples/v1/x.json")


def test_each_files_settings_are_resolved_once_and_carried_by_its_context(tmp_path: Path) -> None:
    """The engine asks the resolver once per file; the rules, the suppressions, the project-level rules and
    the exit code read what the file's context carries, whatever the number of rules."""
    from cfgopt.lint.engine import build_project
    from cfgopt.lint.project_config import CommandLine, Resolver

    work = seed_project(tmp_path)
    (work / "sub").mkdir()
    shutil.copy(work / "llama3_lora_sft.yaml", work / "sub" / "other.yaml")
    (work / "sub" / "cfgopt.toml").write_text("target = 'h100'\n")
    asked: list[Path] = []

    class Counting(Resolver):
        def settings_for(self, path: Path):  # type: ignore[no-untyped-def]
            asked.append(Path(path).resolve())
            return super().settings_for(path)

    project = build_project([work], Counting(CommandLine(select=["ALL"])))
    project.diagnostics()
    assert len(asked) == len(set(asked))  # once per file
    by_file = {Path(src.document.path).name: project.context(src).settings for src in project.sources}
    assert by_file["other.yaml"].target_name == "h100" and by_file["llama3_lora_sft.yaml"].target_name is None


def test_a_reference_found_outside_the_current_folder_is_announced(tmp_path: Path, monkeypatch) -> None:
    """`deepspeed: ds_z3_config.json` is read by the real tools from the launch folder; found beside the config
    instead, the run is judged on that assumption and the output says so (once per reference and folder)."""
    work = seed_project(tmp_path)
    shutil.copy(work / "llama3_lora_sft.yaml", work / "second.yaml")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    _, _, err = run_cli(["lint", str(work / "llama3_lora_sft.yaml"), str(work / "second.yaml")])
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "`ds_z3_config.json`" in notes[0] and "(and 1 more)" in notes[0]
    assert f"found in {work}, not in the current folder: judged as if launched from there" in notes[0]
    _, _, err = run_cli(["lint", "--format", "json", str(work / "llama3_lora_sft.yaml")])
    assert "note:" not in err  # machine formats stay as they are
    monkeypatch.chdir(work)  # launched from the config's folder: nothing assumed
    _, _, err = run_cli(["lint", "llama3_lora_sft.yaml"])
    assert "note:" not in err


def test_fix_announces_a_reference_found_outside_the_current_folder(tmp_path: Path, monkeypatch) -> None:
    work = seed_project(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    _, _, err = run_cli(["fix", str(work / "llama3_lora_sft.yaml")])
    assert "`ds_z3_config.json` found in" in err and "judged as if launched from there" in err
    _, _, err = run_cli(["fix", "-q", str(work / "llama3_lora_sft.yaml")])
    assert "note:" not in err
