"""`cfgopt rules`: every rule, as a table (text, markdown) or JSON."""

from __future__ import annotations

from cfgopt.commands.common import add_format_argument

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(rules: argparse.ArgumentParser) -> None:
    add_format_argument(rules, ("full", "json", "markdown"), "full", "full (default: a table), json or markdown")


def run(args: argparse.Namespace) -> int:
    import json

    from cfgopt.rules import all_rules

    docs = [r.docs() for r in all_rules()]
    if args.format == "json":
        print(json.dumps(docs, indent=2))
    elif args.format == "markdown":
        print("| code | name | severity | default | summary |\n| --- | --- | --- | --- | --- |")
        for d in docs:
            on = "on" if d["default"] else "opt-in"
            print(f"| [{d['code']}]({d['code']}.md) | `{d['name']}` | {d['severity']} | {on} | {d['summary']} |")
    else:
        print(f"{'code':7} {'name':32} {'severity':8} {'default':7} summary")
        for d in docs:
            on = "on" if d["default"] else "opt-in"
            print(f"{d['code']:7} {d['name']:32} {d['severity']:8} {on:7} {d['summary']}")
    return 0
