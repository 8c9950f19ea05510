"""`cfgopt schema export`: JSON Schema files for editors, from the shipped snapshots
(`cfgopt.knowledge.schema_export`), for the releases `cfgopt lint .` judges this folder for."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.settings import Settings

# the modeline's own words: yaml-language-server resolves a relative `$schema` path against the folder of the YAML
# file it is in (yamlSchemaService.ts `getSchemaForResource`: `path.resolve(path.parse(fsPath).dir, modeline)`)
MODELINE = "# yaml-language-server: $schema="


def add_arguments(schema_cmd: argparse.ArgumentParser) -> None:
    schema_sub = schema_cmd.add_subparsers(dest="schema_command", required=True, parser_class=type(schema_cmd))
    schema_cmd.subcommands = schema_sub.choices  # type: ignore[attr-defined]
    export = schema_sub.add_parser("export", help="write llamafactory-train.schema.json and deepspeed.schema.json")
    export.add_argument("--out", type=Path, default=Path("."), help="folder to write to (default: .)")
    as_lint = (
        "(default: as `cfgopt lint .` judges this folder: the project config's, else the repository's dependency "
        "pins or the job's environment, else the newest)"
    )
    export.add_argument("--llamafactory-version", metavar="VERSION", default=None, help=f"a release {as_lint}")
    export.add_argument("--deepspeed-version", metavar="VERSION", default=None, help=f"a release {as_lint}")
    export.add_argument(
        "--isolated",
        "--no-config",
        dest="isolated",
        action="store_true",
        help="as for lint: ignore every project config file and the repository's dependency pins",
    )


def releases_for(args: argparse.Namespace) -> Settings:
    """The settings `cfgopt lint .` resolves for the current folder with the same version flags: one resolution of
    the releases (`Resolver`), so the editor checks keys against the release lint judges the files for."""
    from cfgopt.lint.project_config import CommandLine, Resolver

    cli = CommandLine(llamafactory_version=args.llamafactory_version, deepspeed_version=args.deepspeed_version)
    return Resolver(cli, isolated=args.isolated).settings_for(Path("."))


def _origin(settings: Settings) -> str:
    """Where the releases came from, when a project stated them (`requirements.txt: LLaMA-Factory ==0.9.3`)."""
    ranges = [r for r in (settings.llamafactory_range, settings.deepspeed_range) if r is not None]
    return "; ".join(r.describe() for r in ranges)


def modeline_hint(schema: Path) -> list[str]:
    """The line to put in a YAML config, for one in the current folder; a relative path is read from the YAML file's
    own folder, so a config one folder down (`configs/x.yaml`) needs `../` before it, which the second line says."""
    from cfgopt.text.document import display_path

    shown_path = display_path(schema)
    hint = [f"In a YAML config: {MODELINE}{shown_path}"]
    if not Path(shown_path).is_absolute():
        hint.append(f"  (read from the YAML file's own folder: in configs/x.yaml, $schema=../{shown_path})")
    return hint


def run(args: argparse.Namespace) -> int:
    from cfgopt.commands import UsageError
    from cfgopt.knowledge.schema_export import FILES, export
    from cfgopt.text.document import display_path, shown

    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {shown(str(args.out))}: not a folder (it names the folder both files go to)")
    settings = releases_for(args)  # a bad project config or version: exit 2, as for lint
    lf, ds = settings.llamafactory_version, settings.deepspeed_version
    try:
        written = export(args.out, lf, ds)
    except OSError as exc:
        sys.stderr.write(shown(f"cfgopt schema export: error: {exc}") + "\n")
        return 2
    for path in written:
        sys.stdout.write(shown(f"wrote {display_path(path)}") + "\n")
    origin = _origin(settings)
    sys.stdout.write(shown(f"for LLaMA-Factory {lf} and DeepSpeed {ds}" + (f" ({origin})" if origin else "")) + "\n")
    sys.stdout.writelines(shown(line) + "\n" for line in modeline_hint(args.out / FILES["llamafactory"]))
    return 0
