"""A rule's page, rendered from its docs (`Rule.docs()`): printed by `cfgopt rule CODE`, written to
rules/<CODE>.md by scripts/gen_rule_docs.py, shown on hover by the language server; one renderer, so the three
never differ."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PAGES_DIR = "rules"  # the rule catalog (README.md) and one page per rule, relative to the repository root


def default_selection(doc: dict[str, Any]) -> str:
    """Whether a plain `cfgopt lint` runs the rule, and why not when it does not."""
    if doc["default"]:
        return "on (in the default selection)"
    return f"off (opt-in with `--extend-select {doc['code']}`: {doc['opt_in_because']})"


def render_page(doc: dict[str, Any], fmt: str) -> str:
    """A rule's page from `Rule.docs()`: `markdown` (rules/<CODE>.md) or plain text (`cfgopt rule CODE`)."""
    if fmt == "markdown":
        lines = (
            [
                f"# {doc['code']} `{doc['name']}`",
                "",
                f"**{doc['summary']}**",
                "",
                f"- Severity: {doc['severity']}",
                f"- Default: {default_selection(doc)}",
                f"- Files: {', '.join(doc['kinds'])}",
                "",
                "## Why",
                "",
                doc["why"],
                "",
                "## When the real tool fails",
                "",
                doc["fails_when"],
                "",
                "## Evidence",
                "",
            ]
            + [f"- {e}" for e in doc["evidence"]]
            + ["", "## Example", "", "```", doc["example"], "```", "", "## Fix", "", doc["fix_safety"], ""]
            + ["## Where", "", f"- Code: [`{doc['module']}`](../{doc['module']})"]
            + [
                f"- Cases: [`fixtures/rules/{doc['code']}/`](../fixtures/rules/{doc['code']}/), run by "
                "`tests/rules/test_rule_fixtures.py`",
                "",
            ]
        )
        return "\n".join(lines)
    lines = (
        [
            f"{doc['code']} ({doc['name']}): {doc['summary']}",
            f"severity: {doc['severity']}",
            f"default: {default_selection(doc)}",
            f"files: {', '.join(doc['kinds'])}",
            "",
            "Why:",
            f"  {doc['why']}",
            "",
            "When the real tool fails:",
            f"  {doc['fails_when']}",
            "",
            "Evidence:",
        ]
        + [f"  - {e}" for e in doc["evidence"]]
        + ["", "Example:"]
        + [f"  {line}" for line in doc["example"].splitlines()]
        + ["", "Fix:", f"  {doc['fix_safety']}", ""]
        + ["Where (in cfgopt's repository):", f"  page: {PAGES_DIR}/{doc['code']}.md", f"  code: {doc['module']}"]
        + [f"  cases: fixtures/rules/{doc['code']}/", ""]
    )
    return "\n".join(lines)
