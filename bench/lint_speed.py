#!/usr/bin/env python3
"""Cold-start timing of `cfgopt lint`: every run is a fresh interpreter, as in pre-commit or CI.

Usage: python bench/lint_speed.py [--runs 20] [--corpus PATH] [--fresh-install]
  (default corpus: shared/corpus beside the checkout)
Prints a Markdown table (median / p90 / max wall seconds, peak RSS) to paste into bench/results.md, with the
interpreter's own floor (`python -c pass`, `python -c "import yaml"`) measured the same way.
--fresh-install: time a `pip install .` into a new virtual environment (as pre-commit installs a hook), not the
current environment's `cfgopt`; an editable install (`pip install -e .`) adds its import hook to every start
(about 25 ms here).
Targets: one file < 0.300 s cold on the 2-core machine and the whole corpus < 2 s (issue 2); one YAML with
the JSON it names at most 0.150 s median (issue 15). Wall time depends on how busy the machine is: the
`cpu s` column (user + system time of the child) is the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cfgopt_command() -> list[str]:
    exe = shutil.which("cfgopt")
    return [exe] if exe else [sys.executable, "-m", "cfgopt"]


def fresh_install(folder: Path) -> list[str]:
    """`pip install .` into a new virtual environment in `folder`, bytecode compiled (pip's default); its
    `cfgopt` console script."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "--compile", str(ROOT)]
    subprocess.run(pip, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    return [str(folder / "bin" / "cfgopt")]


def time_runs(args: list[str], runs: int, command: list[str] | None = None) -> tuple[list[float], list[float], float]:
    """Wall and CPU (user + system) seconds of each cold run, and the peak RSS so far in MiB."""
    times, cpu = [], []
    for _ in range(runs):
        start = time.perf_counter()
        quiet = subprocess.DEVNULL
        child = subprocess.Popen((command or cfgopt_command()) + args, cwd=ROOT, stdout=quiet, stderr=quiet)
        _, _, usage = os.wait4(child.pid, 0)
        times.append(time.perf_counter() - start)
        cpu.append(usage.ru_utime + usage.ru_stime)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return times, cpu, peak_kib / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--fresh-install", action="store_true", help="time a `pip install .` in a new venv")
    a = ap.parse_args()
    if a.fresh_install:
        with tempfile.TemporaryDirectory(prefix="cfgopt-bench-") as tmp:
            return report(a, fresh_install(Path(tmp) / "venv"))
    return report(a, cfgopt_command())


def report(a: argparse.Namespace, command: list[str]) -> int:
    python = str(Path(command[0]).with_name("python")) if command[0].endswith("cfgopt") else sys.executable
    cases = [
        ("one LLaMA-Factory YAML (no DeepSpeed)", ["lint", "fixtures/rules/LF003/flash-attn/train.yaml"]),
        ("one DeepSpeed JSON", ["lint", "fixtures/seed/ds_z3_config.json"]),
        ("seed YAML + the JSON it names", ["lint", "fixtures/seed/llama3_lora_sft.yaml"]),
        ("all seed fixtures (YAML, JSON, .sh)", ["lint", "fixtures/seed"]),
        (f"whole corpus ({a.corpus.name}, 177 files)", ["lint", "--no-config", str(a.corpus)]),
    ]
    print(
        f"Host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"command `{' '.join(command)}`, {a.runs} cold runs each\n"
    )
    print("| case | median s | p90 s | max s | cpu s (median) |\n| --- | --- | --- | --- | --- |")
    floor = [
        ("floor: `python -c pass`", [python, "-c", "pass"]),
        ("floor: `python -c 'import yaml'`", [python, "-c", "import yaml"]),
    ]
    for label, argv in floor + [(label, command + args) for label, args in cases]:
        times, cpu, _ = time_runs(argv[1:], a.runs, argv[:1])
        times.sort()
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        median, cpu_median = statistics.median(times), statistics.median(cpu)
        print(f"| {label} | {median:.3f} | {p90:.3f} | {max(times):.3f} | {cpu_median:.3f} |")
    _, _, peak = time_runs(["lint", "--no-config", str(a.corpus)], 1, command)
    print(f"\nPeak RSS of a cfgopt process: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
