"""The per-file time limit (`cfgopt.text.timelimit.time_limit`): a block past its limit raises TimeLimitExceeded,
an outer limit stays in charge of a nested one, and the alarm and the SIGALRM handler are as they were after it,
whether the block ends, raises or runs out of time."""

from __future__ import annotations

import signal
import time

import pytest

from cfgopt.text.timelimit import TimeLimitExceeded, time_limit


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _as_before(handler: object) -> None:
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) == handler


def test_a_block_past_its_limit_is_stopped() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(TimeLimitExceeded) as stopped, time_limit(0.05):
        _spin(5)
    assert stopped.value.seconds == 0.05
    _as_before(before)


def test_a_block_within_its_limit_leaves_nothing_behind() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with time_limit(5):
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 5
    _as_before(before)


def test_an_error_in_the_block_leaves_nothing_behind() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(KeyError), time_limit(5):
        raise KeyError("x")
    _as_before(before)


def test_an_outer_limit_stays_in_charge() -> None:
    before = signal.getsignal(signal.SIGALRM)
    # the inner limit is left to the outer one: its block ends at the outer limit
    with pytest.raises(TimeLimitExceeded) as stopped, time_limit(0.05), time_limit(100):
        _spin(5)
    assert stopped.value.seconds == 0.05
    _as_before(before)


def test_no_limit_sets_no_alarm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CFGOPT_FILE_TIMEOUT", "0")
    with time_limit():
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
