"""`cfgopt verify`'s options (kept apart so that building the CLI parser imports nothing heavy)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cfgopt.argtypes import gpu_count, positive_float, positive_int
from cfgopt.knowledge.targets import NONE, TARGETS
from cfgopt.verify.numerics import LOSS_TOLERANCE


def add_target_argument(p: argparse.ArgumentParser, what: str) -> None:
    """`--target` as `cfgopt lint` names it (the same choices, `none` included), for the runs of verify and tune."""
    p.add_argument(
        "--target",
        default=None,
        choices=[*TARGETS, NONE],
        metavar="NAME",
        help=f"{what}: {', '.join(TARGETS)}; none: no target and no detection (default: detected from this "
        "machine's GPU; docs/targets.md)",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", type=Path, nargs="?", help="a LLaMA-Factory training YAML")
    # 20 is enough: the summary drops at most half the steps as warm-up (comparison.warmup_steps), leaving at
    # least 10 steady ones, over MIN_STEADY_STEPS (4, where two runs of one config agreed within 4%; docs/verify.md)
    p.add_argument("--steps", type=positive_int, default=20, help="optimizer steps per run (default 20)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--fixed", type=Path, help="the fixed config to compare with")
    group.add_argument(
        "--apply-fixes",
        action="store_true",
        help="compare with what `cfgopt fix --unsafe-fixes` makes of it (default when --fixed is absent)",
    )
    p.add_argument("--only-original", action="store_true", help="measure the original config alone")
    p.add_argument("--gpus", type=gpu_count, default=None, help="GPUs to launch on (torchrun); default 1")
    add_target_argument(p, "hardware the fixes are made for")
    p.add_argument(
        "--loss-tolerance",
        type=positive_float,
        default=LOSS_TOLERANCE,
        help=f"largest relative rise of the fixed run's loss over the original's before verify fails "
        f"(default {LOSS_TOLERANCE:g}; docs/verify.md)",
    )
    p.add_argument(
        "--spread",
        choices=("auto", "on", "off"),
        default="auto",
        help="run the original a second time with another seed and widen the tolerance to twice its own spread "
        "(auto: when the fix changes the precision or the optimizer; docs/verify.md)",
    )
    add_run_options(p, timeout=1800)
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON here (- for stdout)")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG of tokens/s and memory per step")


def add_run_options(p: argparse.ArgumentParser, timeout: float) -> None:
    """How runs are made: shared by `cfgopt verify` and `cfgopt tune` (one runner, one set of options)."""
    p.add_argument(
        "--mode",
        choices=("auto", "synthetic", "real"),
        default="auto",
        help="auto: the config's own model and data when local, synthetic stand-ins otherwise",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=default_cache_dir(),
        help="where synthetic models and data are kept between runs, shared by verify and tune "
        "(default: $XDG_CACHE_HOME/cfgopt/verify, else ~/.cache/cfgopt/verify)",
    )
    p.add_argument(
        "--clear-cache",
        action="store_true",
        help="remove the synthetic models and data cached in --cache-dir (alone, or before a run)",
    )
    p.add_argument(
        "--timeout", type=positive_float, default=timeout, help=f"seconds per run before it is killed ({timeout:g})"
    )
    p.add_argument("--keep-temp", action="store_true", help="keep the temporary work folder")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def default_cache_dir() -> Path:
    """The user's cache folder (the XDG base directory spec: $XDG_CACHE_HOME when it is an absolute path, else
    ~/.cache), cfgopt/verify inside it."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "cfgopt" / "verify"
