"""`cfgopt schema export`: JSON Schema files for editors, from the shipped snapshots
(`cfgopt.knowledge.schema_export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(schema_cmd: argparse.ArgumentParser) -> None:
    schema_sub = schema_cmd.add_subparsers(dest="schema_command", required=True, parser_class=type(schema_cmd))
    schema_cmd.subcommands = schema_sub.choices  # type: ignore[attr-defined]
    export = schema_sub.add_parser("export", help="write llamafactory-train.schema.json and deepspeed.schema.json")
    export.add_argument("--out", type=Path, default=Path("."), help="folder to write to (default: .)")
    export.add_argument("--llamafactory-version", metavar="VERSION", default=None, help="default: as for lint")
    export.add_argument("--deepspeed-version", metavar="VERSION", default=None, help="default: as for lint")


def run(args: argparse.Namespace) -> int:
    from cfgopt.commands import UsageError
    from cfgopt.knowledge.schema_export import FILES, export
    from cfgopt.knowledge.versions import resolve_version
    from cfgopt.text.document import shown

    lf = resolve_version("llamafactory", args.llamafactory_version)
    ds = resolve_version("deepspeed", args.deepspeed_version)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {shown(str(args.out))}: not a folder (it names the folder both files go to)")
    try:
        written = export(args.out, lf, ds)
    except OSError as exc:
        sys.stderr.write(shown(f"cfgopt schema export: error: {exc}") + "\n")
        return 2
    for path in written:
        sys.stdout.write(shown(f"wrote {path}") + "\n")
    sys.stdout.write(
        f"(LLaMA-Factory {lf}, DeepSpeed {ds}) In a YAML config: "
        + shown(f"# yaml-language-server: $schema={args.out / FILES['llamafactory']}")
        + "\n"
    )
    return 0
