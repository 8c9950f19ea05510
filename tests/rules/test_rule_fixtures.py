"""Every rule's fixture cases: exact diagnostics, exact fixed files, idempotent fixes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rule_cases import (
    CASES_DIR,
    all_cases,
    case_args,
    fix_in,
    input_files,
    job_folder,
    lint_blocks,
    parse_expected,
    working_copy,
)

from cfgopt.rules import all_rules

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_case_diagnostics(case: Path) -> None:
    """Position, code, severity, message and fix (applicability and description) of every diagnostic: a
    changed wording fails here until `python scripts/update_rule_fixtures.py` rewrites the snapshot."""
    expected = parse_expected((case / "expected.txt").read_text())
    with job_folder(case) as folder:
        assert lint_blocks(folder, case_args(case)) == expected


BLOCK = re.compile(
    r"\S+:\d+:\d+ [A-Z]+\d{3} (error|warning|info)\n  message: .+(\n    .*)*\n"
    r"  fix(: none| \((safe|unsafe|display-only)\): .+)"
)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_snapshot_records_message_and_fix(case: Path) -> None:
    for block in parse_expected((case / "expected.txt").read_text()):
        assert BLOCK.fullmatch(block), block


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_case_reports_its_own_rule(case: Path) -> None:
    assert f" {case.parent.name} " in (case / "expected.txt").read_text()


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_case_fix(case: Path, tmp_path: Path) -> None:
    args = case_args(case)
    work = working_copy(case, tmp_path / "case")
    fix_in(work, args)
    fixed_dir = case / "fixed"
    for original in input_files(case):
        want = (fixed_dir / original.name) if fixed_dir.exists() else original
        assert (work / original.name).read_bytes() == want.read_bytes(), original.name
    # A second run changes nothing: fixes reach a fixed point.
    snapshot = {f.name: (work / f.name).read_bytes() for f in input_files(case)}
    fix_in(work, args)
    assert {f.name: (work / f.name).read_bytes() for f in input_files(case)} == snapshot


def test_every_rule_has_a_case() -> None:
    with_cases = {p.name for p in CASES_DIR.iterdir() if p.is_dir()}
    assert {r.code for r in all_rules()} <= with_cases
