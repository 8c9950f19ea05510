"""`Rule.triggers` only saves time: a rule skipped because none of its trigger keys is in a file must have had
nothing to say about it. Every rule fixture, the seed and clean fixtures, the wild set and (when present) the
real-config corpus are linted with every rule selected, on two targets, with and without the skipping: the
findings must be the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from oracle_harness import CORPUS
from rule_cases import ROOT, job_folder
from sampling import params

from cfgopt.lint.engine import build_project
from cfgopt.lint.project_config import CommandLine, Resolver
from cfgopt.rules import all_rules

FIXTURES = ROOT / "fixtures"
WILD = ROOT / "tests" / "data" / "wild"


def _folders() -> list[Path]:
    cases = sorted(p for p in (FIXTURES / "rules").glob("*/*") if p.is_dir())
    wild = sorted(p for p in WILD.iterdir() if p.is_dir())
    return [*cases, FIXTURES / "seed", FIXTURES / "clean", *wild]


def _findings(folder: Path, target: str, skip: bool) -> list[tuple[str, int, int, str, str]]:
    resolver = Resolver(CommandLine(target=target, select=["ALL"]))
    project = build_project([folder], resolver)
    project.skip_untriggered = skip
    return [(str(d.path), d.start, d.end, d.code, d.message) for d in project.diagnostics()]


@pytest.mark.parametrize("target", params(["mi300x", "h100"], 1))  # one target by default, both with --full
def test_triggers_never_hide_a_finding(target: str) -> None:
    different = []
    for folder in _folders():
        with job_folder(folder) as where:  # a rule case with its shared data in place
            with_skip, without = _findings(where, target, True), _findings(where, target, False)
        if with_skip != without:
            missing = sorted(set(without) - set(with_skip))
            different.append(f"{folder.relative_to(ROOT)}: {missing[:3]}")
    assert not different, "\n".join(different)


def test_triggers_never_hide_a_finding_in_the_corpus() -> None:
    if not CORPUS.is_dir():
        pytest.skip("needs the real-config corpus: shared/corpus beside the checkout, or CFGOPT_CORPUS=<folder>")
    for target in ("mi300x", "h100"):
        assert _findings(CORPUS, target, True) == _findings(CORPUS, target, False)


def test_triggers_are_top_level_key_names() -> None:
    for rule in all_rules():
        if rule.triggers is not None:
            assert rule.triggers and all(isinstance(k, str) and k and "." not in k for k in rule.triggers), rule.code
