"""Argument types shared by the subcommands' parsers: a bad value is a usage error (exit 2, with the
subcommand's usage), caught by argparse before anything runs."""

from __future__ import annotations

import argparse

from cfgopt.text.user_text import integer


def positive_int(text: str) -> int:
    """An integer >= 1 (`--gpus`, `--steps`)."""
    value = integer(text, signed=True, strip=True)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def gpu_count(text: str) -> int:
    """A GPU count (`--gpus`): an integer from 1 to `targets.MAX_GPUS`, as every command judges it."""
    from cfgopt.knowledge.targets import MAX_GPUS

    value = positive_int(text)
    if value > MAX_GPUS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_GPUS}, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (`--timeout`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value
