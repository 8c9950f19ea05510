"""`cfgopt rule CODE`: one rule's page, rendered from its module's docs by `rules.pages` (the renderer that also
writes rules/<CODE>.md, scripts/gen_rule_docs.py, and the language server's hover), so they never differ."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(rule: argparse.ArgumentParser) -> None:
    rule.add_argument("code", help="a rule code, e.g. LF003")
    from cfgopt.commands.common import add_format_argument

    add_format_argument(
        rule, ("full", "json", "markdown"), "full", "full (default: the page as text), json or markdown"
    )


def run(args: argparse.Namespace) -> int:
    import json

    from cfgopt.rules import by_code
    from cfgopt.rules.pages import render_page

    rule = by_code(args.code)
    if rule is None:
        sys.stderr.write(f"cfgopt: error: no rule {args.code!r} (see `cfgopt rules`)\n")
        return 2
    doc = rule.docs()
    print(json.dumps(doc, indent=2) if args.format == "json" else render_page(doc, args.format))
    return 0
