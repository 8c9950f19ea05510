"""Output formats: `full` (ruff-like, with a code frame), `concise` (one line each), `json`, `json-lines`,
`github` (Actions annotations), `sarif` (SARIF 2.1.0 for GitHub code scanning) and `junit`.

What a file holds reaches a terminal only through `document.shown`: a key with an escape sequence, a newline
that would forge a finding line, a lone surrogate from a JSON `"\\ud800"` are written as `\\xNN` / `\\uNNNN`
in the human formats; the JSON formats escape with JSON's own `\\uNNNN` (ASCII output), so every format
writes valid output in any encoding."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import display_path, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

_COLORS = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}


def _use_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


FRAME_WIDTH = 120  # a code frame shows at most this many characters of a line, around the finding


def _frame_window(text: str, col: int, span: int) -> tuple[str, int, int]:
    """The part of a (possibly megabytes long) line to show, the column in it, and the caret count."""
    if len(text) <= FRAME_WIDTH:
        return text, col, span
    start = max(0, col - 1 - FRAME_WIDTH // 3)
    shown = text[start : start + FRAME_WIDTH]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + FRAME_WIDTH < len(text) else ""
    new_col = col - start + len(prefix)
    return prefix + shown + suffix, new_col, max(1, min(span, FRAME_WIDTH - (new_col - 1)))


def _shown_frame(text: str, col: int, span: int) -> tuple[str, int, int]:
    """A code frame's line with its controls escaped (`shown`), and the caret's column and width moved to match."""
    before, marked = text[: col - 1], text[col - 1 : col - 1 + span]
    return shown(text), len(shown(before)) + 1, max(1, len(shown(marked)))


def render_full(diags: list[Diagnostic], stream: TextIO) -> None:
    stream = tolerant(stream)
    color = _use_color(stream)
    for d in diags:
        line, col = d.line_column
        sev = _paint(str(d.severity), _COLORS[d.severity] + ";1", color)
        stream.write(
            f"{_paint(shown(display_path(d.path)), '1', color)}:{line}:{col}: {sev} "
            f"{_paint(d.code, '1', color)} [{d.name}] {shown(d.message)}\n"
        )
        text = d.document.line_text(line) if d.document.text else ""
        if text.strip():
            width = len(str(line))
            end_line, end_col = d.end_line_column
            span = max(1, (end_col - col) if end_line == line else len(text) - col + 1)
            text, col, span = _shown_frame(*_frame_window(text, col, span))
            stream.write(
                f"{' ' * width} |\n{line} | {text}\n{' ' * width} | {' ' * (col - 1)}"
                f"{_paint('^' * span, _COLORS[d.severity], color)}\n"
            )
        if d.fix is not None:
            stream.write(f"{' ' * len(str(line))} = fix ({d.fix.applicability}): {shown(d.fix.description)}\n")
        stream.write("\n")


def render_concise(diags: list[Diagnostic], stream: TextIO) -> None:
    stream = tolerant(stream)  # `fix -` writes the findings left to stderr with this alone
    for d in diags:
        line, col = d.line_column
        stream.write(f"{shown(display_path(d.path))}:{line}:{col}: {d.code} {d.severity} {shown(d.message)}\n")


def summary(diags: list[Diagnostic], files: int) -> dict:
    by_sev = Counter(str(d.severity) for d in diags)
    return {
        "files": files,
        "errors": by_sev.get("error", 0),
        "warnings": by_sev.get("warning", 0),
        "infos": by_sev.get("info", 0),
        "fixable": sum(1 for d in diags if d.fix is not None and d.fix.applicability.value == "safe"),
        "unsafe_fixable": sum(1 for d in diags if d.fix is not None and d.fix.applicability.value == "unsafe"),
    }


def render_json(
    diags: list[Diagnostic],
    files: int,
    problems: list,
    stream: TextIO,
    judged: dict | None = None,
    fixes: list[dict] | None = None,
) -> None:
    """`judged`: `files_judged`, each file's settings (the `files` list); `fixes`: `cfgopt fix`'s, the fixes
    applied to each file (`fixes_json`), before the summary."""
    out = {
        "diagnostics": [d.to_json() for d in diags],
        "problems": [{"file": display_path(p.path), "message": p.message} for p in problems],
        "files": [{"file": name, **settings} for name, settings in (judged or {}).items()],
        **({} if fixes is None else {"fixes": fixes}),
        "summary": summary(diags, files),
    }
    json.dump(out, stream, indent=2)
    stream.write("\n")


def statistics(diags: list[Diagnostic]) -> list[dict]:
    """One row per rule, most frequent first; `fixable`: some of its findings have a safe fix (as ruff's
    `[*]`, which `cfgopt fix` applies without --unsafe-fixes)."""
    counts = Counter(d.code for d in diags)
    names = {d.code: d.name for d in diags}
    safe = {d.code for d in diags if d.fix is not None and d.fix.applicability.value == "safe"}
    order = sorted(counts, key=lambda code: (-counts[code], code))
    return [{"code": c, "name": names[c], "count": counts[c], "fixable": c in safe} for c in order]


def render_statistics(diags: list[Diagnostic], stream: TextIO, as_json: bool = False) -> None:
    stream = tolerant(stream)
    rows = statistics(diags)
    if as_json:
        json.dump(rows, stream, indent=2)
        stream.write("\n")
        return
    for row in rows:
        stream.write(f"{row['count']:5d}\t{row['code']}\t{'[*] ' if row['fixable'] else '    '}{row['name']}\n")


def render_summary_line(
    diags: list[Diagnostic], files: int, problems: list, stream: TextIO | None = None, judged: list[str] | None = None
) -> None:
    """The summary of a run, on stderr (the stream looked up when called, so redirections apply): the counts,
    then `judged` (cfgopt.job.job.judged_for_run: the target, GPU count, environment and where they came from),
    a line each (`summary_lines`)."""
    stream = stream or sys.stderr
    s = summary(diags, files)
    parts = [f"{s['errors']} error(s)", f"{s['warnings']} warning(s)", f"{s['infos']} info"]
    line = f"Checked {files} file(s): " + ", ".join(parts)
    if s["fixable"] or s["unsafe_fixable"]:
        line += f"; {s['fixable']} fixable with `cfgopt fix`"
        if s["unsafe_fixable"]:
            line += f" (+{s['unsafe_fixable']} with --unsafe-fixes)"
    if problems:
        line += f"; {len(problems)} file(s) could not be read"
    stream.write(summary_lines(line, judged or []))


SUMMARY_INDENT = "  "


def summary_lines(head: str, judged: list[str]) -> str:
    """A run's summary: `head` (the counts) on the first line, then each part of what the files were judged for
    (`cfgopt.job.job.judged_for_run`: the hardware, the GPU count, the environment, or each settings group's) on
    a line of its own, indented, rather than one line of several hundred characters. Joined with "; " the lines
    read as the one line they replace. Each line is escaped whole: an `environment = ...` name with ESC or a line
    break stays on its line."""
    return "".join(f"{shown(text)}\n" for text in [head, *(SUMMARY_INDENT + part for part in judged)])


def render_found_elsewhere(found: dict[tuple[str, Path], list[Path]], stream: TextIO | None = None) -> None:
    """A note per file a config names that was found from another folder than the current one (stderr): the
    run was judged on the assumption that the job is launched from there."""
    stream = stream or sys.stderr
    for (ref, base), configs in sorted(found.items(), key=lambda item: (str(item[0][1]), item[0][0])):
        named = shown(display_path(configs[0])) + (f" (and {len(configs) - 1} more)" if len(configs) > 1 else "")
        folder = shown(display_path(base)) or "."
        ref = shown(ref)
        stream.write(
            f"note: {named}: `{ref}` found in {folder}, not in the current folder: judged as if launched from "
            "there (llamafactory-cli reads it from the folder it is started in)\n"
        )


# --------------------------------------------------------------------------- dispatch


def tolerant(stream: TextIO) -> TextIO:
    """`stream`, made to write an escape (`\\u4e2d`) for a character its encoding lacks instead of raising
    UnicodeEncodeError: a latin-1 terminal and a CJK key. Only a stream that is not UTF-8 is changed (Python's
    own stderr already does this); on UTF-8 every format escapes what must be escaped itself (`shown`)."""
    import codecs

    encoding = getattr(stream, "encoding", None) or "utf-8"
    reconfigure = getattr(stream, "reconfigure", None)
    try:
        utf8 = codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        utf8 = False
    if not utf8 and reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot change its error handler: as it is
            return stream
    return stream


def render(fmt: str, result, stream: TextIO, fail_on: Severity | None = None, fixes: list[dict] | None = None) -> None:
    """Write `result` (engine.LintResult) in one of the `--format`s; `fail_on`: `--fail-on` (JUnit counts
    failures from it; None: each file's own); `fixes`: `cfgopt fix`'s fixes by file, in the JSON."""
    stream = tolerant(stream)
    if fmt == "json":
        from cfgopt.job.job import files_judged

        render_json(result.diagnostics, result.files, result.problems, stream, files_judged(result), fixes)
    elif fmt == "concise":
        render_concise(result.diagnostics, stream)
    elif fmt in ("json-lines", "github", "sarif", "junit"):
        from cfgopt.lint import ci_formats  # imported only for these formats: the lint path stays small

        ci_formats.render(fmt, result, stream, fail_on)
    else:
        render_full(result.diagnostics, stream)


# --------------------------------------------------------------------------- fixes


def render_available_fixes(diags: list[Diagnostic], stream: TextIO) -> None:
    """`lint --show-fixes`: every fix `cfgopt fix` would apply, by file."""
    stream = tolerant(stream)
    fixable = [d for d in diags if d.fix is not None]
    if not fixable:
        stream.write("No fixes available.\n")
        return
    safe = sum(1 for d in fixable if d.fix is not None and d.fix.applicability.value == "safe")
    shown_only = sum(1 for d in fixable if d.fix is not None and d.fix.applicability.value == "display-only")
    unsafe = len(fixable) - safe - shown_only
    display = f", {shown_only} display-only (never applied: edit by hand)" if shown_only else ""
    stream.write(f"{len(fixable)} fix(es) available ({safe} safe, {unsafe} with --unsafe-fixes{display}):\n")
    for d in fixable:
        assert d.fix is not None
        line, col = d.line_column
        stream.write(
            f"  {shown(display_path(d.path))}:{line}:{col}: {d.code} [{d.fix.applicability}] "
            f"{shown(d.fix.description)}\n"
        )


def fixes_json(applied: dict[Path, list[str]], written: bool) -> list[dict]:
    """`cfgopt fix --format json`'s `fixes`: each changed file, the fixes applied to it, and whether it was written
    (without --write: the fixes that would be)."""
    return [
        {"file": display_path(path), "written": written, "fixes": list(descriptions)}
        for path, descriptions in sorted(applied.items())
        if descriptions
    ]


def render_applied_fixes(applied: dict[Path, list[str]], written: bool, stream: TextIO) -> None:
    """`fix --show-fixes`: the fixes applied (or, without --write, that would be), by file."""
    total = sum(len(v) for v in applied.values())
    verb = "Fixed" if written else "Would fix"
    stream.write(f"{verb} {total} problem(s):\n" if total else "No fixes applied.\n")
    for path in sorted(applied):
        stream.write(f"  {shown(display_path(path))}:\n")
        for description in applied[path]:
            stream.write(f"    {shown(description)}\n")
