"""The wild set (tests/data/wild/): real configs from public repositories, judged by the real tools.

`verdicts.jsonl` holds the real tools' verdicts (scripts/judge_wild.py, target h100); cfgopt must report an
error on every rejected config and none on an accepted one. DIFFERENCES.md explains every config where the
real tool's verdict differs from the plain parser's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

WILD = ROOT / "tests" / "data" / "wild"
# The projects whose own configs are in the shared real-config corpus (tests/support/oracle_harness.py, CFGOPT_CORPUS):
# the wild set is everything else.
EXCLUDED_REPOS = {"hiyouga/llama-factory", "axolotl-ai-cloud/axolotl", "deepspeedai/deepspeedexamples"}


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (WILD / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def cfgopt_errors() -> dict[str, list[str]]:
    _, out, err = run_cli(["lint", "--format", "json", "--no-config", "--target", "h100", str(WILD)])
    assert out.strip(), err
    errors: dict[str, list[str]] = {}
    for d in json.loads(out)["diagnostics"]:
        if d["severity"] == "error":
            rel = Path(d["file"]).resolve().relative_to(WILD.resolve()).as_posix()
            errors.setdefault(rel, []).append(f"{d['code']} {d['message'][:120]}")
    return errors


def test_every_config_has_its_source_and_a_verdict() -> None:
    sources, verdicts = rows("sources.jsonl"), rows("verdicts.jsonl")
    on_disk = {p.relative_to(WILD).as_posix() for p in WILD.rglob("*") if p.is_file() and p.parent != WILD}
    assert {r["file"] for r in sources} == on_disk
    assert [r["file"] for r in verdicts] == [r["file"] for r in sources]
    for row in sources:
        assert row["repo"].lower() not in EXCLUDED_REPOS, row
        assert len(row["commit"]) == 40 and row["licence"] in ("Apache-2.0", "MIT"), row


def test_no_false_error_and_no_miss() -> None:
    errors = cfgopt_errors()
    verdicts = rows("verdicts.jsonl")
    false_errors = [(v["file"], errors[v["file"]]) for v in verdicts if v["ok"] and v["file"] in errors]
    misses = [(v["file"], v["error"]) for v in verdicts if not v["ok"] and v["file"] not in errors]
    assert not false_errors, false_errors
    assert not misses, misses


def test_every_disagreement_with_the_plain_parser_is_explained() -> None:
    differences = (WILD / "DIFFERENCES.md").read_text(encoding="utf-8")
    for v in rows("verdicts.jsonl"):
        if v["ok"] != v["plain_ok"]:
            assert f"`{v['file']}`" in differences, v["file"]


def test_verdicts_are_the_real_tools() -> None:
    """Oracle group: judging the set again with the real parsers gives the committed verdicts."""
    pytest.importorskip("llamafactory")
    pytest.importorskip("deepspeed")
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import judge_wild

    assert judge_wild.render(judge_wild.judge_all()) == (WILD / "verdicts.jsonl").read_text(encoding="utf-8")
