"""`cfgopt verify CONFIG`: the original config and its fixed version, each run for a few real training steps
(the work is in `cfgopt.verify`; options in `cfgopt.verify.options`)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cfgopt.verify.options import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from cfgopt.verify.command import run as verify

    try:
        return verify(args)
    except RuntimeError as exc:  # the runs could not be made (an offline asset failed to build): one line
        sys.stderr.write(f"cfgopt verify: could not run: {exc}\n")
        return 2
