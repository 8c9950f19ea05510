#!/usr/bin/env python3
"""Lint and fix time of a sweep script: `cfgopt lint` / `cfgopt fix` on 600 ordinary launch lines (issue 33's
target: lint under 2 s, fix under 4 s on a 2-core machine; linear in the number of lines).

Four shapes: `--key value` lines (an 8B LoRA SFT; learning rate and output folder vary per line; every line
gets a speed plan on the target), the same with `--flash_attn Fa` (a rule's fix on every line), and
`llamafactory-cli train cfg.yaml key=value` lines naming one YAML, and `distinct` lines (each its own
`cutoff_len`: every line planned on its own; `--shapes distinct`). Each command runs `--runs` times in a fresh
process (start-up included); the median wall and CPU seconds are printed as a Markdown table.

    python bench/sweep/sweep.py --lines 600 --runs 5 [--target h200]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARGS = (
    "--model_name_or_path meta-llama/Meta-Llama-3-8B-Instruct --stage sft --do_train --finetuning_type lora "
    "--dataset alpaca_en_demo --template llama3 --cutoff_len 2048 --per_device_train_batch_size 1 "
    "--gradient_accumulation_steps 8 --bf16 --num_train_epochs 3"
)
YAML = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
template: llama3
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
bf16: true
output_dir: out
"""


def sweep(shape: str, lines: int) -> str:
    out = ["#!/bin/bash", "set -e"]
    for i in range(lines):
        lr = f"{(i % 7 + 1) * 1e-5:g}"
        if shape == "yaml":
            out.append(f"llamafactory-cli train sft.yaml learning_rate={lr} output_dir=out/run{i}")
        elif shape == "distinct":  # every line its own job: no plan shared between lines
            out.append(f"llamafactory-cli train {ARGS.replace('2048', str(512 + 8 * i))} --output_dir out/run{i}")
        else:
            extra = " --flash_attn Fa" if shape == "fixes" else ""
            out.append(f"llamafactory-cli train {ARGS} --learning_rate {lr} --output_dir out/run{i}{extra}")
    return "\n".join(out) + "\n"


def timed(argv: list[str], cwd: Path, script: Path, original: str) -> tuple[float, float]:
    """Wall and CPU seconds of one run in a fresh process (the script restored first, for `fix --write`)."""
    script.write_text(original)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed: {run.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", default="h200")
    parser.add_argument("--shapes", default="plans,fixes,yaml", help="comma-separated: plans, fixes, yaml, distinct")
    parser.add_argument("--commands", default="lint,fix", help="comma-separated: lint, fix")
    args = parser.parse_args()
    env_python = [sys.executable, "-m", "cfgopt"]
    print(f"{args.lines} lines, median of {args.runs} runs, `--target {args.target}`, {os.cpu_count()} cores\n")
    print("| shape | command | wall s | cpu s |\n| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "sft.yaml").write_text(YAML)
        script = folder / "sweep.sh"
        commands = {"lint": ["lint"], "fix": ["fix", "--write", "--unsafe-fixes"]}
        for shape in args.shapes.split(","):
            text = sweep(shape, args.lines)
            for command in [commands[c] for c in args.commands.split(",")]:
                argv = [*env_python, *command, "--target", args.target, "sweep.sh"]
                timed(argv, folder, script, text)  # warm-up: the snapshots in the OS cache
                runs = [timed(argv, folder, script, text) for _ in range(args.runs)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                print(f"| {shape} | `cfgopt {' '.join(command)}` | {wall:.2f} | {cpu:.2f} |", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
