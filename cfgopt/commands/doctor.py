"""`cfgopt doctor [CONFIG...]`: the environment of this node (packages, builds, GPUs, launcher variables), read
without importing torch or the training packages, checked against each training config (cfgopt/doctor/,
docs/doctor.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cfgopt.commands.common import FORMATS, add_format_argument, add_outcome_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[],  # none named: the current folder is walked, and the run says so
        help="training configs, launch scripts or folders to check (default: the current folder and every folder "
        "below it, which the run names)",
    )
    add_format_argument(
        parser, FORMATS, "full", "as `cfgopt lint`: full (default), concise, json, json-lines, github, sarif, junit"
    )
    add_outcome_arguments(parser, "lowest severity that makes the exit code 1 (default: warning)")
    parser.add_argument(
        "--root",
        default=None,
        help="read /sys, /proc, /opt/rocm and /usr/local/cuda under this folder (default: /, or CFGOPT_SYSFS_ROOT)",
    )
    parser.add_argument(
        "--write-environment",
        nargs="?",
        const="cfgopt-environment.json",
        default=None,
        metavar="FILE",
        help="write this node's training packages to FILE (default: cfgopt-environment.json), to commit beside "
        "the configs: lint, fix and estimate then plan for this node from any machine (docs/environment.md)",
    )
    parser.add_argument(
        "--site-packages",
        action="append",
        default=[],
        metavar="DIR",
        help="read installed packages from DIR instead of this interpreter's path (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from cfgopt.doctor.command import run as doctor

    return doctor(args)
