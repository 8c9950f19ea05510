"""Hostile and broken input: a clear one-line message naming the file and the cause, exit code 2, no
traceback, bounded time and memory, and every other file still linted. Limits: docs/limits.md."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

SEED_YAML = ROOT / "fixtures" / "seed" / "llama3_lora_sft.yaml"


def lint(*paths: Path | str) -> tuple[int, dict, str]:
    code, out, err = run_cli(["lint", "--format", "json", *map(str, paths)])
    assert "Traceback" not in err
    return code, json.loads(out), err


def good_file(tmp: Path) -> Path:
    """A broken-but-readable config beside the hostile one: it must still be linted."""
    path = tmp / "good.yaml"
    shutil.copy(SEED_YAML, path)
    return path


def assert_problem(data: dict, name: str, cause: str) -> None:
    found = [p for p in data["problems"] if Path(p["file"]).name == name]
    assert found, data["problems"]
    assert cause in found[0]["message"]
    assert "\n" not in found[0]["message"]


def assert_others_linted(data: dict) -> None:
    assert any(Path(d["file"]).name == "good.yaml" and d["code"] == "LF001" for d in data["diagnostics"])


def parse_error_of(data: dict, name: str) -> dict:
    found = [d for d in data["diagnostics"] if Path(d["file"]).name == name and d["code"] == "CFG001"]
    assert found, data["diagnostics"]
    return found[0]


@pytest.mark.parametrize(
    ("name", "content", "cause"),
    [
        ("bad.yaml", b"model_name_or_path: m\n  stage: sft\n", "invalid YAML"),
        ("bad.json", b'{"zero_optimization": {"stage": 3,}}', "invalid JSON"),
        ("comment.json", b'{"zero_optimization": {"stage": 3} // z3\n}', "invalid JSON"),
        ("tag.yaml", b"model_name_or_path: !!python/object/apply:os.system ['rm -rf /']\n", "invalid YAML"),
        ("bom.json", b'\xef\xbb\xbf{"zero_optimization": {"stage": 2}}', "BOM"),
        ("dup.yaml", b"model_name_or_path: a\nmodel_name_or_path: b\n", "repeated"),
    ],
)
def test_unparseable_files_are_reported_and_others_still_linted(tmp_path: Path, name, content, cause) -> None:
    (tmp_path / name).write_bytes(content)
    good_file(tmp_path)
    code, data, _ = lint(tmp_path / name, tmp_path / "good.yaml")
    assert code in (1, 2)
    found = [d for d in data["diagnostics"] if Path(d["file"]).name == name]
    assert found and cause in found[0]["message"]
    assert_others_linted(data)
    if name != "dup.yaml":  # a duplicate key is a finding (exit 1); the others cannot be parsed (exit 2)
        assert code == 2


@pytest.mark.parametrize(
    ("name", "content", "cause"),
    [
        ("empty.yaml", b"", "empty file"),
        ("blank.yaml", b"\n  \n", "empty file"),
        ("binary.yaml", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10, "binary"),
        ("latin1.yaml", "model_name_or_path: caf\u00e9\n".encode("latin-1"), "not UTF-8"),
    ],
)
def test_unreadable_content_is_a_problem_with_exit_2(tmp_path: Path, name, content, cause) -> None:
    (tmp_path / name).write_bytes(content)
    good_file(tmp_path)
    code, data, _err = lint(tmp_path / name, tmp_path / "good.yaml")
    assert code == 2
    assert_problem(data, name, cause)
    assert_others_linted(data)


def test_huge_file_is_refused_without_reading_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "huge.yaml"
    with big.open("wb") as handle:  # 100 MB, sparse: cheap to create
        handle.truncate(100 * 1024 * 1024)
    good_file(tmp_path)
    from cfgopt.project import project

    read: list[str] = []
    real_read = project.read_bounded
    monkeypatch.setattr(
        project, "read_bounded", lambda path, limit: read.append(Path(path).name) or real_read(path, limit)
    )
    code, data, _ = lint(big, tmp_path / "good.yaml")
    assert "huge.yaml" not in read and "good.yaml" in read  # refused from its size, never read
    assert code == 2
    assert_problem(data, "huge.yaml", "MiB")
    assert_others_linted(data)


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deep_nesting(tmp_path: Path, depth: int) -> None:
    (tmp_path / "deep.json").write_text('{"zero_optimization": ' + "[" * depth + "]" * depth + "}")
    (tmp_path / "deep.yaml").write_text("model_name_or_path: " + "[" * depth + "]" * depth + "\n")
    good_file(tmp_path)
    code, data, _ = lint(tmp_path / "deep.json", tmp_path / "deep.yaml", tmp_path / "good.yaml")
    assert code in (1, 2)
    assert_others_linted(data)
    if depth >= 100_000:
        assert "nested too deeply" in parse_error_of(data, "deep.json")["message"]


def test_yaml_alias_bomb(tmp_path: Path) -> None:
    lines = ["model_name_or_path: m", "a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*{'a' if i == 1 else f'l{i - 1}'}"] * 10) + "]")
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
    good_file(tmp_path)
    code, data, _ = lint(tmp_path / "bomb.yaml", tmp_path / "good.yaml")  # refused before 10^9 nodes expand
    assert code == 2
    assert "expansion" in parse_error_of(data, "bomb.yaml")["message"]
    assert_others_linted(data)


def test_crlf_and_very_long_lines(tmp_path: Path) -> None:
    text = SEED_YAML.read_text().replace("\n", "\r\n")
    text += "dataset_dir: " + "x" * 2_000_000 + "\r\n"
    (tmp_path / "long.yaml").write_text(text, newline="")
    code, out, _err = run_cli(["lint", str(tmp_path / "long.yaml")])
    assert code == 1
    assert max(len(line) for line in out.splitlines()) < 1000  # code frames and messages stay bounded
    code, data, _ = lint(tmp_path / "long.yaml")
    assert {d["code"] for d in data["diagnostics"]} >= {"LF001", "LF003"}


def test_symlink_loop_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    (folder / "a.yaml").symlink_to(folder / "b.yaml")
    (folder / "b.yaml").symlink_to(folder / "a.yaml")
    good_file(folder)
    code, data, _ = lint(folder)  # the walk ends: each real folder once
    assert code == 2
    assert_problem(data, "a.yaml", "")
    assert_others_linted(data)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path: Path) -> None:
    locked = tmp_path / "locked.yaml"
    shutil.copy(SEED_YAML, locked)
    locked.chmod(0)
    good_file(tmp_path)
    code, data, _ = lint(locked, tmp_path / "good.yaml")
    assert code == 2
    assert_problem(data, "locked.yaml", "ermission")
    assert_others_linted(data)


def test_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    good_file(tmp_path)
    code, data, _ = lint(fifo, tmp_path / "good.yaml")
    assert code == 2
    assert_problem(data, "pipe.yaml", "not a regular file")
    assert_others_linted(data)


def test_folder_with_ten_thousand_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(10_000):
        (folder / f"f{i:05d}.yaml").write_text(f"name: item{i}\nvalue: {i}\n")
    good_file(folder)
    from cfgopt.project import project

    reads: list[str] = []
    real_read = project.read_bounded
    monkeypatch.setattr(project, "read_bounded", lambda path, limit: reads.append(str(path)) or real_read(path, limit))
    code, data, _ = lint(folder)
    assert len(reads) == len(set(reads)) == 10_001  # each file read once: no rescan of the folder per file
    assert code == 1
    assert_others_linted(data)


def test_path_that_vanishes_mid_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.loaders import discovery

    good = good_file(tmp_path)
    doomed = tmp_path / "doomed.yaml"
    shutil.copy(SEED_YAML, doomed)
    real_iter = discovery.iter_files

    def iter_then_delete(paths, unreadable=None):
        for path, explicit in real_iter(paths, unreadable):
            if path.name == "doomed.yaml":
                path.unlink()  # the file is listed, then gone before it is read
            yield path, explicit

    monkeypatch.setattr(discovery, "iter_files", iter_then_delete)
    code, data, _ = lint(tmp_path)
    assert code == 2
    assert_problem(data, "doomed.yaml", "No such file")
    assert_others_linted(data)
    assert good.exists()


def test_missing_path_argument(tmp_path: Path) -> None:
    good_file(tmp_path)
    code, data, _ = lint(tmp_path / "nope.yaml", tmp_path / "good.yaml")
    assert code == 2
    assert_problem(data, "nope.yaml", "no such file")
    assert_others_linted(data)
