"""`cfgopt fix`: apply what can be fixed, print a diff or --write it (atomically, only if the file did not change
meanwhile); fixes withheld and files not written are reported with why. `cfgopt fix -` prints the fixed text."""

from __future__ import annotations

import difflib
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
    write_file_text,
)
from cfgopt.job.settings import Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import TextIO

    from cfgopt.lint.fixer import FixResult


def add_arguments(fix: argparse.ArgumentParser) -> None:
    add_common_arguments(fix)
    output = fix.add_mutually_exclusive_group()  # as ruff: --diff never writes (and as `cfgopt tune`)
    output.add_argument("--write", action="store_true", help="write the fixes to the files")
    output.add_argument("--diff", action="store_true", help="print a unified diff, write nothing (the default)")
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that change behaviour")
    fix.add_argument(
        "--fix-references",
        action="store_true",
        help="also fix files read only because a config names them (a `deepspeed:` JSON outside the given paths)",
    )
    add_format_argument(
        fix,
        FORMATS,
        "concise",
        "as `cfgopt lint`, for the findings the fixes leave: json, json-lines, sarif and junit on stdout, alone "
        "(no diff; with or without --write); concise (default), full and github after --write, on stderr (the "
        "diff stays on stdout)",
    )
    add_outcome_arguments(
        fix, "lowest severity left unfixed that makes the exit code 1 (default: the project config's, else warning)"
    )
    fix.add_argument("--watch", action="store_true", help="fix again whenever a file changes (Ctrl-C stops)")


def _print_not_fixed(result: FixResult) -> None:
    """Fixes withheld (with the reason, at the finding) and files not written (with why)."""
    from cfgopt.lint import report
    from cfgopt.plan.speed_knobs import LEFT_ALONE
    from cfgopt.text.document import shown  # a key or path may carry control characters: escaped, never raw

    for ident, diag in result.withheld.items():
        line, col = diag.line_column
        why = result.withheld_why.get(ident, "it would make the file worse")
        sys.stderr.write(
            shown(
                f"{report.display_path(diag.path)}:{line}:{col}: {diag.code} fix withheld: "
                f"{diag.fix.description if diag.fix else ''}: {why}"
            )
            + "\n"
        )
    for diag in result.left_alone:  # a JSON whose readers the speed plan took off DeepSpeed
        line, col = diag.line_column
        where = f"{report.display_path(diag.path)}:{line}:{col}: {diag.code}"
        sys.stderr.write(shown(f"{where} fix not applied: {diag.fix.description}: {LEFT_ALONE}") + "\n")
    for diag, description, why in result.unoffered:  # a flow mapping or a merge: no fix could be written
        line, col = diag.line_column
        where = f"{report.display_path(diag.path)}:{line}:{col}: {diag.code}"
        sys.stderr.write(shown(f"{where} not fixed: {description}: {why}") + "\n")
    for path, why in sorted(result.not_fixed.items()):
        sys.stderr.write(shown(f"{report.display_path(path)}: not fixed: {why}") + "\n")


def run(args: argparse.Namespace) -> int:
    """Exit code as ruff's `check --fix`: 2 when a file could not be read, parsed, fixed safely or written; else
    1 when findings at or above `--fail-on` remain after the fixes (whether or not anything would change, and
    with or without --write); else 0."""
    overlay = read_stdin(args)
    resolver, settings = settings_from(args)  # `settings`: the first path's, which the summary describes
    if args.show_settings:
        return show_settings(args, resolver)
    if args.watch:
        if overlay is not None:
            usage_error(args, "--watch cannot read stdin")
        from cfgopt.commands.watch import watch

        return watch(args.paths, lambda: _fix_once(args, resolver, settings, None))
    return exit_zero(args, _fix_once(args, resolver, settings, overlay))


def _fix_once(args: argparse.Namespace, resolver, settings: Settings, overlay: dict[Path, str] | None) -> int:
    """One fix run: the diff or the writes, the messages and the summary; the exit code before --exit-zero."""
    from cfgopt.lint import report
    from cfgopt.lint.fixer import HARD_LINKED, READ_ONLY, fix_paths
    from cfgopt.text.document import shown

    result = fix_paths(
        args.paths,
        resolver,
        recognised_only=args.recognised_only,
        # `cfgopt fix -` writes stdin's text alone: a file it names is not fixed either (its findings remain, judged
        # with the fixed text, and stdin's fixes are not planned against edits that are never written)
        fix_references=args.fix_references and overlay is None,
        overlay=overlay,
    )
    if overlay is not None:
        key = next(iter(overlay))
        return _fix_stdin(args, settings, result, key, overlay[key])
    result.note_partial_fixes()
    print_problems(result.problems, result.skipped_folders)
    if not result.problems:
        warn_if_nothing_checked(args, result)
    _print_not_fixed(result)
    for path, why in result.reverted.items():
        sys.stderr.write(shown(f"{report.display_path(path)}: error: fixes not applied: {why}") + "\n")
    machine = args.format in MACHINE_FORMATS  # the report alone on stdout, as `lint` writes it
    if args.write:
        # SIGTERM / SIGHUP (a CI timeout, a cancelled pre-commit run, a closed terminal) while writing stop the run
        # as Ctrl-C does: the writer removes its temp file, and the files already written stay whole. Imported
        # here: a run that writes no file has nothing to undo, and the handler loads `threading`.
        from cfgopt.text import termination

        with termination.interrupt_on_termination():
            unwritten = _show_and_write(args, result, machine)
    else:
        unwritten = _show_and_write(args, result, machine)
    if unwritten:
        result.leave_unfixed(unwritten)  # the summary and the exit code count what the files now hold
    remaining = [d for d in result.remaining if d.severity >= result.settings_of(d.path).fail_on]
    if args.show_fixes:
        report.render_applied_fixes(result.applied, args.write, sys.stderr)
    if machine:  # every finding left, whatever --fail-on and --exit-zero decide about the exit code
        _render_remaining(args, result, result.remaining, sys.stdout)
    elif args.statistics:  # as on lint (ruff's `check --fix --statistics`): the table of what is left, alone
        report.render_statistics(result.remaining, sys.stdout)
    elif remaining and args.write and not args.exit_zero:  # --exit-zero: not fix's to fail on (pre-commit)
        _render_remaining(args, result, remaining, sys.stderr)
    if not args.quiet and not machine and not args.statistics:
        report.render_found_elsewhere(result.found_elsewhere)
        render_not_read(result.not_read)
        _fix_summary(result, remaining, args.write, settings, args.paths)
    # with --write, a file asked to be fixed that cannot be written (read-only, or another job's file through a
    # hard link no config of the run reads; refused before planning) is an error
    locked = args.write and bool({READ_ONLY, HARD_LINKED} & set(result.not_fixed.values()))
    if result.problems or result.reverted or unwritten or locked or any(d.code == "CFG001" for d in result.remaining):
        return 2
    return 1 if remaining else 0


def _render_remaining(args: argparse.Namespace, result: FixResult, remaining: list, stream: TextIO) -> None:
    """The findings the fixes leave, in `--format` (or as `--statistics`), with the files that could not be read."""
    from cfgopt.lint import report
    from cfgopt.lint.engine import LintResult
    from cfgopt.text.diagnostics import Severity

    if args.statistics:
        report.render_statistics(remaining, stream, as_json=args.format == "json")
        return
    left = LintResult(remaining, result.problems, result.files, file_settings=result.file_settings)
    fixes = report.fixes_json(result.applied, args.write)
    report.render(args.format, left, stream, Severity.parse(args.fail_on) if args.fail_on else None, fixes)


def _show_and_write(args: argparse.Namespace, result: FixResult, machine: bool) -> set[Path]:
    """Print each fixed file's diff (without --write, or with --diff) and write it (with --write); the files
    that could not be written, each reported with why. `machine`: stdout holds the report alone (no diff, and no
    line per fix on stderr: the report is what a program reads; nor with --statistics, whose table stands alone)."""
    from cfgopt.lint import report
    from cfgopt.text.document import encode
    from cfgopt.text.document import shown as escape
    from cfgopt.text.writer import ChangedOnDisk, atomic_write, why_not_written

    unwritten: set[Path] = set()
    for path in sorted(result.fixed):
        before, after = result.originals[path], result.fixed[path]
        shown = escape(report.display_path(path))  # a file name may carry `\n+++ b/x` or an escape sequence
        if not args.write and not machine and not args.statistics:
            write_file_text("".join(unified_diff(before, after, shown)))
        if args.write:
            bom = "\ufeff" if result.bom.get(path) else ""
            try:
                names = len(result.links.get(path, [path]))  # hard links all judged with the change (fixer)
                atomic_write(path, encode(bom + after), expected=encode(bom + before), names=names)
            except (ChangedOnDisk, OSError) as exc:
                sys.stderr.write(escape(f"{shown}: error: not written: {why_not_written(path, exc)}") + "\n")
                unwritten.add(path)
                continue
        for description in [] if args.quiet or machine or args.statistics else result.applied.get(path, []):
            sys.stderr.write(escape(f"{shown}: {'fixed' if args.write else 'would fix'}: {description}") + "\n")
    return unwritten


NO_FINAL_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(before: str, after: str, shown: str) -> list[str]:
    """A unified diff `git apply` and `patch` accept: a last line without a line break is followed by
    `\\ No newline at end of file` (difflib leaves it out, and the next header then runs into that line)."""
    out: list[str] = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
    ):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.extend((line + "\n", NO_FINAL_NEWLINE))
    return out


def _fix_summary(result, remaining: list, written: bool, settings: Settings, paths: list[Path]) -> None:
    from cfgopt.job.job import judged_for_run
    from cfgopt.lint.report import summary_lines
    from cfgopt.text.document import shown

    n = sum(len(v) for v in result.applied.values())
    verb = "Fixed" if written else "Would fix"
    judged = judged_for_run(result.file_settings, paths, settings)
    head = f"{verb} {n} problem(s) in {len(result.fixed)} file(s); {len(remaining)} remaining"
    sys.stderr.write(summary_lines(head, judged))
    waiting = _unsafe_waiting(result.remaining, settings)
    if waiting:
        sys.stderr.write(shown(waiting) + "\n")


def _unsafe_waiting(remaining: list, settings: Settings) -> str:
    """One line on the unsafe fixes this run did not apply (`--unsafe-fixes` not given), naming the speed plan
    and its expected gain: the fastest config cfgopt knows is one flag away, and the user should see it."""
    if settings.unsafe_fixes:
        return ""
    unsafe = [d for d in remaining if _unsafe(d)]
    if not unsafe:
        return ""
    plans = [d.fix.description for d in unsafe if d.fix.description.startswith("Speed plan")]
    line = f"{len(unsafe)} unsafe fix(es) wait: `--unsafe-fixes` applies them"
    if plans:
        gain = plans[0].split("(expected ", 1)[-1].split(",", 1)[0] if "(expected " in plans[0] else ""
        line += f", among them {len(plans)} speed plan(s)" + (f" (expected {gain} for the first)" if gain else "")
    return line


def _unsafe(diag) -> bool:
    from cfgopt.text.diagnostics import Applicability

    return diag.fix is not None and diag.fix.applicability == Applicability.UNSAFE


def _fix_stdin(args: argparse.Namespace, settings: Settings, result, key: Path, overlay_text: str) -> int:
    """`cfgopt fix -`: the fixed text on stdout (the input unchanged when nothing applies), messages on
    stderr; exit 1 when findings at or above --fail-on remain (in stdin's text or in a file it names, judged with
    the fixed text, as `cfgopt lint -` counts them), 2 when it could not be read."""
    from cfgopt.lint import report
    from cfgopt.lint.fixer import STDIN_PART
    from cfgopt.text.document import shown

    report.tolerant(sys.stderr)  # a latin-1 or ASCII terminal: a character it lacks is written as an escape
    bom = "\ufeff" if result.bom.get(key) else ""  # a BOM read on stdin is written back
    if key in result.originals:
        write_file_text(bom + result.fixed.get(key, result.originals[key]))
    else:  # not linted (--force-exclude on an excluded name): echoed as it came, as ruff does; never dropped
        write_file_text(overlay_text)
    print_problems(result.problems)
    # Only stdin's own text is fixed: a DeepSpeed JSON it names is read for context, never written, so its findings
    # remain (counted), and a speed plan part of which it holds is applied in part (said on stderr).
    result.applied = {k: v for k, v in result.applied.items() if k == key}
    result.fixed = {k: v for k, v in result.fixed.items() if k == key}
    result.note_partial_fixes(lambda _: STDIN_PART)
    remaining = [d for d in result.remaining if d.severity >= result.settings_of(d.path).fail_on]
    if not args.quiet:
        for part in result.plan_parts:  # the fix lines stdin does not print: the one applied in part is said
            if part.key == key and part.noted:
                sys.stderr.write(shown(f"{report.display_path(key)}: fixed: {part.noted}") + "\n")
    if remaining and not args.quiet:
        report.render_concise(remaining, sys.stderr)
    if not args.quiet:
        render_not_read(result.not_read)
        _fix_summary(result, remaining, True, settings, args.paths)
    if result.problems or result.reverted or any(d.code == "CFG001" for d in result.remaining):
        return 2
    return 1 if remaining else 0
