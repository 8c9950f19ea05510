"""`cfgopt server`'s documents, without the protocol (`cfgopt.server.analysis.Session`): what a change re-lints
(its own group: the document and the open documents its job reads, never a large unrelated one), the LSP line
index, the bounded JSON completion, fix-all once per change, the editor's own paths, the project config's
excludes and its errors. The protocol side is tests/server/test_server.py."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT

from cfgopt.server import analysis
from cfgopt.server.analysis import LineIndex, Session, json_object_path

SEED = ROOT / "fixtures" / "seed"
LINKED = ROOT / "fixtures" / "rules" / "LF009" / "zero3-linked"


@pytest.fixture
def seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "seed"
    shutil.copytree(SEED, folder)
    monkeypatch.chdir(folder)
    return folder


def _open(session: Session, *paths: Path) -> None:
    for path in paths:
        session.update(path, path.read_text(encoding="utf-8"), 1)


def _codes(session: Session, path: Path) -> set[str]:
    return {d.code for d in session.findings.get(path, [])}


def test_a_change_relints_its_own_group_only(seed: Path) -> None:
    """Another training YAML open in the folder, naming no file of the seed's job, is not linted again when the
    seed's YAML changes (issue 45: each change linted the folder's open documents)."""
    other = seed / "other.yaml"
    other.write_text((seed / "llama3_lora_sft.yaml").read_text().replace("deepspeed: ds_z3_config.json", ""))
    yaml, json = seed / "llama3_lora_sft.yaml", seed / "ds_z3_config.json"
    session = Session()
    _open(session, other, json, yaml)
    before = session.findings[other]
    session.linted.clear()
    renewed = session.update(yaml, yaml.read_text().replace("cutoff_len: 1024", "cutoff_len: 2048"), 2)
    assert session.linted == [(json, yaml)] and set(renewed) == {json, yaml}
    assert session.findings[other] is before


def test_yamls_sharing_a_json_are_judged_together(seed: Path) -> None:
    """The JSON is judged with every open YAML that names it, as `cfgopt lint` of the folder judges it."""
    twin, yaml, json = seed / "twin.yaml", seed / "llama3_lora_sft.yaml", seed / "ds_z3_config.json"
    shutil.copy(yaml, twin)
    session = Session()
    _open(session, twin, json, yaml)
    session.linted.clear()
    session.update(yaml, yaml.read_text().replace("cutoff_len: 1024", "cutoff_len: 2048"), 2)
    assert session.linted == [(json, yaml, twin)]


def test_a_large_document_is_never_linted_with_another_change(seed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large YAML naming the seed's JSON: linted alone when opened; a keystroke in the seed's YAML or its JSON
    leaves it be; saving the JSON it reads lints it again."""
    yaml, json, big = seed / "llama3_lora_sft.yaml", seed / "ds_z3_config.json", seed / "big.yaml"
    big.write_text(yaml.read_text() + "# notes\n" * 100)
    monkeypatch.setattr(analysis, "LARGE", len(yaml.read_text()) + 10)
    session = Session()
    _open(session, big, json, yaml)
    assert session.linted[0] == (big,) and "LF003" in _codes(session, big)
    assert not session.fixable(big, unsafe=True) and session.fixable(yaml, unsafe=True)  # no fixer run on it
    before = session.findings[big]
    session.linted.clear()
    session.update(yaml, yaml.read_text().replace("cutoff_len: 1024", "cutoff_len: 2048"), 2)
    session.update(json, json.read_text() + " ", 2)
    assert session.linted == [(json, yaml), (json, yaml)] and session.findings[big] is before
    session.linted.clear()
    assert session.save(json) == [big] and session.linted == [(big,)]


def test_the_same_text_is_not_linted_again(seed: Path) -> None:
    yaml = seed / "llama3_lora_sft.yaml"
    session = Session()
    _open(session, yaml)
    session.linted.clear()
    assert session.update(yaml, yaml.read_text(), 2) == [yaml] and session.linted == []


def test_a_large_document_is_linted_when_saved(seed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "LARGE", 100)
    yaml = seed / "llama3_lora_sft.yaml"
    session = Session()
    _open(session, yaml)  # opened: linted once
    assert "LF003" in _codes(session, yaml)
    session.linted.clear()
    session.update(yaml, yaml.read_text().replace("flash_attn: true", "flash_attn: sdpa"), 2)
    assert session.linted == [] and session.findings[yaml] == [] and "linted when saved" in session.notes[yaml]
    session.save(yaml)
    assert session.linted and "LF003" not in _codes(session, yaml) and yaml not in session.notes


def test_a_yaml_and_its_json_in_other_folders_are_judged_together(tmp_path: Path, monkeypatch) -> None:
    """LLaMA-Factory's own layout: examples/train_lora/*.yaml names examples/deepspeed/*.json (XF002 on the JSON)."""
    case = ROOT / "fixtures" / "rules" / "XF002" / "mismatch"
    (tmp_path / "examples" / "train_lora").mkdir(parents=True)
    (tmp_path / "examples" / "deepspeed").mkdir()
    yaml, json = tmp_path / "examples" / "train_lora" / "train.yaml", tmp_path / "examples" / "deepspeed" / "ds.json"
    named = (case / "train.yaml").read_text().replace("deepspeed: ds.json", "deepspeed: examples/deepspeed/ds.json")
    yaml.write_text(named)
    shutil.copy(case / "ds.json", json)
    monkeypatch.chdir(tmp_path / "examples")
    for order in ((yaml, json), (json, yaml)):
        session = Session()
        _open(session, *order)
        assert "XF002" in _codes(session, json), order


def test_closing_an_unsaved_json_judges_its_readers_with_the_file(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(LINKED / "train.yaml", tmp_path / "train.yaml")
    shutil.copy(LINKED / "ds_z2.json", tmp_path / "ds_z3.json")  # on disk: ZeRO-2
    monkeypatch.chdir(tmp_path)
    yaml, json = tmp_path / "train.yaml", tmp_path / "ds_z3.json"
    session = Session()
    _open(session, yaml)
    session.update(json, (LINKED / "ds_z3.json").read_text(), 1)  # unsaved: ZeRO-3
    assert "LF009" in _codes(session, yaml)
    assert yaml in session.close(json)
    assert "LF009" not in _codes(session, yaml) and json not in session.findings


def test_positions_break_lines_as_lsp_does() -> None:
    text = "# a\u2028b\r\nx: 1\ry: 2\nz: \U0001f600!"
    index = LineIndex(text)
    assert index.starts == [0, 7, 12, 17]
    assert index.position(text.index("x")) == (1, 0) and index.position(text.index("!")) == (3, 5)
    assert index.offset((3, 5)) == text.index("!") and index.offset((1, 99)) == text.index("\r", 7)


def test_a_u2028_in_a_comment_leaves_the_quick_fix_on_its_key(seed: Path) -> None:
    """LF003's fix on `flash_attn` edits that key, not the next one (issue 43)."""
    yaml = seed / "llama3_lora_sft.yaml"
    text = "# notes\u2028\n" + yaml.read_text()  # PyYAML: two line breaks; LSP: one
    session = Session()
    session.update(yaml, text, 1)
    lf003 = next(d for d in session.findings[yaml] if d.code == "LF003")
    fixed = _apply_lsp(text, session.fix_edits(lf003))
    assert "flash_attn: sdpa\n" in fixed and fixed.replace("flash_attn: sdpa", "flash_attn: true") == text


def _apply_lsp(text: str, edits: list[analysis.TextEdit]) -> str:
    index = LineIndex(text)
    for edit in sorted(edits, key=lambda e: e.span.start, reverse=True):
        text = text[: index.offset(edit.span.start)] + edit.text + text[index.offset(edit.span.end) :]
    return text


def test_json_completion_reads_escaped_quotes_in_one_pass() -> None:
    prefix = '{"zero_optimization": {"offload_param": {}, "stage3_x": "' + '\\"' * 24000
    assert json_object_path(prefix) == ["", "zero_optimization"]
    assert json_object_path('{"a": "}\\"{", "b": {"c": 1}, "d": {') == ["", "d"]
    assert json_object_path('{"a": "x\\\\"') == [""]  # an escaped backslash ends before the quote


def test_fix_all_runs_the_fixer_once_per_change(seed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.lint import fixer

    runs: list[bool] = []
    real = fixer.fix_paths
    monkeypatch.setattr(fixer, "fix_paths", lambda *a, **k: runs.append(True) or real(*a, **k))
    yaml = seed / "llama3_lora_sft.yaml"
    session = Session()
    _open(session, seed / "ds_z3_config.json", yaml)
    assert session.fixable(yaml, unsafe=False)
    first = session.fix_all(yaml, unsafe=False)
    assert session.fix_all(yaml, unsafe=False) == first and len(runs) == 1
    session.update(yaml, yaml.read_text().replace("cutoff_len: 1024", "cutoff_len: 2048"), 2)
    session.fix_all(yaml, unsafe=False)
    assert len(runs) == 2


def test_a_folder_opened_through_a_symlink_keeps_its_paths(tmp_path: Path, monkeypatch) -> None:
    shutil.copytree(SEED, tmp_path / "real")
    os.symlink(tmp_path / "real", tmp_path / "link")
    monkeypatch.chdir(tmp_path / "link")
    yaml, json = tmp_path / "link" / "llama3_lora_sft.yaml", tmp_path / "link" / "ds_z3_config.json"
    session = Session()
    _open(session, json, yaml)
    assert {"LF001", "LF003"} <= _codes(session, yaml) and "DS001" in _codes(session, json)
    assert set(session.findings) == {yaml, json}
    assert set(session.fix_all(yaml, unsafe=False)) <= {yaml, json} and session.fix_all(yaml, unsafe=False)


def test_a_file_the_project_config_excludes_gets_nothing(seed: Path) -> None:
    (seed / "cfgopt.toml").write_text('exclude = ["ds_*.json", "llama3_*.yaml"]\n')
    yaml = seed / "llama3_lora_sft.yaml"
    session = Session()
    _open(session, seed / "ds_z3_config.json", yaml)
    assert session.findings[yaml] == [] and not session.fixable(yaml, unsafe=True)
    assert session.fix_all(yaml, unsafe=True) == {}


def test_a_bad_project_config_is_one_line(seed: Path) -> None:
    (seed / "cfgopt.toml").write_text("target = [\n")
    yaml = seed / "llama3_lora_sft.yaml"
    session = Session()
    _open(session, yaml)
    (problem,) = session.problems[yaml]
    assert "cfgopt.toml" in problem.message and "invalid TOML" in problem.message and "\n" not in problem.message
    assert session.hover(yaml, (0, 0)) is None and session.complete(yaml, (0, 0)) == []
    assert session.fix_all(yaml, unsafe=True) == {}
    assert not re.search(r"Traceback|File \"", problem.message)


def test_the_server_and_the_cli_map_positions_with_one_table() -> None:
    """One position mapping (cfgopt.text.document.line_starts): the server asks it for the protocol's lines
    (`\\n`, `\\r\\n`, `\\r`), the CLI for the file's own syntax; a U+2028 in a YAML comment breaks a line for PyYAML
    and not for the editor."""
    from cfgopt.server.analysis import LineIndex
    from cfgopt.text.document import line_starts

    text = "# a\u2028b\nflash_attn: sdpa\r\nx: 1\r"
    assert LineIndex(text).starts == line_starts(text, "lsp") == [0, 6, 24, 29]
    assert line_starts(text, "yaml") == [0, 4, 6, 24, 29]


SURROGATE_JSON = '{"zero_optimization": {"stage": 2},\n "x\ud800": 1}'  # an editor's buffer: no UTF-8 holds it


def test_a_lone_surrogate_is_said_at_the_top_not_left_silent(seed: Path) -> None:
    """It got no diagnostic at all (the overlay's UTF-8 encoding raised inside the lint); the text without it gets
    its findings, and an unrelated document with one stays silent as any unrelated document does."""
    json = seed / "ds_z3_config.json"
    session = Session()
    session.update(json, SURROGATE_JSON, 1)
    (problem,) = session.problems[json]
    assert problem.message.startswith("the text holds a lone surrogate (U+D800 on line 2)")
    assert session.findings[json] == [] and session.fix_all(json, unsafe=True) == {}
    session.update(json, SURROGATE_JSON.replace("\ud800", ""), 2)
    assert session.problems[json] == [] and {"DS007", "DS002"} <= _codes(session, json)
    session.update(seed / "package.json", '{"name": "x\ud800"}', 1)
    assert session.problems[seed / "package.json"] == session.findings[seed / "package.json"] == []


def test_a_lint_that_fails_is_said_at_the_top(seed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(members, overlay):
        raise ValueError("a bug\nover two lines")

    monkeypatch.setattr(analysis, "_lint_paths", broken)
    yaml = seed / "llama3_lora_sft.yaml"
    session = Session()
    _open(session, yaml)
    (problem,) = session.problems[yaml]
    assert problem.message == "cfgopt: internal error (ValueError: a bug over two lines); please report this"
