#!/usr/bin/env python3
"""The long fuzz run (the short one is tests/adversarial/test_fuzz.py in CI).

    python scripts/fuzz_long.py --examples 20000            # hypothesis, structured + raw inputs
    python scripts/fuzz_long.py --verdicts --examples 2000  # issue 18: count hangs, damaged and rejected files
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from fuzz_targets import (
    JUDGED,
    OUTPUT_ENCODINGS,
    check_fix,
    check_loaders,
    check_outputs,
    json_documents,
    judge_fix,
    real_config_mutations,
    script_documents,
    yaml_documents,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

HANG_S = 5  # issue 18: lint and fix end within 5 s on any input


def _fix_yaml(case: tuple[bytes, bool]) -> None:
    check_fix("cfg.yaml", *case)


def _fix_json(case: tuple[bytes, bool]) -> None:
    check_fix("ds.json", *case)


def _outputs(case: tuple[tuple[str, bytes], str]) -> None:
    check_outputs(*case[0], case[1])


def run_hypothesis(examples: int) -> int:
    failures = 0
    runs = [
        ("loaders on raw bytes", st.binary(max_size=2000), check_loaders),
        ("loaders on near-configs", st.one_of(yaml_documents(), json_documents()), check_loaders),
        ("YAML lint+fix", st.tuples(yaml_documents(), st.booleans()), _fix_yaml),
        ("JSON lint+fix", st.tuples(json_documents(), st.booleans()), _fix_json),
        (
            "outputs on a stdout not UTF-8",
            st.tuples(
                st.one_of(
                    yaml_documents().map(lambda r: ("cfg.yaml", r)), json_documents().map(lambda r: ("ds.json", r))
                ),
                OUTPUT_ENCODINGS,
            ),
            _outputs,
        ),
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


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang


def _target(judge, name: str):
    def target(case, unsafe: bool) -> None:
        raw, kept = case if isinstance(case, tuple) else (case, None)
        judge(name, raw, unsafe, kept)

    return target


def run_verdicts(examples: int) -> int:
    """Issue 18: every input through lint + fix with a 5 s alarm; count hangs, files damaged (a value changed
    that no applied fix names, or a heredoc / multi-line string changed) and files the real loader (OmegaConf,
    duplicate-refusing JSON, `bash -n`) rejects after the fix though it took the original. Never stops early."""
    import signal

    signal.signal(signal.SIGALRM, _alarm)
    totals = {"inputs": 0, "fixed": 0, "hangs": 0, "damaged": 0, "rejected": 0, "crashes": 0}
    shown: list[str] = []

    def judge(name: str, raw: bytes, unsafe: bool, kept: list[str] | None = None) -> None:
        totals["inputs"] += 1
        signal.setitimer(signal.ITIMER_REAL, HANG_S, 0.25)  # re-fires: an alarm swallowed by a gc callback
        try:
            verdicts = judge_fix(name, raw, unsafe, kept)
        except _Hang:
            verdicts = ["hangs"]
        except Exception as exc:  # noqa: BLE001 - count it and go on
            verdicts = [f"crashes: {type(exc).__name__}: {exc}"]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for verdict in verdicts:
            kind = verdict.split(":")[0]
            totals[kind if kind in totals else "crashes"] += 1
            if len(shown) < 20:
                shown.append(f"{verdict}\n    input: {raw!r}")

    runs = [
        ("YAML (anchors, tags, aliases, break characters, suppressions)", yaml_documents(), "cfg.yaml"),
        ("real configs, mutated (same shapes)", real_config_mutations(), "cfg.yaml"),
        ("DeepSpeed JSON", json_documents(), "ds.json"),
        ("shell scripts (heredocs, $(...), backticks, strings)", script_documents(), "run.sh"),
    ]
    print("| target | inputs | fixed | time | hangs | damaged | rejected by the real loader | crashes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, strategy, name in runs:
        totals["fixed"] = JUDGED["fixed"]
        before = dict(totals)
        start = time.perf_counter()

        prop = settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            phases=[Phase.generate],
        )(given(strategy, st.booleans())(_target(judge, name)))
        prop()
        totals["fixed"] = JUDGED["fixed"]
        d = {k: totals[k] - before[k] for k in totals}
        print(
            f"| {label} | {d['inputs']} | {d['fixed']} | {time.perf_counter() - start:.0f} s | {d['hangs']} "
            f"| {d['damaged']} | {d['rejected']} | {d['crashes']} |",
            flush=True,
        )
    for line in shown:
        print(line)
    return 1 if any(totals[k] for k in ("hangs", "damaged", "rejected", "crashes")) else 0


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
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--examples", type=int, default=20000)
    ap.add_argument("--atheris", action="store_true")
    ap.add_argument("--verdicts", action="store_true", help="issue 18: count hangs, damaged and rejected files")
    ap.add_argument("--seconds", type=int, default=600)
    a = ap.parse_args()
    if a.atheris:
        return run_atheris(a.seconds)
    if a.verdicts:
        return run_verdicts(a.examples)
    print("| target | inputs | time | result |\n| --- | --- | --- | --- |")
    return 1 if run_hypothesis(a.examples) else 0


if __name__ == "__main__":
    sys.exit(main())
