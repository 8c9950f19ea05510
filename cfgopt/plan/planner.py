"""The speed plan's search: the unsafe speed fixes of one training job, chosen together.

The speed rules (PF006 packing, PF007 / MEM005 micro-batch, MEM004 gradient checkpointing, PF009 Liger, PF004
attention, MEM003 / PF050 DeepSpeed, MEM001 out of memory, PF001 / PF002 precision) each report their finding, and
declare that the plan writes their fix (`Rule.fix_replaced_by_plan`): the knobs interact (a bigger micro-batch can use
the memory that turning checkpointing off needs), so fixed one rule at a time they fight. Instead `plan_for(job)`
searches the knobs jointly, the way `cfgopt tune` would rank them before running anything:

- candidates (`cfgopt.plan.candidates`): `cfgopt.plan.space` (micro-batch x accumulation with the global batch kept,
  checkpointing, attention, packing, Liger, DeepSpeed kept or dropped), limited to what the job allows (packing only
  for SFT that does not set it, and none where LLaMA-Factory 0.9.4 may refuse it with the environment's
  transformers, LF054; Liger only for a model it patches; fa2 only where flash-attn is known to be there; no SDPA
  for Gemma 2, whose soft-capping it drops: `space.refusal`, tune's rule too), and judged in the job's environment
  (`expected_speed.Runtime`: `fa2` without flash-attn is SDPA, eager for Gemma 2; neat packing with several rows
  then runs as that, written, so the file does not stop at LF019's assertion once flash-attn is installed);
- fit (here): the memory model through the job (`Job.estimate`, 10% headroom, tune's pruning limit); without an
  estimate only what cannot raise memory moves (`candidates.keep_memory_as_written`: the micro-batch, packing and
  checkpointing stay as written), and the plan says why (`Job.estimate_gap`);
- rank (here): `cfgopt.plan.priors` (the H200 measurements tune uses, as `expected_speed.plan_speed` runs them), then
  the smaller estimated peak, then fewer changes: so `cfgopt fix --unsafe-fixes` writes tune's top prediction, and
  `tune` starts from it.

The plan is a `cfgopt.plan.speed_plan.SpeedPlan`, said in words by `cfgopt.plan.wording`; the engine's last step
(`cfgopt.lint.plans.attach_plans`, after the rules and suppressions) gives it, as ONE fix, to the first of that job's
speed findings. Plans are memoized on the job and shared between jobs whose planning inputs agree (`_shared_plan`).
"""

from __future__ import annotations

from cfgopt.job.job import GPUS_IF_UNSTATED_SPEND, Job
from cfgopt.knowledge import methods
from cfgopt.knowledge.deepspeed_plan import at_stage
from cfgopt.plan import space
from cfgopt.plan.candidates import (
    LOWER_STAGE,
    job_platform,
    job_refusal,
    json_pins_batch,
    kept_combinations,
    neat_transformers_stops,
    plan_keys,
    planned_knobs,
    platform_with_extras,
    values_for,
)
from cfgopt.plan.expected_speed import data_term_of, plan_speed, runtime_of
from cfgopt.plan.json_fixes import JSON_READERS_LOOKED_AT, json_as_fixed, json_kept_for
from cfgopt.plan.priors import rank
from cfgopt.plan.reasons import MEMORY, NUMERICS, PACKAGE, Rejection, does_not_fit
from cfgopt.plan.speed_knobs import PACKAGES, liger_plannable
from cfgopt.plan.speed_plan import SpeedPlan, StoppedJob, WithPackages

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.text.diagnostics import Edit
    from cfgopt.text.source import Source


def plan_for(job: Job, knobs: tuple[str, ...] | None = None) -> SpeedPlan | None:
    """The fastest candidate by tune's priors that fits by the memory model (memoized on the job, and shared by
    jobs whose planning inputs agree); None when the job is not a training run or nothing fits."""
    knobs = planned_knobs(job) if knobs is None else knobs
    key = f"plan:{knobs}"
    if key not in job.memo:
        job.memo[key] = _unless_stopped(job, _shared_plan(job, knobs)) if job.training and knobs else None
    return job.memo[key]


# Plans shared between jobs whose planning inputs agree: the launch lines of a sweep differ in their output folder
# (and a few values the planner never reads), and each planned alone cost ~13 ms a line (in a 600-line
# sweep). Bounded; the key holds every input the plan reads, so a hit is the plan the job would get.
_PLANS: dict[str, SpeedPlan | None] = {}
_PLANS_MAX = 4096
# Keys no plan reads (where the run writes and logs): left out of the key, so sweeps over them share one plan
_NOT_PLANNED = frozenset({"output_dir", "run_name", "logging_dir", "logging_steps", "save_steps", "report_to"})


def _shared_plan(job: Job, knobs: tuple[str, ...]) -> SpeedPlan | None:
    from cfgopt.job.job import memo_text

    settings, env = job.settings, job.environment
    known, ds = job.deepspeed
    inputs = {
        "values": {k: v for k, v in job.values().items() if k not in _NOT_PLANNED},
        "set": sorted(str(k) for k in job.data),  # a value the user set is theirs (packing, optim)
        "deepspeed": [known, ds],
        # where the JSON is and whether another config reads it: a plan that lowers its stage names and edits it
        "deepspeed_file": [
            str(job.deepspeed_source.document.path) if job.deepspeed_source else None,
            job.deepspeed_shared,
        ],
        "hardware": list(job.hardware(GPUS_IF_UNSTATED_SPEND)),
        "target": repr(settings.target),
        "environment": [env.source, sorted(env.packages.items()), env.assumed],
        "selection": [settings.select, settings.extend_select, settings.ignore, settings.named("PF009")],
        # the offloads the run's MEM002 / PF051 remove from the JSON: the plan is estimated without them
        "json_fixes": json_as_fixed(job, job.hardware(GPUS_IF_UNSTATED_SPEND).gpus).removed,
        "releases": [
            settings.llamafactory_releases,  # the range the project allows: LF019's check is 0.9.5's only
            settings.llamafactory_version,
            settings.deepspeed_version,
            settings.gpus,
            settings.gpus_source,
        ],
        "knobs": list(knobs),
        "folder": str(job.path.parent),  # a local model's config.json is read from beside the config
        "group": job.group,
        "data": hash(job.data_profile),  # the data term reads the profile (its files' contents, in this process)
    }
    key = memo_text(inputs)
    if key.startswith("id:"):  # inputs that cannot be written out: no sharing
        return _plan(job, knobs)
    if key not in _PLANS:
        plan = _plan(job, knobs)
        if job.memo.get(JSON_READERS_LOOKED_AT):
            return plan  # it read files outside the run (the JSON's readers), which the key does not hold
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    return _PLANS[key]


def _plan(job: Job, knobs: tuple[str, ...]) -> SpeedPlan | None:
    """The plan for the job's environment, with what the packages it lacks would bring (`WithPackages`)."""
    plan = _search(job, knobs, job_platform(job))
    missing = _missing_packages(job)
    if not missing:
        return plan
    richer = _search(job, _knobs_with_packages(job, knobs), platform_with_extras(job))
    if richer is None or not richer.changed:
        return plan
    used = [package for module, package in PACKAGES.values() if package in missing and _uses(richer, module)]
    stage = methods.stage_of(job.values())
    n = richer.hardware.gpus
    data = data_term_of(job)
    run = runtime_of(job)
    gain = plan_speed(richer.best, richer.base, n, stage, data, run) / plan_speed(
        plan.best if plan else richer.base, richer.base, n, stage, data, run
    )
    if used and gain >= _WORTH_A_PACKAGE:
        richer.environment = job.environment.source
        with_packages = WithPackages(used, richer, gain, job.environment.where, plan is not None and plan.changed)
        if plan is None:
            return _unchanged(richer, with_packages)
        plan.with_packages = with_packages
    return plan


def _knobs_with_packages(job: Job, knobs: tuple[str, ...]) -> tuple[str, ...]:
    """The knobs the next run plans once the missing packages are installed: Liger with them where a plan would
    turn it on (`liger_plannable`), and never where it would not (so no pin is proposed for a plan nobody makes)."""
    with_liger = (*knobs, "liger") if liger_plannable(job) else tuple(k for k in knobs if k != "liger")
    return tuple(dict.fromkeys(with_liger))


# A package the environment lacks is named where the plan with it is expected this much faster (Liger alone was
# 1.15x on a Qwen2.5-7B LoRA SFT on the H200).
_WORTH_A_PACKAGE = 1.05


def _missing_packages(job: Job) -> list[str]:
    """The packages a plan may use (PACKAGES) that the job's environment does not have (flash-attn aside)."""
    return [package for module, package in PACKAGES.values() if module != "flash_attn" and not job.has_package(module)]


def _uses(plan: SpeedPlan, module: str) -> bool:
    from cfgopt.knowledge.bitsandbytes import is_bnb_optimizer

    k, b = plan.best, plan.base
    return {
        "liger_kernel": k.liger and not b.liger,
        "flash_attn": k.attn == "fa2" != b.attn,
        "bitsandbytes": is_bnb_optimizer(k.optim) and k.optim != b.optim,
    }[module]


def _unchanged(richer: SpeedPlan, with_packages: WithPackages) -> SpeedPlan:
    """No plan fits the job's environment: a plan that changes nothing, carrying why (what the packages would
    bring), so the findings say it instead of falling silent."""
    plan = SpeedPlan(richer.hardware, richer.base, richer.base, 1.0)
    plan.with_packages = with_packages
    return plan


def _estimate(job: Job, k: space.Knobs, base: space.Knobs, n: int):
    """The memory estimate of candidate `k`: its YAML keys set, and the job's DeepSpeed JSON as the run leaves it (at
    the lower stage where `k` lowers it), without the offloads MEM002 / PF051 remove in the same run (`json_as_fixed`)
    so that the plan fits, and states the peak of, the files the user gets."""
    changes = plan_keys(k, base)
    if k.zero == "none" and base.zero != "none":
        return job.estimate(n, deepspeed=None, **changes)
    fixed = json_as_fixed(job, n)
    if k.zero != base.zero:  # the job's own JSON at the lower stage (`lower_stage`)
        return job.estimate(n, deepspeed=at_stage(fixed.deepspeed or {}, LOWER_STAGE), **changes)
    if fixed.removed:
        return job.estimate(n, deepspeed=fixed.deepspeed, **changes)
    return job.estimate(n, **changes)


def _search(job: Job, knobs: tuple[str, ...], platform: space.Platform) -> SpeedPlan | None:
    """The fastest candidate on `platform` by tune's priors that fits by the memory model; None when none does."""
    _, ds = job.deepspeed  # a DeepSpeed file not read: no estimate, so its stage stays as it is
    hardware = job.hardware(GPUS_IF_UNSTATED_SPEND)
    n = hardware.gpus  # unstated: 1, so that what is planned fits on any count
    # the optimizer as written (tune's baseline reads the config as written): a filled-in default is no choice
    base = space.baseline_knobs(job.values(), ds, job.soft_capped_attention)._replace(optim=space.optim_of(job.data))
    has_estimate = job.estimate(n) is not None
    stage = methods.stage_of(job.values())
    data, run = data_term_of(job), runtime_of(job)
    values = values_for(job, base, knobs, has_estimate, platform)
    searched = {name for name, offered in values.items() if len(offered) > 1}
    rejected: dict[space.Knobs, Rejection] = {}
    ranked = []
    refusal = job_refusal(job, base)
    candidates = kept_combinations(base, values, json_pins_batch(ds), rejected, refusal, job.soft_capped_attention)
    for i, k in enumerate(candidates):
        est = _estimate(job, k, base, n) if has_estimate else None
        if has_estimate and (est is None or not est.fits_with_headroom()):
            why = does_not_fit(est.required_gib) if est is not None else "the memory model cannot estimate it"
            rejected[k] = Rejection(MEMORY, None, why)
            continue
        peak = est.required_gib if est is not None else None
        ranked.append((rank(plan_speed(k, base, n, stage, data, run), peak, len(k.changes(base)), i), k, est))
    ranked, json_kept = _unless_json_shared(job, base, ranked)
    if not ranked:
        return None
    _, best, est = min(ranked, key=lambda r: r[0])
    gain = plan_speed(best, base, n, stage, data, run) / plan_speed(base, base, n, stage, data, run)
    plan = SpeedPlan(hardware, base, best, gain)
    plan.est_gib = est.required_gib if est is not None else None
    plan.searched = searched
    plan.changes = plan_keys(best, base)
    plan.drop_deepspeed = best.zero == "none" and base.zero != "none"
    if best.zero not in (base.zero, "none") and job.deepspeed_source is not None:
        plan.deepspeed_stage, plan.deepspeed_file = LOWER_STAGE, job.deepspeed_source.document.path.name
    turned_on = {
        "liger": best.liger and not base.liger,
        "fa2": best.attn == "fa2" != base.attn,
        "bnb": best.optim != base.optim and _bnb_optimizer(best.optim),
    }
    env = job.environment
    plan.environment = env.source
    for knob, (_module, package) in PACKAGES.items():
        if turned_on[knob] and env.assumed:
            plan.needs.append(package)
    if json_kept:
        plan.json_kept = f"ZeRO-{LOWER_STAGE} not written in {job.deepspeed_source.document.path.name}: {json_kept}"
        if len([z for z in values["zero"] if z in (base.zero, "none")]) < 2:
            plan.searched.discard("zero")  # a stage it may not write is not judged (MEM003 stays: `plans._kept_by`)

    def in_words(plan: SpeedPlan) -> None:
        """Why the plan is what it is (`SpeedPlan.explain_later`: read by the fix's description, tune and verify,
        never by a lint whose plan changes nothing). It reads only what is fixed by now: the job, this search's
        values and candidates, and the plan's knobs."""
        from cfgopt.plan.wording import KEPT_WITHOUT_ESTIMATE, data_words, explain, remarks_of

        plan.data_words = data_words(plan, data)
        for (name, value), rejection in _left_out(job, base, knobs, values, has_estimate).items():
            k = best._replace(**{name: value})
            refused = space.refusal(k, base, job.soft_capped_attention)  # what LLaMA-Factory refuses anyway: first
            rejected.setdefault(k, Rejection(*refused) if refused else rejection)
        explain(plan, [k for _, k, _ in ranked], rejected, lambda k: plan_speed(k, base, n, stage, data, run))
        plan.remarks = remarks_of(job, plan, run, values)
        if plan.json_kept:
            plan.remarks.append(plan.json_kept)
        if not has_estimate and plan.quoted and plan.quoted.startswith(KEPT_WITHOUT_ESTIMATE):
            plan.quoted = None  # the remark on the missing estimate names the knob (wording._no_estimate)
        plan.notes += plan.remarks

    plan.explain_later(in_words)
    return plan


def _bnb_optimizer(optim: str) -> bool:
    """Is `optim` a bitsandbytes optimizer? Imported only here, asked only of an optimizer the plan changes (most
    plans keep it)."""
    from cfgopt.knowledge.bitsandbytes import is_bnb_optimizer  # the one list of bitsandbytes optimizers

    return is_bnb_optimizer(optim)


def _unless_json_shared(job: Job, base: space.Knobs, ranked: list) -> tuple[list, str]:
    """The ranked candidates without those that lower the stage in the job's DeepSpeed JSON where another config
    reads it (`json_kept_for`, asked only where the fastest candidate lowers it: the search for readers outside
    the run is made only then), and why ("" where the JSON may be written)."""
    if not ranked or min(ranked, key=lambda r: r[0])[1].zero in (base.zero, "none"):
        return ranked, ""
    kept = json_kept_for(job)
    if not kept:
        return ranked, ""
    return [r for r in ranked if r[1].zero in (base.zero, "none")], kept


def _left_out(
    job: Job, base: space.Knobs, knobs: tuple[str, ...], values: dict[str, list[Any]], has_estimate: bool
) -> dict[tuple[str, Any], Rejection]:
    """Knob values (the batch shape aside) this job would be offered with every package installed and a memory
    estimate, and is not: the package is not known to be there (PACKAGE), or there is no estimate to spend memory
    (MEMORY) or change numerics (NUMERICS) on."""
    from cfgopt.plan.wording import NO_ESTIMATE, no_memory, package_missing

    # fa2 only where the target runs it: on a V100 a note that fa2 would be faster is no advice
    runs_fa2 = job.settings.target.runs_fa2
    everything = space.Platform(cuda=True, flash_attn=runs_fa2, liger=True, deepspeed=True, bitsandbytes=True)
    offered = values_for(job, base, knobs, True, everything)
    estimated = values if has_estimate else values_for(job, base, knobs, True, job_platform(job))
    out: dict[tuple[str, Any], Rejection] = {}
    for name in space.KNOB_NAMES[1:]:
        for value in offered[name]:
            if value in values[name]:
                continue
            if value not in estimated[name]:
                out[(name, value)] = Rejection(PACKAGE, name, package_missing(job, name, value))
            else:
                kind = NUMERICS if name in ("precision", "optim") else MEMORY
                unknown = "" if job.settings.target.memory_gib else f" ({no_memory(job.settings)})"
                out[(name, value)] = Rejection(kind, name, NO_ESTIMATE[kind] + unknown)
    return out


def planned_batch(job: Job) -> tuple[int, int] | None:
    """The (micro-batch, accumulation) the plan writes, when it changes them (None: it keeps them, or no plan):
    rules that name a shape name this one, so no message proposes a shape the fix does not write."""
    plan = plan_for(job)
    if plan is None or (plan.best.micro, plan.best.ga) == (plan.base.micro, plan.base.ga):
        return None
    return plan.best.micro, plan.best.ga


def planned_estimate(job: Job, n: int):
    """The memory estimate on `n` GPUs of the job as its plan leaves it: the YAML keys it sets and the DeepSpeed it
    runs with (dropped, or the JSON at a lower stage); None without a plan or an estimate."""
    plan = plan_for(job)
    return _estimate(job, plan.best, plan.base, n) if plan is not None else None


def plan_edits(source: Source, plan: SpeedPlan) -> list[Edit] | None:
    """Span edits writing the plan into a LLaMA-Factory YAML or command line (`cfgopt.plan.knob_edits`, the writer
    tune's winner uses too); None when one cannot be made."""
    from cfgopt.plan.knob_edits import knob_edits

    made = knob_edits(source, plan.changes, ("deepspeed",) if plan.drop_deepspeed else ())
    if made is None or made.failed:
        return None
    return made.edits


def _unless_stopped(job: Job, plan: SpeedPlan | None) -> SpeedPlan | None:
    """The plan, or where the job's environment stops it at start-up (ENV002: a checked package outside the
    release's range; LF054: the user's neat packing with a transformers LLaMA-Factory 0.9.4 refuses) or gives it no
    GPU (ENV001: torch built for the other platform), or bash never passes the launch its arguments (LF055: a
    script with CRLF line endings), a plan that changes nothing and says why: a gain is no gain for a job that
    does not start, and no flag edit helps a launch that never gets its flags."""
    from cfgopt.environment.stated import stops_at_start, torch_finds_no_gpu

    env = job.environment
    why = (
        stops_at_start(env, job.settings.llamafactory_version, job.lf_label)
        or neat_transformers_stops(job)
        or torch_finds_no_gpu(env, job.settings.target)
        or _crlf_launch(job)
    )
    return StoppedJob(plan, why) if plan is not None and why else plan


def _crlf_launch(job: Job) -> str:
    """Why a launch's flags never reach it as written (LF055), or ""."""
    found = job.source.command.get("carriage_return") if job.source.command else None
    if found is None or not (found.failure or found.dropped):
        return ""
    return "the script has CRLF line endings: bash does not pass the launch its arguments as written (LF055)"
