"""Which fixes may be applied: the whole fix policy in one place, read by the engine (to show a finding as
fixable or not) and by the fixer (to apply it).

A fix applies when its rule is fixable by the project config (`fixable` / `unfixable`, as in ruff) and it is
safe, or unsafe with `--unsafe-fixes`. Kept apart from `fixer`, which imports the engine, so that the engine
can strip unfixable fixes without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cfgopt.diagnostics import Applicability, Diagnostic
from cfgopt.settings import Settings


def strip_unfixable(diags: list[Diagnostic], settings_for: Callable[[Path], Settings]) -> None:
    """Take the fix off each finding of a rule the project config lists as `unfixable` (or leaves out of
    `fixable`): such findings are reported, never fixed, and not counted as fixable."""
    for d in diags:
        if d.fix is not None and not settings_for(d.path).is_fixable(d.code):
            d.fix = None


def may_apply(diag: Diagnostic, settings: Settings) -> bool:
    """Does `cfgopt fix` apply this finding's fix (with these settings)?"""
    if diag.fix is None:
        return False
    own = settings.for_path(diag.path)
    return own.is_fixable(diag.code) and (diag.fix.applicability == Applicability.SAFE or own.unsafe_fixes)
