"""`cfgopt verify CONFIG`: the original config and its fixed version, each run for a few real training steps
(the work is in `cfgopt.verify`; options in `cfgopt.verify.options`)."""

from __future__ import annotations

import argparse
import sys

from cfgopt.commands import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cfgopt.verify.options import add_arguments as add

    add(parser)


def clear_cache_first(args: argparse.Namespace, command: str) -> bool:
    """`--clear-cache`: empty the synthetic-asset cache; True when there is nothing else to do (no config).
    Without it, a config is required."""
    if args.clear_cache:
        from cfgopt.verify.cache import clear_command

        sys.stderr.write(clear_command(args.cache_dir, command) + "\n")
        return args.config is None
    if args.config is None:
        raise UsageError("a training config is required (or --clear-cache alone)")
    return False


def run(args: argparse.Namespace) -> int:
    if clear_cache_first(args, "verify"):
        return 0
    from cfgopt.verify.command import run as verify

    try:
        return verify(args)
    except RuntimeError as exc:  # the runs could not be made (an offline asset failed to build): one line
        sys.stderr.write(f"cfgopt verify: could not run: {exc}\n")
        return 2
