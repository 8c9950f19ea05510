from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import ProjectView, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import real_path
from cfgopt.text.source import Kind

TYPE_CHECKING = False
if TYPE_CHECKING:  # imported when there is a suppression to judge, not on every lint run
    from cfgopt.job.settings import Settings
    from cfgopt.rules.suppressions import RuleCodes, Suppression
    from cfgopt.text.document import Document


class UnusedSuppression(Rule):
    """A project-level rule: whether a suppression is used is only known once every other rule has run
    and the suppressions were matched against their findings (`cfgopt.rules.suppressions.apply_suppressions`,
    called by the engine). So it has no per-file `check`; the engine calls `check_project` after that
    matching. `--select`/`--ignore` and `per-file-ignores` apply to it as to any rule.
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

    def check_project(self, project: ProjectView) -> Iterator[Diagnostic]:
        matched = project.suppressions
        if matched is None:
            return
        for doc, sups in matched.files:
            if real_path(doc.path) in matched.unparsed:
                continue  # only CFG001 ran there: whether a comment suppresses anything is unknown
            settings = project.settings_for(doc.path)
            if settings.is_selected(self.code) and not settings.ignored_in_file(doc.path, self.code):
                for sup in sups:
                    diag = self._unused(doc, sup, settings, matched.codes)
                    if diag is not None:
                        yield diag

    def _unused(self, doc: Document, sup: Suppression, settings: Settings, codes: RuleCodes) -> Diagnostic | None:
        """The finding for one suppression that suppressed nothing (or some of whose codes did not)."""
        from cfgopt.rules.suppressions import removal_fix, shrink_fix

        first, last = sup.covers
        where = (
            "in this file" if sup.file_level else (f"on line {first}" if first == last else f"on lines {first}-{last}")
        )
        if not sup.codes:
            if sup.used:
                return None
            reasons, dropped = [f"nothing to suppress {where}"], set()
        else:
            reasons, dropped = self._unused_codes(doc, sup, settings, codes, where)
            if not dropped:
                return None
        drop_all = not sup.codes or len(dropped) == len(sup.codes)
        return Diagnostic(
            document=doc,
            start=sup.start,
            end=sup.end,
            code=self.code,
            name=self.name,
            severity=self.severity,
            message="Unused suppression: " + "; ".join(reasons),
            fix=removal_fix(doc, sup) if drop_all else shrink_fix(sup, dropped),
        )

    def _unused_codes(
        self, doc: Document, sup: Suppression, settings: Settings, codes: RuleCodes, where: str
    ) -> tuple[list[str], set[int]]:
        """Why each unused or unknown code of a suppression's list is reported, and their indexes."""
        from cfgopt.text.suggest import closest

        reasons: list[str] = []
        dropped: set[int] = set()
        for i, (written, _, _) in enumerate(sup.codes or ()):
            code = codes.resolve(written)
            if code is None:
                hint = closest(written.upper(), sorted(codes.codes)) or closest(written.lower(), codes.names)
                reasons.append(f"unknown rule code `{written}`" + (f" (did you mean `{hint}`?)" if hint else ""))
                dropped.add(i)
            elif code == self.code or not settings.is_selected(code) or settings.ignored_in_file(doc.path, code):
                continue  # not run on this file: whether it would fire here is unknown
            elif code not in sup.used:
                reasons.append(f"no {code} finding {where}")
                dropped.add(i)
        return reasons, dropped
