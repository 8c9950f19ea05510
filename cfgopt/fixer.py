"""Apply fixes: non-overlapping span edits, re-lint, repeat to a fixed point (at most MAX_PASSES), then
verify. A file whose result does not parse, or has an error the original did not have, is left as it was."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cfgopt.diagnostics import Applicability, Diagnostic, Edit, Severity
from cfgopt.engine import build_project
from cfgopt.settings import Settings

MAX_PASSES = 10


@dataclass
class FixResult:
    originals: dict[Path, str] = field(default_factory=dict)  # resolved path -> text before
    fixed: dict[Path, str] = field(default_factory=dict)  # resolved path -> text after (changed files only)
    applied: dict[Path, list[str]] = field(default_factory=dict)  # descriptions of the fixes applied
    reverted: dict[Path, str] = field(default_factory=dict)  # file -> why its fixes were dropped
    remaining: list[Diagnostic] = field(default_factory=list)
    problems: list = field(default_factory=list)
    bom: dict[Path, bool] = field(default_factory=dict)


def apply_edits(text: str, edits: list[Edit]) -> str:
    out, last = [], 0
    for edit in sorted(edits):
        out.append(text[last : edit.start])
        out.append(edit.text)
        last = edit.end
    out.append(text[last:])
    return "".join(out)


def _applicable(diag: Diagnostic, settings: Settings) -> bool:
    return diag.fix is not None and (diag.fix.applicability == Applicability.SAFE or settings.unsafe_fixes)


def _error_keys(diags: list[Diagnostic], path: Path) -> set[tuple[str, str]]:
    return {(d.code, d.key) for d in diags if d.severity == Severity.ERROR and d.path.resolve() == path}


def fix_paths(paths: list[Path], settings: Settings) -> FixResult:
    result = FixResult()
    project = build_project(paths, settings)
    before = project.diagnostics()
    result.problems = project.problems
    for key, doc in project.documents.items():
        result.originals[key] = doc.text
        result.bom[key] = doc.has_bom
    overlay: dict[Path, str] = {}
    diags = before
    for _ in range(MAX_PASSES):
        chosen: dict[Path, list[Edit]] = {}
        described: dict[Path, list[str]] = {}
        for diag in diags:
            if not _applicable(diag, settings):
                continue
            key = diag.path.resolve()
            taken = chosen.setdefault(key, [])
            new = diag.fix.edits
            if any(
                (e.start < t.end and t.start < e.end) or (e.start == e.end == t.start == t.end)
                for e in new
                for t in taken
            ):
                continue  # overlapping: picked up on the next pass
            taken.extend(new)
            described.setdefault(key, []).append(f"{diag.code} {diag.fix.description}")
        if not any(chosen.values()):
            break
        for key, file_edits in chosen.items():
            if not file_edits:
                continue
            current = overlay.get(key, result.originals[key])
            overlay[key] = apply_edits(current, file_edits)
            result.applied.setdefault(key, []).extend(described[key])
        project = build_project(paths, settings, overlay)
        diags = project.diagnostics()
    else:
        for key in overlay:
            result.reverted[key] = f"fixes did not converge in {MAX_PASSES} passes (please report this)"

    # Verify: every changed file still parses and has no error it did not have before.
    for key in list(overlay):
        if key in result.reverted:
            continue
        if any(d.code == "CFG001" and d.path.resolve() == key for d in diags):
            result.reverted[key] = "the fixed text did not parse (please report this)"
        elif _error_keys(diags, key) - _error_keys(before, key):
            new = sorted(_error_keys(diags, key) - _error_keys(before, key))
            result.reverted[key] = f"the fix introduced new errors {new} (please report this)"
    for key in result.reverted:
        overlay.pop(key, None)
        result.applied.pop(key, None)
    if result.reverted:
        project = build_project(paths, settings, overlay)
        diags = project.diagnostics()
    result.fixed = {k: v for k, v in overlay.items() if v != result.originals[k]}
    result.remaining = diags
    return result
