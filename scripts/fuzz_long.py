#!/usr/bin/env python3
"""The long fuzz run (the short one is tests/test_fuzz.py in CI).

    python scripts/fuzz_long.py --examples 20000            # hypothesis, structured + raw inputs
    python scripts/fuzz_long.py --atheris --seconds 600     # coverage-guided, raw bytes into the loaders
                                                            # and the whole lint + fix path (pip install atheris)

Prints a summary (inputs tried, time, failures) to paste into bench/fuzz.md. A failure prints the input.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_targets import check_fix, check_loaders, json_documents, yaml_documents
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _fix_yaml(case: tuple[bytes, bool]) -> None:
    check_fix("cfg.yaml", *case)


def _fix_json(case: tuple[bytes, bool]) -> None:
    check_fix("ds.json", *case)


def run_hypothesis(examples: int) -> int:
    failures = 0
    runs = [
        ("loaders on raw bytes", st.binary(max_size=2000), check_loaders),
        ("loaders on near-configs", st.one_of(yaml_documents(), json_documents()), check_loaders),
        ("YAML lint+fix", st.tuples(yaml_documents(), st.booleans()), _fix_yaml),
        ("JSON lint+fix", st.tuples(json_documents(), st.booleans()), _fix_json),
    ]
    for label, strategy, target in runs:
        start = time.perf_counter()
        prop = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)(
            given(strategy)(target)
        )

        try:
            prop()
            status = "ok"
        except Exception:  # noqa: BLE001 - report every failure, then go on with the other targets
            failures += 1
            status = "FAILED"
            traceback.print_exc()
        print(f"| {label} | {examples} | {time.perf_counter() - start:.0f} s | {status} |", flush=True)
    return failures


def run_atheris(seconds: int) -> int:
    import atheris
    import fuzz_targets

    atheris.instrument_all()  # coverage feedback over every loaded module (cfgopt, PyYAML's Python parts, ...)

    def one_input(data: bytes) -> None:
        fuzz_targets.check_loaders(data)
        if len(data) < 600:
            name = "ds.json" if data[:1] == b"{" else "cfg.yaml"
            fuzz_targets.check_fix(name, data, unsafe=bool(len(data) % 2))

    atheris.Setup([sys.argv[0], f"-max_total_time={seconds}", "-rss_limit_mb=4096"], one_input)
    atheris.Fuzz()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=20000)
    ap.add_argument("--atheris", action="store_true")
    ap.add_argument("--seconds", type=int, default=600)
    a = ap.parse_args()
    if a.atheris:
        return run_atheris(a.seconds)
    print("| target | inputs | time | result |\n| --- | --- | --- | --- |")
    return 1 if run_hypothesis(a.examples) else 0


if __name__ == "__main__":
    sys.exit(main())
