"""`cfgopt tune CONFIG`: the fastest config that fits, by memory-pruned short runs (the work is in
`cfgopt.tune`; options in `cfgopt.tune.options`)."""

from __future__ import annotations

import argparse
import sys

from cfgopt.commands.verify import clear_cache_first


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cfgopt.tune.options import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    if clear_cache_first(args, "tune"):
        return 0
    from cfgopt.tune.command import run as tune

    try:
        return tune(args)
    except RuntimeError as exc:  # the runs could not be made (an offline asset failed to build): one line
        sys.stderr.write(f"cfgopt tune: could not run: {exc}\n")
        return 2
