"""SIGTERM and SIGHUP raised as an interrupt, so whatever cfgopt must undo is undone as for Ctrl-C.

A CI job's timeout and a cancelled pre-commit run send SIGTERM, a closed terminal SIGHUP, not Ctrl-C. Python's
default for both is to die at once, skipping every `finally` and `except BaseException`: `fix --write` would
leave its `.NAME.XXXX.cfgopt-tmp` beside the config (`cfgopt.text.writer`), `verify` / `tune` their trainer on
the GPU and their work folder on disk (`cfgopt.verify.processes`). Within `interrupt_on_termination` both raise
`Terminated`, a KeyboardInterrupt, so the same clean-up runs and the exit code is the shell's (143, 129).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised as an interrupt so every `except KeyboardInterrupt` cleans up the same way."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(exc: KeyboardInterrupt) -> int:
    """The shell's convention: 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else signal.SIGINT)


def describe(exc: KeyboardInterrupt) -> str:
    return f"terminated ({signal.Signals(exc.signum).name})" if isinstance(exc, Terminated) else "interrupted"


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise `Terminated` in the main thread; a second signal while
    cleaning up is ignored (it must not cut the clean-up short). Off the main thread (no handlers can be
    installed there) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        if received:
            return
        received.append(signum)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in TERMINATING}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
