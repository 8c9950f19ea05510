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

import math
import os

try:  # the C module under `signal`: the same calls, without the enum classes signal.py builds at import (0.5 ms of
    # a lint's start-up); a handler comes back as the int or function it is, which both modules take back
    import _signal as signal
except ImportError:  # an interpreter without it
    import signal

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


class time_limit:  # lower-case as contextlib.suppress: a class written as a call, `with time_limit():`
    """Raise TimeLimitExceeded in the block after `limit` seconds (default: `seconds()`). Nested: an outer
    limit already running is left in charge. A class, not a `contextlib.contextmanager`: the lint path, which
    enters one per file, does without contextlib (its import, 0.4 ms of start-up)."""

    def __init__(self, limit: float | None = None) -> None:
        self.limit = seconds() if limit is None else limit
        self._previous: object = _NOT_MAIN_THREAD  # the SIGALRM handler to put back; this one: no timer set

    def __enter__(self) -> None:
        limit = self.limit
        if limit <= 0 or not hasattr(signal, "setitimer") or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
            return

        def expire(signum, frame):
            raise TimeLimitExceeded(limit)

        try:
            self._previous = signal.signal(signal.SIGALRM, expire)
        except ValueError:  # not the main thread (threading is not imported to ask: start-up time)
            return
        # Re-fire every 0.25 s after the limit: an exception raised where Python swallows it (a gc callback,
        # a __del__) does not end the block, the next one will.
        signal.setitimer(signal.ITIMER_REAL, limit, 0.25)

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is _NOT_MAIN_THREAD:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)
        self._previous = _NOT_MAIN_THREAD
