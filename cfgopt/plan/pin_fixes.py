"""A pin proposed only with the change that uses it.

ENV004 adds to a requirement file the package a config's speed plan would use (liger-kernel, bitsandbytes). The
pin alone changes nothing but what the node installs: the plan that uses it is written on the next pass of the same
`cfgopt fix` (the fixer re-lints its edited texts, and the job's environment is read from them), and only where that
config's speed findings are in the run and fixable. Where they are not (the config excluded, its speed rules not
selected or not fixable), the pin would sit unused, so ENV004 keeps its message and loses its fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cfgopt.plan.speed_knobs import PLANNED_CODES

if TYPE_CHECKING:
    from collections.abc import Callable

    from cfgopt.job.project import Context
    from cfgopt.text.diagnostics import Diagnostic
    from cfgopt.text.source import Source

PIN_CODES = frozenset({"ENV004"})


def keep_pins_with_their_plans(
    context: Callable[[Source], Context], diags: list[Diagnostic], owners: dict[int, Source]
) -> None:
    """Drop the fix of each pin finding whose requirement file's configs have no fixable speed finding in this run
    (the finding that carries, now or on the next pass, the plan that uses the package)."""
    planned = {
        id(src)
        for d in diags
        if d.code in PLANNED_CODES
        and (src := owners.get(id(d))) is not None
        and context(src).settings.is_fixable(d.code)
    }
    for d in diags:
        src = owners.get(id(d))
        if d.code not in PIN_CODES or d.fix is None or src is None:
            continue
        if not any(id(config) in planned for config in context(src).consumers):
            d.fix = None
