"""Real paths asked once per run (`cfgopt.text.real_paths`): the same answers as `os.path.realpath`, kept only
inside `one_run()`, so that a link changed between two runs (the editor server's process lives across edits) is
seen by the second."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cfgopt.text import real_paths
from cfgopt.text.real_paths import one_run, real_path, realpath


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path `os.path.realpath` is asked for, through the module's memo."""
    calls: list[str] = []
    real = os.path.realpath

    def counted(path: object) -> str:
        calls.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(real_paths.os.path, "realpath", counted)
    return calls


def test_inside_a_run_each_path_is_asked_once(tmp_path: Path, asked: list[str]) -> None:
    (tmp_path / "a.yaml").write_text("x: 1\n")
    with one_run():
        first = [realpath(tmp_path / "a.yaml") for _ in range(3)]
        assert real_path(tmp_path / "a.yaml") is real_path(str(tmp_path / "a.yaml"))
    assert asked == [str(tmp_path / "a.yaml")]
    assert first == [os.path.realpath(tmp_path / "a.yaml")] * 3


def test_outside_a_run_and_after_it_every_call_asks(tmp_path: Path, asked: list[str]) -> None:
    realpath(tmp_path)
    with one_run():
        realpath(tmp_path)
    realpath(tmp_path)
    with one_run():
        realpath(tmp_path)
    assert len(asked) == 4


def test_nested_runs_are_one(tmp_path: Path, asked: list[str]) -> None:
    with one_run():
        realpath(tmp_path)
        with one_run():
            realpath(tmp_path)
        realpath(tmp_path)  # the inner block's end is not the run's
    assert len(asked) == 1


def test_a_link_changed_between_runs_is_seen(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a")
    with one_run():
        assert real_path(link / "ds.json") == tmp_path.resolve() / "a" / "ds.json"
    link.unlink()
    link.symlink_to(tmp_path / "b")
    with one_run():
        assert real_path(link / "ds.json") == tmp_path.resolve() / "b" / "ds.json"


def test_a_relative_path_is_kept_with_its_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    with one_run():
        monkeypatch.chdir(tmp_path / "one")
        assert realpath("cfg.yaml") == os.path.realpath(tmp_path / "one" / "cfg.yaml")
        monkeypatch.chdir(tmp_path / "two")
        assert realpath("cfg.yaml") == os.path.realpath(tmp_path / "two" / "cfg.yaml")


def test_a_symlink_loop_is_answered_as_os_path_realpath_answers(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with one_run():
        assert realpath(tmp_path / "loop") == os.path.realpath(tmp_path / "loop")
