"""`os.path.realpath`, asked of the file system once per path and run (`one_run`).

A file's real path is its identity across a run: the engine, the settings resolver, the reports and the rules all
ask for it, and a lint of the seed's YAML asked for the same dozen paths about 100 times, each answer an `lstat`
of every component of the path (16 us on a five-folder path: 1.5 ms of a 7 ms run). Inside `one_run()` each
answer is kept until the run's end; outside any run, and after it, every call asks the file system again.

Why per run and not per process: the editor server keeps one process across edits, and a link made or changed
between two lints must be seen by the second. Within a run cfgopt makes no link and renames no folder (a fix
replaces a file's content at the same path), so an answer kept within the run is the answer asked again. A
relative path is kept with the working directory it was asked from. Runs that overlap (threads) share one memo,
which lives until the last of them ends.
"""

from __future__ import annotations

import os
from pathlib import Path

_memo: dict[object, str] | None = None  # path (with the working directory, when relative) -> real path
_paths: dict[str, Path] = {}  # real path -> its Path, built once (cleared with `_memo`)
_open_runs = 0


class one_run:  # lower-case as contextlib.suppress: a class written as a call, `with one_run():`
    """The block is one run: each path's real path is asked of the file system once inside it. Nested blocks
    (the command's around the engine's) are one run."""

    def __enter__(self) -> None:
        global _memo, _open_runs
        _open_runs += 1
        if _memo is None:
            _memo = {}

    def __exit__(self, *exc_info: object) -> None:
        global _memo, _open_runs
        _open_runs -= 1
        if _open_runs <= 0:
            _open_runs, _memo = 0, None
            _paths.clear()


def realpath(path: str | os.PathLike[str]) -> str:
    """`os.path.realpath(path)`, kept for the rest of the run inside `one_run()`."""
    memo = _memo
    if memo is None:
        return os.path.realpath(path)
    name = os.fspath(path)
    key: object = name if os.path.isabs(name) else (os.getcwd(), name)
    found = memo.get(key)
    if found is None:
        found = memo[key] = os.path.realpath(name)
    return found


def real_path(path: str | os.PathLike[str]) -> Path:
    """`realpath` as a `Path`."""
    if _memo is None:
        return Path(os.path.realpath(path))
    real = realpath(path)
    found = _paths.get(real)
    if found is None:
        found = _paths[real] = Path(real)
    return found
