"""The folder walk of `discovery.iter_files` (`walk_folders`) answers as `os.walk(folder, followlinks=False)` with
the walk's filters did: the same folders in the same order, the same files, a link to a folder listed and not
entered, a folder that cannot be listed noted and skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cfgopt.loaders import discovery


def _as_os_walk(folder: Path, unreadable: list) -> list[tuple[str, list[str]]]:
    """The walk as it was written over `os.walk`."""

    def note(exc: OSError) -> None:
        unreadable.append((Path(exc.filename or "."), exc.strerror or str(exc)))

    out = []
    for root, dirs, files in os.walk(folder, onerror=note, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in discovery.SKIP_DIRS)
        out.append((root, [name for name in sorted(files) if discovery._walked(name)]))
    return out


def _same_walk(folder: Path) -> None:
    before: list = []
    after: list = []
    assert list(discovery.walk_folders(folder, after)) == _as_os_walk(folder, before)
    assert after == before


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Nested folders, hidden and package folders, links to a folder (inside and outside the tree), a link loop,
    a broken link, files of every kind the walk keeps or leaves."""
    root = tmp_path / "root"
    for folder in ("b/c/d", "a", ".git/x", "node_modules/y", "Z", "a/e"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for name in ("a/t.yaml", "a/e/s.SH", "b/c/d/ds.json", "b/requirements-dev.txt", "x.yml", ".h.yaml", "Z/a.bash"):
        (root / name).write_text("x: 1\n")
    for name in ("notes.md", "b/c/setup.py", "a/e/pyproject.toml", "..yaml", "a.", ".git/x/c.yaml"):
        (root / name).write_text("")
    (root / "b" / "to_a").symlink_to(root / "a")
    (root / "out").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "e.yaml").write_text("x: 1\n")
    (root / "out" / "linked").symlink_to(tmp_path / "elsewhere")
    (root / "loop").symlink_to(root)
    (root / "broken.yaml").symlink_to(root / "gone.yaml")
    (root / "file_link.json").symlink_to(root / "b" / "c" / "d" / "ds.json")
    return root


def test_a_tree_walks_as_os_walk_walked_it(tree: Path) -> None:
    _same_walk(tree)
    walked = [folder for folder, _ in discovery.walk_folders(tree)]
    assert str(tree / "b" / "to_a") not in walked and str(tree / "loop") not in walked


def test_a_missing_folder_is_noted_as_os_walk_noted_it(tmp_path: Path) -> None:
    _same_walk(tmp_path / "missing")


def test_this_repository_walks_as_os_walk_walked_it() -> None:
    _same_walk(Path(__file__).resolve().parents[2] / "fixtures")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root lists a folder of mode 000")
def test_a_folder_that_cannot_be_listed_is_noted_as_os_walk_noted_it(tree: Path) -> None:
    (tree / "b" / "c").chmod(0)
    try:
        _same_walk(tree)
    finally:
        (tree / "b" / "c").chmod(0o755)
