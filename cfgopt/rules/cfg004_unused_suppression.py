from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind


class UnusedSuppression(Rule):
    """Documentation and identity of CFG004; the diagnostics come from `cfgopt.suppressions`.

    Whether a suppression is used is only known once every other rule has run on the file and the
    suppressions were matched against their findings, which happens in one place after the rules
    (`cfgopt.suppressions.apply_suppressions`, called by the engine). So `check` yields nothing: the engine
    builds CFG004's diagnostics with this class's code, name and severity, and `--select`/`--ignore`,
    `per-file-ignores` and `# cfgopt: ignore-file[CFG004]` apply to it as to any rule.
    """

    code = "CFG004"
    name = "unused-suppression"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI, Kind.LF_V1, Kind.ACCELERATE})
    summary = "A `# cfgopt: ignore[...]` comment that suppresses nothing, or names an unknown rule code"
    why = (
        "A suppression outlives the finding it was written for: the key gets fixed, renamed or deleted, or the "
        "rule code is mistyped (`LF01` for `LF001`) and never suppressed anything. A stale suppression then "
        "hides the next real finding on that line without anyone noticing, and an unknown code gives a false "
        "sense that something is silenced. As ruff's RUF100, cfgopt reports the suppressions that did nothing "
        "on this run: a comment (`ignore[...]` on the line or the line above, `ignore-file[...]`) none of whose "
        "codes had a finding where it applies, the unused codes of a list, and codes that are no rule. Codes "
        "of rules not selected for the file (`--select`, `ignore`, `per-file-ignores`) are left alone: whether "
        "they would fire there is unknown."
    )
    fails_when = "Never: cfgopt's own bookkeeping. The cost is the finding a stale suppression will hide later."
    evidence = (
        "ruff's RUF100 unused-noqa (docs/linter.md 'Detecting unused suppressions') and astral-sh/ruff#2194 "
        "(do not strip codes of rules that are not enabled)",
        "docs/evidence/linter_anchors.md §1.7",
    )
    example = (
        "flash_attn: sdpa  # cfgopt: ignore[LF003]\n"
        "->  warning: Unused suppression: no LF003 finding on line 1\n"
        "    fix (safe): Remove the unused suppression comment  ->  flash_attn: sdpa"
    )
    fix_safety = (
        "Safe: removes the comment (its whole line when it stands alone), or only the unused and unknown codes "
        "from its list; nothing else in the file changes, and no finding reappears, since the comment "
        "suppressed nothing on this run."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        return iter(())  # reported by cfgopt.suppressions after every rule ran (see the class docstring)
