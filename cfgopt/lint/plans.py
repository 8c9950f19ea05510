"""The engine's last step: each job's speed plan given to its findings, after the rules and the suppressions.

The rules whose fix the plan replaces (`Rule.fix_replaced_by_plan`) report their findings with no fix of their own
(or one that stands only where no plan is made); `attach_plans` removes their fixes and gives the job's plan
(`cfgopt.plan.planner.plan_for`), as ONE unsafe fix, to the first of that job's fixable speed findings. It moves the
finding about the ZeRO stage to the DeepSpeed JSON where the plan writes the stage there (`_move_to_json`), drops a
finding whose knob the plan judged right (`_kept_by`), and leaves a JSON every config of which drops DeepSpeed as it is
(`_drop_answered_json_fixes`). `keep_pins_with_their_plans`: a pin (ENV004) proposed only with the plan that uses it.
"""

from __future__ import annotations

from cfgopt.plan.speed_knobs import JSON_SPEED_CODES, LEFT_ALONE, OWNERS
from cfgopt.text.diagnostics import Applicability, Diagnostic, Fix, OtherPart
from cfgopt.text.document import real_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from pathlib import Path

    from cfgopt.plan.speed_plan import SpeedPlan, StoppedJob
    from cfgopt.project.project import Context
    from cfgopt.text.source import Source


def attach_plans(
    context: Callable[[Source], Context],
    diags: list[Diagnostic],
    owners: dict[int, Source],
    planned: Collection[str],
    hidden: Collection[Path] = (),
) -> None:
    """Replace the planned rules' own fixes by each job's plan, given to its first fixable speed finding; a plan
    that lowers the ZeRO stage moves the stage's finding to the JSON, with the JSON's edit (`_move_to_json`).
    `context`: a file's rule context (the engine's `Project.context`); `planned`: the codes of the rules whose fix
    the plan replaces (`Rule.fix_replaced_by_plan`); `hidden`: real paths of files whose findings are not shown
    (excluded, not checked)."""
    from cfgopt.plan.planner import plan_edits, plan_for
    from cfgopt.plan.speed_plan import StoppedJob

    by_source: dict[int, list[Diagnostic]] = {}
    for d in diags:
        src = owners.get(id(d))
        if d.code in planned and src is not None:
            by_source.setdefault(id(src), []).append(d)
    sources = {id(s): s for s in owners.values()}
    drop: set[int] = set()
    for sid, found in by_source.items():
        src = sources[sid]
        ctx = context(src)
        plan = plan_for(ctx.job)
        if plan is None:
            continue  # no plan (no training run, nothing fits): the rules' own messages and fixes stay
        if isinstance(plan, StoppedJob):
            _say_why_stopped(found, plan)
            continue
        if plan.with_packages is not None and not plan.changed:
            _say_why_no_plan(found, plan)
            continue
        moved = _move_to_json(context, ctx, plan, found, hidden)
        other_part = None
        if moved is not None:
            from cfgopt.plan.wording import json_part_words  # only here and below: a plan that changes something

            finding, on_json = moved
            other_part = OtherPart(on_json.path, on_json.key, json_part_words(plan))
            diags[next(i for i, d in enumerate(diags) if d is finding)] = on_json
            owners[id(on_json)] = src
            found = [d for d in found if d is not finding]
        # a setting the plan judged right is no warning (its fix would not change it)
        kept = {id(d) for d in found if _kept_by(plan, d.code)}
        if plan.config_changed and found and len(kept) == len(found):
            kept.discard(id(found[0]))  # the plan's fix needs a finding to carry it
        drop |= kept
        made = plan_edits(src, plan) if plan.config_changed else None
        live = [d for d in found if id(d) not in drop]
        carrier = next((d for d in live if ctx.settings.is_fixable(d.code)), None)
        if not made or carrier is None:
            _say_json_kept(plan, live)
            continue  # no plan: a rule's own fix (PF001's bf16) stays
        for d in live:
            d.fix = None
        from cfgopt.plan.wording import description

        # the JSON's part is the moved finding's: the fixer says "in part" where that one is not written
        carrier.fix = Fix(description(plan), Applicability.UNSAFE, made, planned=True, other_part=other_part)
        _say_json_kept(plan, live)
    diags[:] = sorted((d for d in diags if id(d) not in drop), key=Diagnostic.sort_key)
    _drop_answered_json_fixes(context, diags, owners)


def _move_to_json(
    context: Callable[[Source], Context],
    ctx: Context,
    plan: SpeedPlan,
    found: list[Diagnostic],
    hidden: Collection[Path],
) -> tuple[Diagnostic, Diagnostic] | None:
    """A plan that lowers the ZeRO stage writes it in the job's DeepSpeed JSON: the finding about the stage (MEM003)
    moves to the JSON's `zero_optimization.stage`, carrying that edit, so each file's fix edits that file and both
    are applied in one run. (finding, moved) or None: no stage planned, no such finding, or the JSON does not show
    it (a file not shown, a per-file ignore of the code there)."""
    json_src = ctx.job.deepspeed_source
    finding = next((d for d in found if "zero" in _KNOBS_OF.get(d.code, ())), None)
    if plan.deepspeed_stage is None or json_src is None or finding is None or not ctx.settings.is_fixable(finding.code):
        return None
    path = json_src.document.path
    if real_path(path) in hidden or context(json_src).settings.ignored_in_file(path, finding.code):
        return None
    from cfgopt.plan.knob_edits import stage_edits  # only here: most plans write no stage
    from cfgopt.plan.wording import json_fix_words

    entry = json_src.find(("zero_optimization", "stage"))
    made = stage_edits(json_src, plan.deepspeed_stage)
    if entry is None or not made:
        return None
    moved = Diagnostic(
        json_src.document,
        entry.node.start,
        entry.node.end,
        finding.code,
        finding.name,
        finding.severity,
        finding.message,
        key="zero_optimization.stage",
        fix=Fix(json_fix_words(ctx.source, plan), Applicability.UNSAFE, made, planned=True),
    )
    return finding, moved


def _say_json_kept(plan: SpeedPlan, found: list[Diagnostic]) -> None:
    """The finding about the ZeRO stage (MEM003) says why the plan leaves the JSON at its stage where another
    config reads it (`SpeedPlan.json_kept`), in its message (which every output shows), unless it carries a fix
    (the plan's own, whose description says it)."""
    if not plan.json_kept:
        return
    for d in found:
        if d.fix is None and "zero" in _KNOBS_OF.get(d.code, ()) and plan.json_kept not in d.message:
            d.message += f"; {plan.json_kept}"


def _say_why_stopped(found: list[Diagnostic], plan: StoppedJob) -> None:
    """The job's most severe speed finding says, in one line, why there is no plan (and no fix offers a gain)."""
    first = max(found, key=lambda d: d.severity)
    if _NO_PLAN_STOPPED not in first.message:
        first.message += f"; {_NO_PLAN_STOPPED}: {plan.why}"


_NO_PLAN_STOPPED = "no speed plan"


def _say_why_no_plan(found: list[Diagnostic], plan: SpeedPlan) -> None:
    """No plan fits the job's environment, though one would with the packages it lacks: the first finding says so
    (never a silent fall-back to a plan many times slower)."""
    from cfgopt.plan.wording import with_packages_words

    assert plan.with_packages is not None
    first = max(found, key=lambda d: d.severity)  # the most severe finding: MEM001 where nothing fits
    if _NO_PLAN not in first.message:
        first.message += f"; {_NO_PLAN} ({plan.with_packages.source}): {with_packages_words(plan.with_packages)}"


_NO_PLAN = "no speed plan fits the job's environment"


# A speed finding whose knob the plan leaves as it is is dropped: the plan spends the memory on something the priors
# rank faster (Qwen3-4B LoRA DPO on the H200: 8 x 1 with checkpointing on ran 2.6x what 2 x 4 without it did), so
# warning about the setting would be a finding whose fix does not fix it.
_KNOBS_OF = {
    code: tuple(k for k, owners in OWNERS.items() if code in owners) for codes in OWNERS.values() for code in codes
}


def _kept_by(plan: SpeedPlan, code: str) -> bool:
    """Does the plan leave every knob that `code`'s finding is about as it is? (MEM001, about memory as a whole,
    owns several knobs and is answered by any of them.)"""
    knobs = _KNOBS_OF.get(code, ())
    if code == "MEM001" or not knobs:
        return False
    # judged, not merely left: the plan weighed other values of the knob (a ZeRO stage it cannot edit is not)
    return all(k in plan.searched and getattr(plan.best, k) == getattr(plan.base, k) for k in knobs)


def _drop_answered_json_fixes(
    context: Callable[[Source], Context], diags: list[Diagnostic], owners: dict[int, Source]
) -> None:
    """A plan that removes `deepspeed:` from every config using a JSON leaves that JSON alone: editing it in the
    same run (an offload removed from a file no job reads any more) is a change nobody asked for, and the file
    may be shared (`speed_knobs.JSON_SPEED_CODES`: the fixes that change only how DeepSpeed runs; the README
    promises that JSON is left as it is). Its findings keep their message; their fix says so (`LEFT_ALONE`,
    display-only)."""
    from cfgopt.plan.planner import plan_for

    for d in diags:
        src = owners.get(id(d))
        if d.code not in JSON_SPEED_CODES or d.fix is None or src is None or src.kind.is_llamafactory:
            continue
        consumers = context(src).consumers
        plans = [plan_for(context(c).job) for c in consumers]
        if consumers and all(p is not None and p.drop_deepspeed for p in plans):
            d.fix = Fix(LEFT_ALONE, Applicability.DISPLAY, [])


# A pin proposed only with the change that uses it: ENV004 adds to a requirement file the package a config's speed
# plan would use (liger-kernel, bitsandbytes). The pin alone changes nothing but what the node installs: the plan that
# uses it is written on the next pass of the same `cfgopt fix` (the fixer re-lints its edited texts, and the job's
# environment is read from them), and only where that config's speed findings are in the run and fixable. Where they
# are not (the config excluded, its speed rules not selected or not fixable), the pin would sit unused, so ENV004
# keeps its message and loses its fix.
PIN_CODES = frozenset({"ENV004"})


def keep_pins_with_their_plans(
    context: Callable[[Source], Context], diags: list[Diagnostic], owners: dict[int, Source], planned: Collection[str]
) -> None:
    """Drop the fix of each pin finding whose requirement file's configs have no fixable speed finding in this run
    (the finding that carries, now or on the next pass, the plan that uses the package); `planned`: the codes of the
    rules whose fix the plan replaces."""
    with_plans = {
        id(src)
        for d in diags
        if d.code in planned and (src := owners.get(id(d))) is not None and context(src).settings.is_fixable(d.code)
    }
    for d in diags:
        src = owners.get(id(d))
        if d.code not in PIN_CODES or d.fix is None or src is None:
            continue
        if not any(id(config) in with_plans for config in context(src).consumers):
            d.fix = None
