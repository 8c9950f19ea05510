"""Argument types shared by the subcommands' parsers: a bad value is a usage error (exit 2, with the
subcommand's usage), caught by argparse before anything runs."""

from __future__ import annotations

from cfgopt.text.user_text import integer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def refuse(message: str) -> NoReturn:
    """argparse's usage error for a value an option's type refuses; argparse is imported only then (a short run
    whose words `cfgopt.commands.fast_args` reads never imports it)."""
    import argparse

    raise argparse.ArgumentTypeError(message) from None  # inside an `except`: the message says it all


def positive_int(text: str) -> int:
    """An integer >= 1 (`--gpus`, `--steps`)."""
    value = integer(text, signed=True, strip=True)
    if value is None:
        refuse(f"{text!r} is not an integer")
    if value < 1:
        refuse(f"must be at least 1, got {value}")
    return value


def gpu_count(text: str) -> int:
    """A GPU count (`--gpus`): an integer from 1 to `targets.MAX_GPUS`, as every command judges it."""
    from cfgopt.knowledge.targets import MAX_GPUS

    value = positive_int(text)
    if value > MAX_GPUS:
        refuse(f"must be at most {MAX_GPUS}, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (`--timeout`)."""
    try:
        value = float(text)
    except ValueError:
        refuse(f"{text!r} is not a number")
    if not value > 0:
        refuse(f"must be greater than 0, got {text}")
    return value
