"""`cfgopt tune`'s options (kept apart so that building the CLI parser imports nothing heavy)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cfgopt.argtypes import gpu_count, positive_int
from cfgopt.plan.space import KNOB_NAMES as KNOBS  # one list of knobs: the search space's
from cfgopt.verify.options import add_run_options, add_target_argument


def _knobs(text: str) -> tuple[str, ...]:
    names = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in names if k not in KNOBS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown knob(s) {', '.join(bad)}; choose from {', '.join(KNOBS)}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", type=Path, nargs="?", help="a LLaMA-Factory training YAML")
    p.add_argument("--budget", type=float, default=30.0, help="minutes of runs to spend (default 30)")
    p.add_argument("--gpus", type=gpu_count, default=None, help="GPUs to launch on (torchrun); default 1")
    p.add_argument("--steps", type=positive_int, default=10, help="optimizer steps per candidate (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="first steps not timed (default 3)")
    p.add_argument(
        "--allow-packing",
        action="store_true",
        help="also try packing (SFT only; it changes what each batch holds, so it is opt-in)",
    )
    p.add_argument(
        "--knobs",
        type=_knobs,
        default=KNOBS,
        help=f"knobs to search, comma-separated (default: all of {','.join(KNOBS)}; pure_bf16 and optim only "
        "for a full or freeze fine-tune; optim values: adamw_torch_fused, adamw_bnb_8bit (bitsandbytes), "
        "adafactor, adamw_torch_8bit_sr (torchao's 8-bit AdamW with bf16 stochastic rounding, with pure_bf16: "
        "`optim: adamw_torch_8bit`, `optim_args: bf16_stochastic_round=True`), each where the machine has it)",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="apply the winning config to the YAML")
    group.add_argument("--diff", action="store_true", help="print the winning config as a diff (the default)")
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="results cache, for resuming (default: <config>.cfgopt-tune.json beside the config)",
    )
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON here (- for stdout)")
    add_target_argument(p, "whose memory the candidates must fit")
    p.add_argument("--memory-margin", type=float, default=0.10, help="headroom kept below the GPU memory (0.10)")
    p.add_argument(
        "--patience",
        type=int,
        default=6,
        help="stop after this many runs in a row without a 1%% gain (default 6; 0 = run until the budget)",
    )
    p.add_argument(
        "--min-gain", type=float, default=0.03, help="a change must be this much faster than the baseline (0.03)"
    )
    p.add_argument("--max-micro", type=int, default=64, help="largest micro batch tried (default 64)")
    add_run_options(p, timeout=900)
