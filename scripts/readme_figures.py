#!/usr/bin/env python
"""The developers' figures, measured: prints each figure CONTRIBUTING.md states (the README's test command: its
install and run times, the tests collected) beside what this checkout measures, and exits 1 when one is wrong.

Usage: python scripts/readme_figures.py [--time install] [--time tests] [--tolerance 0.25]

Checked on every run (about 15 s on 2 cores: the collection imports every test module):
- the tests collected (`python -m pytest --collect-only -q`), exactly;
- the rules the README, CONTRIBUTING.md and docs/configuration.md name as opt-in (`--extend-select CODE`,
  `extend-select = ["CODE"]`, the "Only the speculative is opt-in: ..." list) against the rules whose `default_on`
  is False (cfgopt/knowledge/rule_catalog.py's OPT_IN).
Measured only when asked, as they take minutes (run them on a quiet machine, then write the figures and the date
into CONTRIBUTING.md):
- `--time install`: `pip install -q --no-cache-dir -e '.[test,oracle]'` and the uninstall beside it, in a new
  virtual environment in a temporary folder (a fresh machine's install: nothing cached), wall time;
- `--time tests`: the README's test command (`DISABLE_VERSION_CHECK=1 CFGOPT_REQUIRE_ORACLE=1 python -m pytest
  -q -n 2`), wall time and the CPU time of its processes.
A timing more than `--tolerance` (default 25%) away from the stated figure is wrong.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FIGURES = ROOT / "CONTRIBUTING.md"  # where the figures of the README's test command are stated
OPT_IN_DOCS = (README, FIGURES, ROOT / "docs" / "configuration.md")
TEST_ENV = {"DISABLE_VERSION_CHECK": "1", "CFGOPT_REQUIRE_ORACLE": "1"}

# The sentences that carry the figures (CONTRIBUTING.md's text with its line breaks as spaces).
INSTALL = re.compile(r"the extras install in (\d+ min \d+ s) \(measured (\d{4}-\d\d-\d\d)")
RUN = re.compile(r"that run took (\d+ min \d+ s) wall and about (\d+) min of CPU \(measured ([\d-]+(?: and [\d-]+)?)")
COLLECTED = re.compile(r"([\d,]+) tests collected \(`pytest --collect-only -q`, (\d{4}-\d\d-\d\d)\)")
OPT_IN_NAMED = re.compile(r"""--extend-select ([A-Z]+\d+)|extend-select = \["([A-Z]+\d+)"\]""")
OPT_IN_LIST = re.compile(r"Only the speculative is opt-in: ([A-Z0-9, -]+?), each")


class Stated(NamedTuple):
    install: tuple[str, str]  # (figure, date)
    run: tuple[str, str, str]  # (wall, CPU minutes, date)
    collected: tuple[int, str]  # (count, date)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def stated(text: str) -> Stated:
    """The figures `text` (CONTRIBUTING.md) states; ValueError naming the one it lacks."""
    flat = _flat(text)
    found = {
        name: pattern.search(flat) for name, pattern in (("install", INSTALL), ("run", RUN), ("collected", COLLECTED))
    }
    missing = [name for name, match in found.items() if match is None]
    if missing:
        raise ValueError(f"CONTRIBUTING.md states no {', '.join(missing)} figure in the form this script reads")
    install, run, collected = (found[name] for name in ("install", "run", "collected"))
    return Stated(install.groups(), run.groups(), (int(collected.group(1).replace(",", "")), collected.group(2)))


def minutes_seconds(text: str) -> float:
    minutes, seconds = re.fullmatch(r"(\d+) min (\d+) s", text).groups()
    return int(minutes) * 60 + int(seconds)


def as_minutes_seconds(seconds: float) -> str:
    return f"{int(seconds // 60)} min {round(seconds % 60)} s"


def collected_count(output: str) -> int:
    """The count in `pytest --collect-only -q`'s last line (`3300 tests collected in 10.84s`)."""
    match = re.search(r"(\d+) tests? collected", output)
    if match is None:
        raise ValueError(f"no count in pytest's output: {output[-300:]}")
    return int(match.group(1))


def collect() -> int:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **TEST_ENV})
    return collected_count(run.stdout)


def _expand(listed: str) -> set[str]:
    """`PF003, PF010-PF014, DS019` -> each code."""
    codes = set()
    for item in (part.strip() for part in listed.split(",")):
        first, _, last = item.partition("-")
        if not last:
            codes.add(first)
            continue
        prefix = first.rstrip("0123456789")
        width = len(first) - len(prefix)
        codes.update(f"{prefix}{n:0{width}d}" for n in range(int(first[len(prefix) :]), int(last[len(prefix) :]) + 1))
    return codes


def opt_in_claims(opt_in: frozenset[str], docs: dict[str, str]) -> list[str]:
    """What `docs` (name -> text: the README, CONTRIBUTING.md, docs/configuration.md) say wrongly about which rules
    are opt-in."""
    wrong = []
    for name, text in docs.items():
        flat = _flat(text)
        named = {a or b for a, b in OPT_IN_NAMED.findall(flat)}
        wrong += [f"{name}: names {code} as opt-in; it is on by default" for code in sorted(named - opt_in)]
        for listed in OPT_IN_LIST.findall(flat):
            if _expand(listed) != set(opt_in):
                wrong.append(f"{name}: lists {listed} as opt-in; the opt-in rules are {', '.join(sorted(opt_in))}")
    return wrong


def opt_in_docs() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in OPT_IN_DOCS}


def time_install() -> float:
    with tempfile.TemporaryDirectory(prefix="cfgopt-install-") as folder:
        venv.EnvBuilder(with_pip=True).create(folder)
        pip = [str(Path(folder) / "bin" / "python"), "-m", "pip"]
        start = time.monotonic()
        subprocess.run([*pip, "install", "-q", "--no-cache-dir", "-e", ".[test,oracle]"], cwd=ROOT, check=True)
        subprocess.run([*pip, "uninstall", "-q", "-y", "torchvision", "torchaudio"], cwd=ROOT, check=True)
        return time.monotonic() - start


def time_tests() -> tuple[float, float]:
    """Wall and CPU seconds of the README's test command (its processes and theirs)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2"], cwd=ROOT, env={**os.environ, **TEST_ENV})
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _within(measured: float, stated_value: float, tolerance: float) -> bool:
    return abs(measured - stated_value) <= tolerance * stated_value


def _line(name: str, said: str, measured: str | None, ok: bool = True) -> str:
    """One figure: what the docs say, what was measured (None: not measured this run), the verdict."""
    if measured is None:
        return f"{name:<18} stated: {said}; not measured (--time)"
    return f"{name:<18} stated: {said:<44} measured: {measured:<26} {'ok' if ok else 'WRONG'}"


def _timings(said: Stated, asked: list[str], tolerance: float) -> list[str]:
    install, run = f"{said.install[0]} ({said.install[1]})", f"{said.run[0]}, {said.run[1]} min CPU ({said.run[2]})"
    lines = [_line("extras install", install, None), _line("test run", run, None)]
    if "install" in asked:
        seconds = time_install()
        ok = _within(seconds, minutes_seconds(said.install[0]), tolerance)
        lines[0] = _line("extras install", install, as_minutes_seconds(seconds), ok)
    if "tests" in asked:
        wall, cpu = time_tests()
        ok = _within(wall, minutes_seconds(said.run[0]), tolerance) and _within(cpu / 60, float(said.run[1]), tolerance)
        lines[1] = _line("test run", run, f"{as_minutes_seconds(wall)}, {cpu / 60:.1f} min CPU", ok)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", action="append", choices=("install", "tests"), default=[])
    parser.add_argument("--tolerance", type=float, default=0.25)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from cfgopt.knowledge.rule_catalog import OPT_IN

    said = stated(FIGURES.read_text())
    wrong = opt_in_claims(OPT_IN, opt_in_docs())
    count, (stated_count, date) = collect(), said.collected
    lines = [
        _line("tests collected", f"{stated_count:,} ({date})", f"{count:,}", count == stated_count),
        _line("opt-in rules named", "each opt-in", f"{len(wrong)} named wrongly", not wrong),
        *_timings(said, args.time, args.tolerance),
    ]
    print("\n".join(lines + wrong))
    return 1 if any(line.endswith("WRONG") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
