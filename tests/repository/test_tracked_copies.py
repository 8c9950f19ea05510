"""No large file is tracked twice: a rule case names the dataset it shares with fixtures/data/ in its shared.txt
(tests/support/rule_cases.py) instead of carrying a copy. Read from git's index, so a copy fails here as soon as
it is added, before it is committed."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict

import pytest
from repo_paths import ROOT

LARGE = 8 * 1024  # bytes: a config or a DeepSpeed JSON stays in the case that shows it; a dataset is kept once
# Folders where an identical copy is the point, with why; a path under one of them is not counted.
ALLOWED_COPIES = {
    "tests/data/wild/": "files of public repositories kept as found, one folder per repository",
}


def _git(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def _in_a_checkout() -> bool:
    """Whether this tree is a git checkout of its own (not an unpacked sdist, nor a folder of another repository)."""
    if shutil.which("git") is None:
        return False
    try:
        return _git("rev-parse", "--show-toplevel").strip() == str(ROOT)
    except subprocess.CalledProcessError:
        return False


def tracked_blobs() -> dict[str, list[str]]:
    """Git's index: blob id -> the tracked paths holding that content."""
    paths: dict[str, list[str]] = defaultdict(list)
    for entry in filter(None, _git("ls-files", "--stage", "-z").split("\0")):
        meta, path = entry.split("\t", 1)
        paths[meta.split()[1]].append(path)
    return paths


def blob_sizes(blobs: list[str]) -> dict[str, int]:
    lines = _git("cat-file", "--batch-check=%(objectname) %(objectsize)", stdin="".join(f"{b}\n" for b in blobs))
    return {blob: int(size) for blob, size in (line.split() for line in lines.splitlines())}


def large_copies(paths: dict[str, list[str]], sizes: dict[str, int]) -> list[str]:
    """One line per content over LARGE tracked at two paths or more outside ALLOWED_COPIES."""
    out = []
    for blob, found in sorted(paths.items()):
        counted = sorted(p for p in found if not p.startswith(tuple(ALLOWED_COPIES)))
        if len(counted) > 1 and sizes.get(blob, 0) > LARGE:
            out.append(f"{sizes[blob]:,} bytes x {len(counted)}: {', '.join(counted)}")
    return out


def test_no_large_file_is_tracked_twice() -> None:
    if not _in_a_checkout():
        pytest.skip("needs the git checkout (the index says what is tracked)")
    paths = {blob: found for blob, found in tracked_blobs().items() if len(found) > 1}
    copies = large_copies(paths, blob_sizes(list(paths)))
    assert not copies, (
        "the same large file is tracked more than once; keep one copy (a user-runnable one: fixtures/data/) and name"
        " it in the case's shared.txt (`DEST <- SOURCE`, tests/support/rule_cases.py):\n" + "\n".join(copies)
    )


def test_the_check_sees_a_copy_and_only_a_large_one() -> None:
    data = ["fixtures/data/long/data/long.json", "fixtures/rules/LF045/long/data/long.json"]
    assert large_copies({"a": data}, {"a": LARGE + 1}) == [f"{LARGE + 1:,} bytes x 2: {', '.join(data)}"]
    assert large_copies({"a": data}, {"a": LARGE}) == []  # a small file (a case's train.yaml) may recur
    wild = ["tests/data/wild/one/ds.json", "tests/data/wild/two/ds.json", data[0]]
    assert large_copies({"b": wild}, {"b": LARGE * 4}) == []  # one path counted
