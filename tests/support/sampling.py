"""The default test run samples the slow parametrised tests; `--full` (or CFGOPT_FULL_TESTS=1) runs all.

A test or parameter marked `slow` (`@pytest.mark.slow`, or left out of `params`' sample) runs only in a full
run: tests/conftest.py skips it otherwise, saying how to run it; `-m "not slow"` leaves it out of either.

A sample is deterministic: the items whose stable hash (of their id) is smallest, so every run, on every
machine, checks the same subset, and adding one item moves at most one other out of it. tests/conftest.py
sets CFGOPT_FULL_TESTS=1 for `--full` before the test modules are collected.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def full() -> bool:
    """True when every example runs (`--full`, CFGOPT_FULL_TESTS=1: CI)."""
    return os.environ.get("CFGOPT_FULL_TESTS") == "1"


def _rank(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def default_sample(items: Sequence[T], count: int, key: Callable[[T], str] = str) -> list[T]:
    """`count` of `items`, chosen by a stable hash of `key(item)`, in their original order: what a default run
    checks."""
    if len(items) <= count:
        return list(items)
    chosen = set(sorted(range(len(items)), key=lambda i: _rank(key(items[i])))[:count])
    return [item for i, item in enumerate(items) if i in chosen]


def sample(items: Sequence[T], count: int, key: Callable[[T], str] = str) -> list[T]:
    """All of `items` in a full run; else their `default_sample`."""
    return list(items) if full() else default_sample(items, count, key)


def examples(full_count: int, sampled_count: int) -> int:
    """How many generated examples a property test draws: `full_count` in a full run."""
    return full_count if full() else sampled_count


FULL_ONLY = "not in the default sample: runs with --full (or CFGOPT_FULL_TESTS=1)"


def params(items: Sequence[T], count: int, key: Callable[[T], str] = str) -> list[Any]:
    """`items` as pytest parameters: those of the default sample plain, the others marked `slow` (a default run
    reports them skipped, with how to run them, so it shows what it left out; tests/conftest.py)."""
    kept = {id(item) for item in default_sample(items, count, key)}
    return [
        pytest.param(
            *(item if isinstance(item, tuple) else (item,)),
            marks=() if id(item) in kept else pytest.mark.slow,
        )
        for item in items
    ]
