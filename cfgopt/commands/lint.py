"""`cfgopt lint`: report problems (exit 0 nothing at or above --fail-on, 1 findings, 2 a usage error or a file
that could not be read or parsed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cfgopt.commands.common import (
    FORMATS,
    MACHINE_FORMATS,
    add_common_arguments,
    add_format_argument,
    add_outcome_arguments,
    exit_zero,
    print_problems,
    read_stdin,
    render_not_read,
    settings_from,
    show_settings,
    usage_error,
    warn_if_nothing_checked,
)
from cfgopt.job.settings import Settings
from cfgopt.text.diagnostics import Severity
from cfgopt.text.real_paths import one_run

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from cfgopt.lint.engine import LintResult
    from cfgopt.lint.project_config import Resolver


def add_arguments(lint: argparse.ArgumentParser) -> None:
    add_common_arguments(lint)
    add_format_argument(
        lint,
        FORMATS,
        None,  # `run` reads CFGOPT_OUTPUT_FORMAT: the parser is the same in every environment (its generated table)
        "full (default: code frames), concise, json, json-lines, github (Actions annotations), sarif "
        "(SARIF 2.1.0, GitHub code scanning), junit",
    )
    add_outcome_arguments(
        lint, "lowest severity that makes the exit code 1 (default: the project config's, else warning)"
    )
    lint.add_argument("--watch", action="store_true", help="lint again whenever a linted file changes (Ctrl-C stops)")


def run(args: argparse.Namespace) -> int:
    if args.format is None:
        args.format = _environment_format()
    overlay = read_stdin(args)
    resolver, shown = settings_from(args)
    if args.show_settings:
        return show_settings(args, resolver)
    if args.watch:
        if overlay is not None:
            usage_error(args, "--watch cannot read stdin")
        from cfgopt.commands.watch import watch

        return watch(args.paths, lambda: _lint_again(args))
    return _lint_once(args, resolver, shown, overlay)


def _environment_format() -> str:
    """`--format` when not given: $CFGOPT_OUTPUT_FORMAT where it names a format (as ruff's RUFF_OUTPUT_FORMAT),
    else full."""
    name = os.environ.get("CFGOPT_OUTPUT_FORMAT")
    return name if name in FORMATS else "full"


def _lint_again(args: argparse.Namespace) -> int:
    """One `--watch` round: the project config is read again (it may be what changed); a bad one is reported
    and the watch goes on."""
    from cfgopt.knowledge.versions import VersionError
    from cfgopt.lint.project_config import ConfigError

    try:
        resolver, shown = settings_from(args)
    except (ConfigError, VersionError) as exc:
        sys.stderr.write(f"cfgopt: error: {exc}\n")
        return 2
    return _lint_once(args, resolver, shown, None)


def _lint_once(args: argparse.Namespace, resolver: Resolver, shown: Settings, overlay: dict[Path, str] | None) -> int:
    """One lint run; `shown`: the settings the summary line describes (the first path's)."""
    with one_run():  # the lint and its report: each real path asked once (`--watch` lints again: another run)
        return _lint_and_report(args, resolver, shown, overlay)


def _lint_and_report(
    args: argparse.Namespace, resolver: Resolver, shown: Settings, overlay: dict[Path, str] | None
) -> int:
    from cfgopt.lint import report
    from cfgopt.lint.engine import lint_paths

    result = lint_paths(args.paths, resolver, recognised_only=args.recognised_only, overlay=overlay)
    _strip_unfixable(result)
    machine = args.format in MACHINE_FORMATS
    if args.statistics:  # as ruff: the table instead of the findings
        report.render_statistics(result.diagnostics, sys.stdout, as_json=args.format == "json")
    else:
        report.render(args.format, result, sys.stdout, Severity.parse(args.fail_on) if args.fail_on else None)
    if args.show_fixes:
        text_stream = sys.stderr if machine or args.format == "github" else sys.stdout
        report.render_available_fixes(result.diagnostics, text_stream)
    print_problems(result.problems, result.skipped_folders)
    warn_if_nothing_checked(args, result)
    if not machine and not args.quiet and not args.statistics:
        from cfgopt.job.job import judged_for_run

        report.render_found_elsewhere(result.found_elsewhere)
        render_not_read(result.not_read)
        report.render_summary_line(
            result.diagnostics,
            result.files,
            result.problems,
            judged=judged_for_run(result.file_settings, args.paths, shown),
        )
    code = result.exit_code(Severity.parse(args.fail_on) if args.fail_on else None)
    return exit_zero(args, code)


def _strip_unfixable(result: LintResult) -> None:
    """Findings of rules a project config makes unfixable are shown without a fix (the fixer's policy)."""
    if any(s.restricts_fixes for s in result.file_settings.values()):
        from cfgopt.lint.fixer import strip_unfixable  # the fixer is loaded only when a project config needs it

        strip_unfixable(result.diagnostics, result.settings_of)
