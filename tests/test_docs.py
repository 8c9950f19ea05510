"""Rule docs stay in one place (the rule modules) and the generated copies stay in sync."""

from __future__ import annotations

import sys

from rule_cases import ROOT

from cfgopt.rules import all_rules

sys.path.insert(0, str(ROOT / "scripts"))
from gen_rule_docs import RULES_DIR, render


def test_generated_rule_docs_are_current() -> None:
    expected = render()
    for path, text in expected.items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run scripts/gen_rule_docs.py"
    assert set(RULES_DIR.glob("*.md")) == {p for p in expected if p.parent == RULES_DIR}


def test_every_rule_is_documented() -> None:
    for rule in all_rules():
        doc = rule.docs()
        assert doc["why"] and doc["fails_when"] and doc["evidence"] and doc["example"], rule.code
        assert rule.name == rule.name.lower() and " " not in rule.name
