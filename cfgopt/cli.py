"""The command line: `cfgopt lint`, `cfgopt fix`, `cfgopt rules`, `cfgopt rule CODE`.

Exit codes (as ruff): 0 nothing at or above --fail-on, 1 findings, 2 a usage error or a file that could
not be read or parsed. Imports stay light: argparse, PyYAML, and pydantic only when a DeepSpeed file is read.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from cfgopt import __version__
from cfgopt.argtypes import positive_int
from cfgopt.diagnostics import Severity
from cfgopt.settings import Settings
from cfgopt.targets import TARGETS
from cfgopt.versions import VersionError

if TYPE_CHECKING:
    from cfgopt.fixer import FixResult

FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code is 2 too; keep the message short
        self.print_usage(sys.stderr)
        sys.stderr.write(f"cfgopt: error: {message}\n")
        raise SystemExit(2)


def _codes(text: str) -> list[str]:
    """Rule selectors from the command line; an unknown code or prefix is a usage error (as ruff's
    `Unknown rule selector`), with a did-you-mean."""
    from cfgopt.config import ConfigError, check_codes

    try:
        return check_codes([c.strip() for c in text.split(",") if c.strip()], "rule selector")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("rule selector: ")) from None


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", type=Path, default=[Path(".")], help="files or folders (default: .); - reads stdin"
    )
    p.add_argument(
        "--stdin-filename",
        type=Path,
        default=None,
        metavar="PATH",
        help="with -: the name stdin is linted as (its kind, messages, project config, DeepSpeed lookup)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print findings (or fixed text) and nothing else")
    p.add_argument(
        "--target",
        default=None,
        choices=sorted(TARGETS),
        help="hardware the config is judged for (default: the project config's, else none: hardware-specific "
        "rules stay quiet)",
    )
    p.add_argument("--gpus", type=positive_int, default=None, help="GPUs the job will use (default: not stated)")
    p.add_argument(
        "--select",
        type=_codes,
        default=None,
        help="rule codes or prefixes to run, ALL for every rule (default: the default selection, errors and "
        "silent misconfigurations; advice such as PF and MEM002-005 is opt-in); replaces the config's",
    )
    p.add_argument("--extend-select", type=_codes, default=[], help="rule codes or prefixes to add to the selection")
    p.add_argument("--ignore", type=_codes, default=[], help="rule codes or prefixes to skip")
    p.add_argument(
        "--fixable", type=_codes, default=None, help="rule codes or prefixes whose fixes apply (default all)"
    )
    p.add_argument("--unfixable", type=_codes, default=[], help="rule codes or prefixes whose fixes never apply")
    p.add_argument(
        "--llamafactory-version",
        metavar="VERSION",
        default=None,
        help="LLaMA-Factory release to judge configs for: a shipped snapshot, a prefix such as 0.9, or a range "
        "such as '>=0.9.3,<0.9.6' (default: the project config's, else the repository's dependency pins, else "
        "the installed one's, else the newest; see docs/versions.md)",
    )
    p.add_argument(
        "--deepspeed-version",
        metavar="VERSION",
        default=None,
        help="DeepSpeed release to judge JSON for, e.g. 0.16, 0.19.8 or a range '>=0.16,<0.20' (DS090 then "
        "compares the releases in it) (default: the project config's, else the repository's dependency pins, "
        "else the installed one's series, else the newest)",
    )
    p.add_argument(
        "--config",
        dest="config_overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one project-config option, VALUE in TOML syntax (repeatable): --config 'select=[\"LF\"]'",
    )
    p.add_argument(
        "--isolated",
        "--no-config",
        dest="isolated",
        action="store_true",
        help="ignore every project config file (cfgopt.toml, pyproject.toml [tool.cfgopt]) and the "
        "repository's dependency pins",
    )
    p.add_argument(
        "--show-settings",
        action="store_true",
        help="print the settings resolved for the first path (which config file applies) and exit",
    )
    p.add_argument(
        "--force-exclude",
        action="store_true",
        help="skip paths matching the config's `exclude` even when named on the command line (pre-commit)",
    )
    p.add_argument(
        "--recognised-only",
        action="store_true",
        help="judge named files by content, as files found in a folder: skip empty, unparseable or unrelated "
        "YAML/JSON/shell files silently unless they look like LLaMA-Factory or DeepSpeed configs (pre-commit)",
    )
    p.add_argument("--show-fixes", action="store_true", help="list the fixes (available with lint, applied with fix)")


def _lint_arguments(lint: argparse.ArgumentParser) -> None:
    _add_common(lint)
    lint.add_argument(
        "--format",
        "--output-format",
        dest="format",
        choices=FORMATS,
        default=os.environ.get("CFGOPT_OUTPUT_FORMAT") if os.environ.get("CFGOPT_OUTPUT_FORMAT") in FORMATS else "full",
        help="full (default: code frames), concise, json, json-lines, github (Actions annotations), sarif "
        "(SARIF 2.1.0, GitHub code scanning), junit",
    )
    lint.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        default=None,
        help="lowest severity that makes the exit code 1 (default: the project config's, else warning)",
    )
    lint.add_argument(
        "--statistics", action="store_true", help="print only a count of findings per rule ([*]: has safe fixes)"
    )
    lint.add_argument("--watch", action="store_true", help="lint again whenever a linted file changes (Ctrl-C stops)")
    lint.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")


def _fix_arguments(fix: argparse.ArgumentParser) -> None:
    _add_common(fix)
    fix.add_argument("--write", action="store_true", help="write the fixes to the files")
    fix.add_argument("--diff", action="store_true", help="print a unified diff (the default without --write)")
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that change behaviour")
    fix.add_argument(
        "--fix-references",
        action="store_true",
        help="also fix files read only because a config names them (a `deepspeed:` JSON outside the given paths)",
    )
    fix.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        default=None,
        help="lowest severity left unfixed that makes the exit code 1 (default: the project config's, else warning)",
    )


def _verify_arguments(verify: argparse.ArgumentParser) -> None:
    from cfgopt.verify.options import add_arguments

    add_arguments(verify)


def _estimate_arguments(estimate: argparse.ArgumentParser) -> None:
    from cfgopt.commands.estimate import add_arguments

    add_arguments(estimate)


def _tune_arguments(tune: argparse.ArgumentParser) -> None:
    from cfgopt.tune.options import add_arguments

    add_arguments(tune)


def _schema_arguments(schema_cmd: argparse.ArgumentParser) -> None:
    schema_sub = schema_cmd.add_subparsers(dest="schema_command", required=True, parser_class=_Parser)
    schema_cmd.subcommands = schema_sub.choices  # type: ignore[attr-defined]
    export = schema_sub.add_parser("export", help="write llamafactory-train.schema.json and deepspeed.schema.json")
    export.add_argument("--out", type=Path, default=Path("."), help="folder to write to (default: .)")
    export.add_argument("--llamafactory-version", metavar="VERSION", default=None, help="default: as for lint")
    export.add_argument("--deepspeed-version", metavar="VERSION", default=None, help="default: as for lint")


def _rules_arguments(rules: argparse.ArgumentParser) -> None:
    rules.add_argument("--format", choices=("text", "json", "markdown"), default="text", help="output format")


def _rule_arguments(rule: argparse.ArgumentParser) -> None:
    rule.add_argument("code", help="a rule code, e.g. LF003")
    rule.add_argument("--format", choices=("text", "json", "markdown"), default="text", help="output format")


# name -> (help, the function adding its options): one shape for every subcommand
SUBCOMMANDS = {
    "lint": ("report problems", _lint_arguments),
    "fix": ("fix what can be fixed: print a diff, or --write it", _fix_arguments),
    "verify": ("run the real trainer for a few steps, original vs fixed", _verify_arguments),
    "estimate": ("peak memory per GPU of a training config, largest micro-batch", _estimate_arguments),
    "tune": ("find the fastest config that fits, by memory-pruned short runs", _tune_arguments),
    "schema": ("JSON Schema files for editors: `cfgopt schema export`", _schema_arguments),
    "rules": ("list all rules", _rules_arguments),
    "rule": ("explain one rule", _rule_arguments),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser. `only`: the subcommand being run, whose options alone are added (the others keep their
    name and help): argparse formats every option as it is added and verify/tune/estimate import their
    modules, most of a lint run's parsing time. None: every subcommand's options (`cfgopt --help`)."""
    parser = _Parser(prog="cfgopt", description="Lint and fix LLaMA-Factory YAML and DeepSpeed JSON.")
    parser.add_argument("--version", action="version", version=f"cfgopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (help_text, add_arguments) in SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if only is None or only == name:
            add_arguments(command)
    parser.subcommands = sub.choices  # type: ignore[attr-defined]  # for the subcommand's usage on errors
    return parser


def _subcommand(argv: list[str] | None) -> str | None:
    """The subcommand named on the command line (its first word not starting with `-`), if it is one."""
    words = sys.argv[1:] if argv is None else argv
    first = next((w for w in words if not w.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def _settings(args: argparse.Namespace) -> Settings:
    """The settings for the run: a `Settings` whose `for_path` gives each file's (the closest project config
    wins, then `--config` overrides, then the flags). Raises ConfigError / VersionError (exit 2)."""
    from cfgopt.config import CommandLine, Resolver, parse_override

    overrides: dict = {}
    for text in args.config_overrides:
        overrides.update(parse_override(text))
    cli = CommandLine(
        target=args.target,
        gpus=args.gpus,
        select=args.select,
        ignore=args.ignore,
        extend_select=args.extend_select,
        fixable=args.fixable,
        unfixable=args.unfixable,
        fail_on=args.fail_on,
        unsafe_fixes=getattr(args, "unsafe_fixes", False),
        llamafactory_version=args.llamafactory_version,
        deepspeed_version=args.deepspeed_version,
        force_exclude=args.force_exclude,
    )
    resolver = Resolver(cli, overrides, isolated=args.isolated)
    first = args.paths[0] if args.paths else Path(".")
    return resolver.settings_for(first if first.exists() or first.parent.is_dir() else Path("."))


def _show_settings(args: argparse.Namespace, settings: Settings) -> int:
    from cfgopt.config import show_settings

    path = args.paths[0] if args.paths else Path(".")
    sys.stdout.write(show_settings(settings.for_path(path), path))
    return 0


STDIN = Path("-")


def _read_stdin(args: argparse.Namespace) -> dict[Path, str] | None:
    """`-` as the path: stdin's text, linted as --stdin-filename (default stdin.yaml, or stdin.json when it
    starts with `{`). Returns the overlay {path: text} and rewrites `args.paths`; None without `-`."""
    from cfgopt.document import real_path

    if STDIN not in args.paths:
        if args.stdin_filename is not None:
            _usage_error(args, "--stdin-filename needs - among the paths")
        return None
    if len(args.paths) > 1:
        _usage_error(args, "- (stdin) cannot be combined with other paths")
    try:  # the same bytes rule as a file: UTF-8, a BOM allowed
        text = sys.stdin.buffer.read().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        _usage_error(args, f"stdin is not UTF-8 text ({exc.reason} at byte {exc.start})")
    name = args.stdin_filename or Path("stdin.json" if text.lstrip().startswith("{") else "stdin.yaml")
    args.paths = [name]
    return {real_path(name): text}


def _usage_error(args: argparse.Namespace, message: str) -> NoReturn:
    parser = build_parser()
    sub = parser.subcommands.get(args.command, parser)  # type: ignore[attr-defined]
    sub.error(message)
    raise AssertionError("unreachable: argparse's error() exits")


def _print_problems(problems: list) -> None:
    for p in problems:
        sys.stderr.write(f"{p.path}: error: {p.message}\n")


def _warn_if_nothing_checked(args: argparse.Namespace, result) -> None:
    """As ruff's "No Python files found under the given path(s)": a hint, not an error (exit 0)."""
    if result.files == 0 and not result.problems and not args.quiet and not args.recognised_only:
        shown = " ".join(str(p) for p in args.paths)
        sys.stderr.write(
            f"cfgopt: warning: no config files found in {shown} (LLaMA-Factory YAML, DeepSpeed JSON or "
            "scripts calling llamafactory-cli)\n"
        )


def cmd_lint(args: argparse.Namespace) -> int:
    overlay = _read_stdin(args)
    settings = _settings(args)
    if args.show_settings:
        return _show_settings(args, settings)
    if args.watch:
        if overlay is not None:
            _usage_error(args, "--watch cannot read stdin")
        from cfgopt.watch import watch

        return watch(args.paths, lambda: _lint_once(args, settings, None))
    return _lint_once(args, settings, overlay)


def _lint_once(args: argparse.Namespace, settings: Settings, overlay: dict[Path, str] | None) -> int:
    from cfgopt import report
    from cfgopt.engine import lint_paths

    result = lint_paths(args.paths, settings, recognised_only=args.recognised_only, overlay=overlay)
    machine = args.format in ("json", "json-lines", "sarif", "junit")
    if args.statistics:  # as ruff: the table instead of the findings
        report.render_statistics(result.diagnostics, sys.stdout, as_json=args.format == "json")
    else:
        report.render(args.format, result, sys.stdout)
    if args.show_fixes:
        text_stream = sys.stderr if machine or args.format == "github" else sys.stdout
        report.render_available_fixes(result.diagnostics, text_stream)
    _print_problems(result.problems)
    _warn_if_nothing_checked(args, result)
    if not machine and not args.quiet and not args.statistics:
        from cfgopt.job import judged_for

        report.render_summary_line(result.diagnostics, result.files, result.problems, judged_for=judged_for(settings))
    code = result.exit_code(Severity.parse(args.fail_on) if args.fail_on else None)
    return 0 if args.exit_zero and code == 1 else code


def _print_not_fixed(result: FixResult) -> None:
    """Fixes withheld (with the reason, at the finding) and files not written (with why)."""
    from cfgopt import report

    for ident, diag in result.withheld.items():
        line, col = diag.line_column
        why = result.withheld_why.get(ident, "it would make the file worse")
        sys.stderr.write(
            f"{report.display_path(diag.path)}:{line}:{col}: {diag.code} fix withheld: "
            f"{diag.fix.description if diag.fix else ''}: {why}\n"
        )
    for path, why in sorted(result.not_fixed.items()):
        sys.stderr.write(f"{report.display_path(path)}: not fixed: {why}\n")


def cmd_fix(args: argparse.Namespace) -> int:
    from cfgopt import report
    from cfgopt.fixer import fix_paths
    from cfgopt.writer import ChangedOnDisk, atomic_write

    overlay = _read_stdin(args)
    settings = _settings(args)
    if args.show_settings:
        return _show_settings(args, settings)
    result = fix_paths(
        args.paths,
        settings,
        recognised_only=args.recognised_only,
        fix_references=args.fix_references,
        overlay=overlay,
    )
    if overlay is not None:
        return _fix_stdin(args, settings, result, next(iter(overlay)))
    _print_problems(result.problems)
    if not result.problems:
        _warn_if_nothing_checked(args, result)
    exit_code = 2 if result.problems else 0
    _print_not_fixed(result)
    for path, why in result.reverted.items():
        sys.stderr.write(f"{path}: error: fixes not applied: {why}\n")
        exit_code = 2
    for path in sorted(result.fixed):
        before, after = result.originals[path], result.fixed[path]
        shown = report.display_path(path)
        if args.diff or not args.write:
            sys.stdout.writelines(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    fromfile=f"a/{shown}",
                    tofile=f"b/{shown}",
                )
            )
        if args.write:
            bom = "\ufeff" if result.bom.get(path) else ""
            try:
                atomic_write(path, (bom + after).encode("utf-8"), expected=(bom + before).encode("utf-8"))
            except (ChangedOnDisk, OSError) as exc:
                sys.stderr.write(f"{shown}: error: not written: {exc}\n")
                exit_code = 2
                continue
        for description in [] if args.quiet else result.applied.get(path, []):
            sys.stderr.write(f"{shown}: {'fixed' if args.write else 'would fix'}: {description}\n")
    remaining = [d for d in result.remaining if d.severity >= settings.for_path(d.path).fail_on]
    if args.show_fixes:
        report.render_applied_fixes(result.applied, args.write, sys.stderr)
    if remaining and args.write:
        report.render_concise(remaining, sys.stderr)
    if not args.quiet:
        _fix_summary(result, remaining, args.write, settings)
    if exit_code:
        return exit_code
    if not args.write and result.fixed:
        return 1  # as `ruff check --fix --diff`: there are changes to make
    return 1 if remaining else 0


def _fix_summary(result, remaining: list, written: bool, settings: Settings) -> None:
    from cfgopt.job import judged_for

    n = sum(len(v) for v in result.applied.values())
    verb = "Fixed" if written else "Would fix"
    sys.stderr.write(
        f"{verb} {n} problem(s) in {len(result.fixed)} file(s) ({judged_for(settings)}); {len(remaining)} remaining"
        + ("" if settings.unsafe_fixes or not remaining else " (some may need --unsafe-fixes)")
        + "\n"
    )


def _fix_stdin(args: argparse.Namespace, settings: Settings, result, key: Path) -> int:
    """`cfgopt fix -`: the fixed text on stdout (the input unchanged when nothing applies), messages on
    stderr; exit 1 when findings at or above --fail-on remain, 2 when it could not be read."""
    from cfgopt import report
    from cfgopt.document import real_path

    sys.stdout.write(result.fixed.get(key, result.originals.get(key, "")))
    _print_problems(result.problems)
    # Only stdin's own text is fixed: a DeepSpeed JSON it names is read for context, never written.
    remaining = [
        d for d in result.remaining if real_path(d.path) == key and d.severity >= settings.for_path(d.path).fail_on
    ]
    result.applied = {k: v for k, v in result.applied.items() if k == key}
    result.fixed = {k: v for k, v in result.fixed.items() if k == key}
    if remaining and not args.quiet:
        report.render_concise(remaining, sys.stderr)
    if not args.quiet:
        _fix_summary(result, remaining, True, settings)
    if result.problems or result.reverted or any(d.code == "CFG001" for d in result.remaining):
        return 2
    return 1 if remaining else 0


def cmd_rules(args: argparse.Namespace) -> int:
    import json

    from cfgopt.rules import all_rules

    docs = [r.docs() for r in all_rules()]
    if args.format == "json":
        print(json.dumps(docs, indent=2))
    elif args.format == "markdown":
        print("| code | name | severity | summary |\n| --- | --- | --- | --- |")
        for d in docs:
            print(f"| [{d['code']}]({d['code']}.md) | `{d['name']}` | {d['severity']} | {d['summary']} |")
    else:
        for d in docs:
            print(f"{d['code']:7} {d['name']:32} {d['severity']:8} {d['summary']}")
    return 0


def cmd_rule(args: argparse.Namespace) -> int:
    import json

    from cfgopt.rules import by_code

    rule = by_code(args.code)
    if rule is None:
        sys.stderr.write(f"cfgopt: error: no rule {args.code!r} (see `cfgopt rules`)\n")
        return 2
    from cfgopt.commands.rule import render_page

    doc = rule.docs()
    print(json.dumps(doc, indent=2) if args.format == "json" else render_page(doc, args.format))
    return 0


def _could_not_run(command: str, exc: Exception) -> int:
    """verify / tune: the runs could not be made (an offline asset failed to build): exit 2, one line."""
    sys.stderr.write(f"cfgopt {command}: could not run: {exc}\n")
    return 2


def cmd_verify(args: argparse.Namespace) -> int:
    from cfgopt.verify.command import run

    try:
        return run(args)
    except RuntimeError as exc:
        return _could_not_run("verify", exc)


def cmd_tune(args: argparse.Namespace) -> int:
    from cfgopt.tune.command import run

    try:
        return run(args)
    except RuntimeError as exc:
        return _could_not_run("tune", exc)


def cmd_schema(args: argparse.Namespace) -> int:
    from cfgopt.schema_export import run

    return run(args)


def cmd_estimate(args: argparse.Namespace) -> int:
    from cfgopt.commands.estimate import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    from cfgopt.config import ConfigError

    parser = build_parser(_subcommand(argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # as ruff: the subcommand's usage, not the top-level one
        sub = parser.subcommands[args.command]  # type: ignore[attr-defined]
        if getattr(args, "schema_command", None):
            sub = sub.subcommands[args.schema_command]
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    handler = {
        "lint": cmd_lint,
        "fix": cmd_fix,
        "rules": cmd_rules,
        "rule": cmd_rule,
        "verify": cmd_verify,
        "tune": cmd_tune,
        "estimate": cmd_estimate,
        "schema": cmd_schema,
    }[args.command]
    try:
        return handler(args)
    except (VersionError, ConfigError) as exc:  # no snapshot for a release, a bad project config: usage errors
        sys.stderr.write(f"cfgopt: error: {exc}\n")
        return 2
    except SystemExit as exc:  # SystemExit("message") from a command: it could not run (exit 2, not Python's 1)
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code.rstrip("\n") + "\n")
            return 2
        raise
    except KeyboardInterrupt:
        sys.stderr.write("cfgopt: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
