"""Candidate rules from the knowledge files that cfgopt does not implement, with the reason.

Rendered into docs/rules.md under "Not implemented" by scripts/gen_rule_docs.py. Each entry:
(candidate, where it was proposed, why it is not a rule (yet)).
"""

from __future__ import annotations

NOT_IMPLEMENTED: list[tuple[str, str, str]] = []
