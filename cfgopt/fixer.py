"""Apply fixes: non-overlapping span edits, re-lint, repeat to a fixed point (at most MAX_PASSES), then
verify. A file whose result does not parse, or has more errors than the original, is left as it was."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cfgopt.diagnostics import Applicability, Diagnostic, Edit, Severity
from cfgopt.document import real_path
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
    # Fixes not applied because, applied, they would make the file worse (unparseable or more errors).
    withheld: dict[tuple[Path, str, str, str], Diagnostic] = field(default_factory=dict)
    files: int = 0  # config files checked (0: a warning, as for lint)


def apply_edits(text: str, edits: list[Edit]) -> str:
    out, last = [], 0
    for edit in sorted(edits):
        out.append(text[last : edit.start])
        out.append(edit.text)
        last = edit.end
    out.append(text[last:])
    return "".join(out)


def _applicable(diag: Diagnostic, settings: Settings) -> bool:
    return diag.fix is not None and (
        diag.fix.applicability == Applicability.SAFE or settings.for_path(diag.path).unsafe_fixes
    )


def _errors(diags: list[Diagnostic], path: Path) -> list[tuple[str, str]]:
    return sorted((d.code, d.key) for d in diags if d.severity == Severity.ERROR and real_path(d.path) == path)


def _fix_id(diag: Diagnostic) -> tuple[Path, str, str, str]:
    assert diag.fix is not None
    return (real_path(diag.path), diag.code, diag.key, diag.fix.description)


def _worse(after: list[Diagnostic], before: list[Diagnostic], key: Path) -> bool:
    """Did a change make this file worse: unparseable, or more errors than it had?"""
    if any(d.code == "CFG001" and real_path(d.path) == key for d in after):
        return True
    return len(_errors(after, key)) > len(_errors(before, key))


def fix_paths(
    paths: list[Path], settings: Settings, recognised_only: bool = False, overlay: dict[Path, str] | None = None
) -> FixResult:
    """Fix the files under `paths`; `overlay` (resolved path -> text) stands in for files on disk (stdin)."""
    result = FixResult()
    given = dict(overlay or {})
    project = build_project(paths, settings, given, recognised_only=recognised_only)
    before = project.diagnostics()
    result.problems = project.problems
    result.files = len({real_path(src.document.path) for src in project.sources} - project.quiet)
    for key, doc in project.documents.items():
        result.originals[key] = doc.text
        result.bom[key] = doc.has_bom
    overlay = {}
    diags = before

    def candidates(current: list[Diagnostic]) -> list[Diagnostic]:
        return [d for d in current if _applicable(d, settings) and _fix_id(d) not in result.withheld]

    def relint(texts: dict[Path, str]) -> list[Diagnostic]:
        return build_project(paths, settings, {**given, **texts}, recognised_only=recognised_only).diagnostics()

    # A fix withheld in an intermediate state may be fine once the others are in: retry withheld fixes
    # against the final text (at most a few rounds), so that a second `cfgopt fix` finds nothing to do.
    for _round in range(3):
        applied_before = sum(len(v) for v in result.applied.values())
        for _ in range(MAX_PASSES):
            chosen: dict[Path, list[Diagnostic]] = {}
            for diag in candidates(diags):
                assert diag.fix is not None
                taken = [e for d in chosen.get(real_path(diag.path), []) for e in d.fix.edits]  # type: ignore[union-attr]
                if any(
                    (e.start < t.end and t.start < e.end) or (e.start == e.end == t.start == t.end)
                    for e in diag.fix.edits
                    for t in taken
                ):
                    continue  # overlapping: picked up on the next pass
                chosen.setdefault(real_path(diag.path), []).append(diag)
            if not chosen:
                break
            trial = dict(overlay)
            for key, picked in chosen.items():
                edits = [e for d in picked for e in d.fix.edits]  # type: ignore[union-attr]
                trial[key] = apply_edits(overlay.get(key, result.originals[key]), edits)
            trial_diags = relint(trial)
            worse = {key for key in chosen if _worse(trial_diags, diags, key)}
            for key, picked in chosen.items():
                if key not in worse:
                    overlay[key] = trial[key]
                    result.applied.setdefault(key, []).extend(f"{d.code} {d.fix.description}" for d in picked)  # type: ignore[union-attr]
            diags = relint(overlay) if worse else trial_diags
            for key in worse:
                diags = _isolate(key, overlay, diags, result, candidates, relint)
        else:
            for key in overlay:
                result.reverted[key] = f"fixes did not converge in {MAX_PASSES} passes (please report this)"

        applied_now = sum(len(v) for v in result.applied.values())
        if not result.withheld or (_round > 0 and applied_now == applied_before):
            break
        if not any(_fix_id(d) in result.withheld for d in diags if d.fix is not None):
            break
        result.withheld.clear()

    # Verify: every changed file still parses and has no more errors than before.
    for key in list(overlay):
        if key not in result.reverted and _worse(diags, before, key):
            new = sorted(set(_errors(diags, key)) - set(_errors(before, key)))
            result.reverted[key] = f"the fixed file is worse than the original {new} (please report this)"
    for key in result.reverted:
        overlay.pop(key, None)
        result.applied.pop(key, None)
    if result.reverted:
        diags = relint(overlay)
    result.fixed = {k: v for k, v in overlay.items() if v != result.originals[k]}
    result.remaining = diags
    return result


def _isolate(key, overlay, diags, result, candidates, relint) -> list[Diagnostic]:
    """The fixes for this file made it worse together: apply them one at a time instead (fresh offsets
    after each), keeping each one that does not make the file worse and withholding the others. A fix can
    be right on its own terms and still wrong here, e.g. renaming a misspelt DeepSpeed key that DeepSpeed
    ignored makes it read the key's invalid value."""
    while True:
        mine = [d for d in candidates(diags) if real_path(d.path) == key]
        if not mine:
            return diags
        diag = mine[0]
        attempt = dict(overlay)
        attempt[key] = apply_edits(overlay.get(key, result.originals[key]), diag.fix.edits)
        attempt_diags = relint(attempt)
        if _worse(attempt_diags, diags, key):
            result.withheld[_fix_id(diag)] = diag
            continue
        overlay[key] = attempt[key]
        result.applied.setdefault(key, []).append(f"{diag.code} {diag.fix.description}")
        diags = attempt_diags
