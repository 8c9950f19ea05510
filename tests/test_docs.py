"""Rule docs stay in one place (the rule modules) and the generated copies stay in sync."""

from __future__ import annotations

import sys

from rule_cases import ROOT

from cfgopt.rules import all_rules

sys.path.insert(0, str(ROOT / "scripts"))
from gen_rule_docs import RULES_DIR, render


def test_generated_rule_docs_are_current() -> None:
    for name, text in render().items():
        assert (RULES_DIR / name).read_text() == text, f"rules/{name} is stale: run scripts/gen_rule_docs.py"


def test_every_rule_is_documented() -> None:
    for rule in all_rules():
        doc = rule.docs()
        assert doc["why"] and doc["fails_when"] and doc["evidence"] and doc["example"], rule.code
        assert rule.name == rule.name.lower() and " " not in rule.name


def test_architecture_lists_every_rule() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    for rule in all_rules():
        assert rule.code in text, f"docs/architecture.md does not mention {rule.code}"
