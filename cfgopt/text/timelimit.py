"""A time limit per file: a runaway (a parser or rule that never ends on some input) becomes a one-line
error for that file, exit code 2, and the other files are still linted; a pre-commit hook never hangs.

It uses SIGALRM (`signal.setitimer`), which interrupts Python code in the main thread. Elsewhere (a worker
thread, where `signal.signal` raises ValueError; a platform without setitimer) the limit is not enforced;
cfgopt's own loops are bounded anyway.
`CFGOPT_FILE_TIMEOUT` (seconds, default 10; 0, or a limit beyond `LONGEST_SECONDS` such as `inf`, turns the
limit off) sets it. Every command that reads user files runs under it: the engine per file (lint, fix, and the
job of estimate, verify and tune), doctor per step (`cfgopt/doctor/command.py`).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Iterator

DEFAULT_SECONDS = 10.0
_NOT_MAIN_THREAD = object()


class TimeLimitExceeded(BaseException):
    """A file took longer than the limit. A BaseException, as KeyboardInterrupt: the `except Exception` of a
    loader (PyYAML crashes on some inputs) or of a rule's "internal error" must not take it for theirs."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"gave up after {seconds:g} s")
        self.seconds = seconds


# setitimer's limit (a C timeval): a longer limit (`inf`, `1e300`) is no limit, as 0 is
LONGEST_SECONDS = 10**8


def seconds() -> float:
    """`CFGOPT_FILE_TIMEOUT` in seconds (0: no limit); a value that is not a number is the default."""
    try:
        value = float(os.environ.get("CFGOPT_FILE_TIMEOUT", DEFAULT_SECONDS))
    except ValueError:
        return DEFAULT_SECONDS
    if math.isnan(value):
        return DEFAULT_SECONDS
    return 0.0 if value <= 0 or value > LONGEST_SECONDS else value


def message(exc: TimeLimitExceeded, what: str) -> str:
    return (
        f"{what} took longer than {exc.seconds:g} s and was stopped; this file is not checked "
        "(please report this; CFGOPT_FILE_TIMEOUT=SECONDS changes the limit)"
    )


@contextlib.contextmanager
def time_limit(limit: float | None = None) -> Iterator[None]:
    """Raise TimeLimitExceeded in the block after `limit` seconds (default: `seconds()`). Nested: an outer
    limit already running is left in charge."""
    limit = seconds() if limit is None else limit
    if limit <= 0 or not hasattr(signal, "setitimer") or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def expire(signum, frame):
        raise TimeLimitExceeded(limit)

    try:
        previous = signal.signal(signal.SIGALRM, expire)
    except ValueError:  # not the main thread (threading is not imported to ask: start-up time)
        previous = _NOT_MAIN_THREAD
    if previous is _NOT_MAIN_THREAD:
        yield
        return
    # Re-fire every 0.25 s after the limit: an exception raised where Python swallows it (a gc callback,
    # a __del__) does not end the block, the next one will.
    signal.setitimer(signal.ITIMER_REAL, limit, 0.25)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
