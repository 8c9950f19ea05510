"""`cfgopt lint --watch`: lint, then lint again whenever a file under the given paths changes, or a file the last
run read (the DeepSpeed JSON, the dataset, the environment a config names: `user_files.recording_reads`).

Polls modification times (no dependency, works on every filesystem); configs are few and small, so a scan
every second costs nothing noticeable. Ctrl-C stops it (exit 130, as any interrupted cfgopt command).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cfgopt.lint.project_config import CONFIG_NAMES
from cfgopt.loaders.discovery import iter_files
from cfgopt.text.user_files import changed_since, looked_at, recording_reads

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
        if looked_at(path, "is_dir"):
            for root, dirs, _files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                with contextlib.suppress(OSError):
                    seen[Path(root)] = (os.stat(root).st_mtime_ns, 0)
    return seen


def _project_configs(paths: list[Path]) -> list[Path]:
    """The names a project config can have, in each folder walked and in every folder above a path."""
    folders: set[str] = set()
    for path in paths:
        folder = os.path.realpath(path if looked_at(path, "is_dir") else path.parent)
        while folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
        if looked_at(path, "is_dir"):
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
        with recording_reads() as read:
            code = lint_once()
        done += 1
        sys.stderr.write("cfgopt: watching for changes (Ctrl-C stops) ...\n")
        sys.stderr.flush()
        while rounds is None or done < rounds:
            sleep(poll_s)
            if snapshot(paths) != before or changed_since(read):
                sys.stderr.write("cfgopt: files changed, linting again\n")
                break
    return code
