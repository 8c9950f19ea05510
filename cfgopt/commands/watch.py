"""`cfgopt lint --watch`: lint, then lint again whenever a file under the given paths changes.

Polls modification times (no dependency, works on every filesystem); configs are few and small, so a scan
every second costs nothing noticeable. Ctrl-C stops it (exit 130, as any interrupted cfgopt command).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cfgopt.lint.project_config import CONFIG_NAMES
from cfgopt.loaders.discovery import iter_files

POLL_S = 1.0


def snapshot(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    """(mtime, size) of every file lint would consider, of the folders (a file added or removed), and of every
    project config that can apply to them (in the folders walked and above them: an edited `exclude` or
    `select` changes the next run)."""
    seen: dict[Path, tuple[int, int]] = {}
    for path in [p for p, _explicit in iter_files(paths)] + _project_configs(paths):
        try:
            st = path.stat()
        except OSError:
            continue
        seen[path] = (st.st_mtime_ns, st.st_size)
    for path in paths:
        if path.is_dir():
            for root, dirs, _files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                seen[Path(root)] = (os.stat(root).st_mtime_ns, 0)
    return seen


def _project_configs(paths: list[Path]) -> list[Path]:
    """The names a project config can have, in each folder walked and in every folder above a path."""
    folders: set[str] = set()
    for path in paths:
        folder = os.path.realpath(path if path.is_dir() else path.parent)
        while folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
        if path.is_dir():
            for root, dirs, _files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                folders.add(os.path.realpath(root))
    return [Path(folder, name) for folder in sorted(folders) for name in CONFIG_NAMES]


def watch(
    paths: list[Path],
    lint_once: Callable[[], int],
    poll_s: float = POLL_S,
    rounds: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run `lint_once` now and after each change; `rounds` (tests) stops after that many lint runs."""
    done = 0
    code = 0
    while rounds is None or done < rounds:
        before = snapshot(paths)
        code = lint_once()
        done += 1
        sys.stderr.write("cfgopt: watching for changes (Ctrl-C stops) ...\n")
        sys.stderr.flush()
        while rounds is None or done < rounds:
            sleep(poll_s)
            if snapshot(paths) != before:
                sys.stderr.write("cfgopt: files changed, linting again\n")
                break
    return code
