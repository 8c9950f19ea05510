"""The rule contract. One rule, one module, one concept: a stable code, a kebab-case name, a default
severity, the kinds of file it reads, its documentation (what, why, when the real tool fails, evidence,
an example, fix safety), and `check`, which yields diagnostics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from cfgopt.project.project import Context
from cfgopt.text.diagnostics import Applicability, Diagnostic, Edit, Fix, Severity
from cfgopt.text.record import Record
from cfgopt.text.source import Entry, Kind, Node, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from cfgopt.job.settings import Settings
    from cfgopt.rules.suppressions import Matched


class ProjectView(Record):
    """What a project-level rule (`Rule.check_project`) sees, once every file's rules ran and the
    suppressions were applied: each file's settings and the suppression comments found (None: none)."""

    settings_for: Callable[[Path], Settings]
    suppressions: Matched | None = None


MAX_MESSAGE = 1200  # a value quoted in a message can be megabytes long; a message stays readable, and whole


def _edits_inside(fix: Fix, entry: Entry) -> bool:
    """Does a fix edit the text of an entry (its key, its value, or at their edges)?"""
    low, high = min(entry.key_start, entry.node.start), max(entry.key_end, entry.node.end)
    return any(edit.start <= high and low <= edit.end for edit in fix.edits)


def key_anchor(src: Source) -> tuple[int, int]:
    """Where a finding about a key of the job that the file does not write points: on a launch line that names a
    YAML (`llamafactory-cli train cfg.yaml`), the YAML's word, as the line's job takes the key from that file (the
    YAML reports it on its own entry too); else the top of the config (a default value is the cause)."""
    named = src.command.get("yaml")
    if named is not None:
        return named[1], named[2]
    root = src.root
    if root is None:
        return 0, 0
    if root.entries:
        return root.entries[0].key_start, root.entries[0].key_end
    return root.start, root.end


def _bounded(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def _detail(message: str) -> str:
    """The whole message where `_bounded` cut it: the machine formats carry it as `detail`."""
    return message if len(message) > MAX_MESSAGE else ""


# What a rule's page says of a fix the job's speed plan replaces (`Rule.fix_replaced_by_plan`), before its own words.
PLANNED_FIX = (
    "Planned: the job's speed plan replaces this rule's fix. `cfgopt fix --unsafe-fixes` writes one plan per training "
    "job (cfgopt/plan/planner.py: the knobs chosen together by the memory model and tune's measured priors); after "
    "the rules and the suppressions, the engine (cfgopt/lint/plans.py) takes the speed rules' own fixes off and gives "
    "the plan, as one unsafe fix, to the job's first fixable speed finding, and drops a finding whose knob the plan "
    "weighed and kept as it is (MEM001 aside). Where no plan is made, the rule's own fix, if any, stays."
)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    kinds: ClassVar[frozenset[Kind]]
    summary: ClassVar[str]
    # Long-form docs, shown by `cfgopt rule CODE` and rendered into rules/<CODE>.md.
    why: ClassVar[str] = ""
    fails_when: ClassVar[str] = ""  # when the real tool fails (or misbehaves): the cost the rule saves
    evidence: ClassVar[tuple[str, ...]] = ()
    example: ClassVar[str] = ""
    fix_safety: ClassVar[str] = "No fix."
    # In the default selection: everything that holds for the job as judged (its config, releases, target and
    # GPU count), speed and memory advice included. Only what is speculative (it depends on data, packages or
    # hardware cfgopt cannot see, or is contested) is opt-in, and `opt_in_because` says why (rules/README.md).
    default_on: ClassVar[bool] = True
    opt_in_because: ClassVar[str] = ""
    # A note about the run rather than a file (CFG003: kinds recognised, not checked): reported once, on its first
    # file, with the number of others (engine._once_per_run).
    once_per_run: ClassVar[bool] = False
    # Why the rule is worth it although it fires on more than a quarter of real configs at default settings
    # (docs/rule-rates.json, written by scripts/rule_rates.py; tests/repository/test_docs.py asks for it).
    worth_it: ClassVar[str] = ""
    # Top-level keys of the file checked (a LLaMA-Factory YAML's or command line's keys, a DeepSpeed JSON's
    # top-level keys) of which at least one must be present for the rule to report anything, or `key=value`: the
    # key written with that text (`stage=ppo`, for a rule about one value); None: it may
    # report on any file of its kinds (a missing key, a default). A run whose files have none of them does not
    # import the rule (`cfgopt.rules.rules_for`, through the generated catalog); tests/rules/test_triggers.py holds
    # every fixture and real config to the same findings with and without this.
    triggers: ClassVar[frozenset[str] | None] = None
    # The job's speed plan replaces this rule's fix: the rule reports its finding, and the engine's last step
    # (`cfgopt.lint.plans.attach_plans`, after the rules and the suppressions) takes the rule's own fix off and gives
    # the job's plan, as one fix, to its first fixable speed finding; it may also move the finding (MEM003's, to the
    # DeepSpeed JSON whose stage the plan writes) or drop it (a knob the plan weighed and kept). The rule's page
    # says so (`PLANNED_FIX`); tests/plan/test_planner.py holds the rules that declare it to the knobs the plan sets
    # (`cfgopt.plan.speed_knobs.OWNERS`).
    fix_replaced_by_plan: ClassVar[bool] = False

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        """The findings in one file of the rule's `kinds` (most rules)."""
        return iter(())

    def check_project(self, project: ProjectView) -> Iterator[Diagnostic]:
        """The findings only known once every file was checked (CFG004); called once per lint run."""
        return iter(())

    # -- helpers for rule bodies -------------------------------------------------------------------
    def at_entry(
        self,
        ctx: Context,
        entry: Entry | None,
        message: str,
        *,
        on: str = "key",
        severity: Severity | None = None,
        fix: Fix | None = None,
        source: Source | None = None,
        key: str = "",
    ) -> Diagnostic:
        """A finding at an entry of the file (its key, or its value with `on="value"`). None: the job holds the
        key (`key`) but this file does not write it; the finding points where the file takes it from
        (`key_anchor`)."""
        src = source or ctx.source
        if entry is None:
            start, end = key_anchor(src)
            return self._diagnostic(src, start, end, message, key, severity, fix)
        if on == "value":
            start, end = entry.node.start, entry.node.end
            if end <= start:
                start, end = entry.key_start, entry.key_end
        else:
            start, end = entry.key_start, entry.key_end
        if fix is not None and entry.merged and _edits_inside(fix, entry):
            fix = None  # a key a `<<:` merge brought in: its text is the merged mapping's (fix_check refuses it too)
        return self._diagnostic(src, start, end, message, entry.dotted, severity, fix)

    def _diagnostic(
        self, src: Source, start: int, end: int, message: str, key: str, severity: Severity | None, fix: Fix | None
    ) -> Diagnostic:
        return Diagnostic(
            document=src.document,
            start=start,
            end=end,
            code=self.code,
            name=self.name,
            severity=severity if severity is not None else self.severity,
            message=_bounded(message),
            detail=_detail(message),
            key=key,
            fix=fix,
        )

    def at_node(
        self,
        ctx: Context,
        node: Node | None,
        message: str,
        *,
        key: str = "",
        severity: Severity | None = None,
        fix: Fix | None = None,
        source: Source | None = None,
    ) -> Diagnostic:
        src = source or ctx.source
        start, end = (node.start, node.end) if node is not None else (0, 0)
        if node is not None and node.entries:  # a whole mapping: point at its first key, not 40 lines
            start, end = node.entries[0].key_start, node.entries[0].key_end
        return self._diagnostic(src, start, end, message, key, severity, fix)

    @staticmethod
    def fix(description: str, edits: list[Edit] | None, *, safe: bool, display_only: bool = False) -> Fix | None:
        if not edits:
            return None
        if display_only:
            return Fix(description, Applicability.DISPLAY, edits)
        return Fix(description, Applicability.SAFE if safe else Applicability.UNSAFE, edits)

    @classmethod
    def docs(cls) -> dict[str, Any]:
        return {
            "code": cls.code,
            "name": cls.name,
            "severity": str(cls.severity),
            "summary": cls.summary,
            "kinds": sorted(k.value for k in cls.kinds),
            "why": cls.why,
            "fails_when": cls.fails_when,
            "evidence": list(cls.evidence),
            "example": cls.example,
            "fix_safety": f"{PLANNED_FIX} {cls.fix_safety}" if cls.fix_replaced_by_plan else cls.fix_safety,
            "default": cls.default_on,
            "opt_in_because": cls.opt_in_because,
            "worth_it": cls.worth_it,
            "module": cls.__module__.replace(".", "/") + ".py",
        }
