"""Stopping what `cfgopt verify` / `cfgopt tune` started, whatever stops them.

A CI job's timeout sends SIGTERM (a closed terminal SIGHUP), not Ctrl-C. Python's default for both is to die
at once, which leaves the trainer and its children running (at full CPU or on the GPU) and the temporary
work folder on disk. `interrupt_on_termination` (cfgopt.text.termination, which `fix --write` uses too) turns
them into an interrupt like Ctrl-C, so that the same path runs: the runner kills the children and the command
removes its folders.

Killing "the process group" of the child is not enough: torchrun starts each worker in a session of its own
(torch.distributed.elastic's subprocess handler), so `kill_tree` kills every process descended from the
child, found in /proc before the first signal (once torchrun is gone its workers are re-parented to init and
can no longer be told apart).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cfgopt.text.termination import interrupt_on_termination
from cfgopt.text.user_files import read_text_bounded
from cfgopt.text.user_text import integer


@contextlib.contextmanager
def work_folder(command: str, make: Callable[[], Path], keep: bool) -> Iterator[Path]:
    """One command's work folder, under `interrupt_on_termination`: removed at the end however the block ends
    (`--keep-temp`: kept, and said). Handle the interrupt inside the block: its message comes before the clean-up."""
    with interrupt_on_termination():
        work = make()
        try:
            yield work
        finally:
            if keep:
                sys.stderr.write(f"cfgopt {command}: work folder kept at {work}\n")
            else:
                remove_folder(work)


def remove_folder(path: Path) -> None:
    """Remove a temporary folder even when a signal arrives meanwhile: the interrupt it raises would leave the
    folder half removed, so the removal starts again (a second signal is ignored by then:
    `cfgopt.text.termination`)."""
    while True:
        try:
            shutil.rmtree(path, ignore_errors=True)
            return
        except KeyboardInterrupt:
            continue


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), which tells a process from a later one that
    reuses its id; None when it is gone (or a zombie: dead, waiting for its parent to read its status)."""
    try:
        fields = read_text_bounded(f"/proc/{pid}/stat", 1 << 16).rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        pid = integer(entry.name)
        if pid is None:
            continue
        try:
            parent = integer(read_text_bounded(entry / "stat", 1 << 16).rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    return children


def descendants(pid: int) -> dict[int, str]:
    """Every process below `pid` (children, theirs, ...) with its start time; empty without /proc."""
    children = _children_map()
    found: dict[int, str] = {}
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        started = _start_time(child)
        if started is not None and child not in found:
            found[child] = started
            todo.extend(children.get(child, []))
    return found


def _signal_all(proc: subprocess.Popen, others: dict[int, str], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the child's own group (it was started in a new session)
    for pid, started in others.items():
        if _start_time(pid) != started:
            continue  # gone (or its id reused by another process)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), sig)  # a torchrun worker leads a session of its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _all_gone(proc: subprocess.Popen, others: dict[int, str]) -> bool:
    return proc.poll() is not None and all(_start_time(pid) != started for pid, started in others.items())


def kill_tree(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the child and everything below it; SIGKILL to whatever is still there after `grace_s`."""
    others = descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        others.update(descendants(proc.pid))  # started meanwhile
        _signal_all(proc, others, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if _all_gone(proc, others):
                return
            time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
