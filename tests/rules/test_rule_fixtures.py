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
    shared_files,
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


SHARING = [case for case in CASES if shared_files(case)]


@pytest.mark.parametrize("case", SHARING, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_files_are_there_once(case: Path) -> None:
    """A shared.txt names files that exist outside every rule case (a case never reads another's), each put where
    the case holds no file of its own (a copy left beside the manifest would shadow the shared one)."""
    for rel, source in shared_files(case).items():
        assert source.is_file() and CASES_DIR not in source.resolve().parents, f"{case}: {rel} <- {source}"
        assert not (case / rel).exists(), f"{case / rel} is both in the case and in its shared.txt"


def test_a_shared_file_is_in_place_in_the_working_copy(tmp_path: Path) -> None:
    case = next(iter(SHARING))
    work = working_copy(case, tmp_path / "case")
    assert all((work / rel).read_bytes() == source.read_bytes() for rel, source in shared_files(case).items())
    assert not (work / "expected.txt").exists() and not (work / "fixed").exists()


@pytest.mark.parametrize("line", ["data/x.json fixtures/data/x.json", "../x.json <- fixtures/data/x.json", " <- a"])
def test_a_bad_manifest_line_is_refused(tmp_path: Path, line: str) -> None:
    (tmp_path / "shared.txt").write_text(f"# a comment\n{line}\n")
    with pytest.raises(ValueError, match=r"shared\.txt:2: expected `DEST <- SOURCE`"):
        shared_files(tmp_path)
