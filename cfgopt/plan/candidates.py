"""The candidates of one job's plan: the knobs planned (those whose rules are selected), the values each may take
for the job on the packages its environment has (`cfgopt.plan.space`, tune's search space), and their combinations
less those a rule calls a failure, each left out with its reason (`cfgopt.plan.reasons`)."""

from __future__ import annotations

from cfgopt.job.job import Job
from cfgopt.knowledge import methods
from cfgopt.knowledge.deepspeed_plan import at_stage
from cfgopt.knowledge.versions import release_spans
from cfgopt.plan import space
from cfgopt.plan.expected_speed import hardware_gpus, stochastic_rounding_ok
from cfgopt.plan.reasons import REFUSED, Rejection
from cfgopt.plan.speed_knobs import OWNERS, liger_plannable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def planned_knobs(job: Job) -> tuple[str, ...]:
    """The knobs whose rules are selected; Liger also where the job's environment has it (its rule, PF009, is
    opt-in because it speaks of the package, which the plan asks of the environment instead)."""
    selected = {k for k, codes in OWNERS.items() if any(job.settings.is_selected(c) for c in codes)}
    if job.has_package("liger_kernel") and liger_plannable(job):
        selected.add("liger")
    else:
        selected.discard("liger")
    return tuple(k for k in OWNERS if k in selected)


def job_platform(job: Job) -> space.Platform:
    """What the candidates may use: the packages of the job's environment (cfgopt.environment.stated)."""
    return space.Platform(
        cuda=True,
        flash_attn=fa2_usable(job),
        liger=job.has_package("liger_kernel"),
        deepspeed=True,
        bitsandbytes=job.has_package("bitsandbytes"),
        torchao=stochastic_rounding_ok(job),
    )


def platform_with_extras(job: Job) -> space.Platform:
    """The job's platform with the packages LLaMA-Factory documents as extras for what a plan uses (liger-kernel,
    bitsandbytes): what the job would be offered with them (`WithPackages`). flash-attn is no extra, and its gain
    was never measured on the H200 (not installable there), so it is not proposed."""
    return space.Platform(cuda=True, flash_attn=fa2_usable(job), liger=True, deepspeed=True, bitsandbytes=True)


def fa2_usable(job: Job) -> bool:
    """flash-attn in the job's environment, and a target its kernels run on with that build (`fa2_refusal`: not
    before Ampere, not a CUDA build on ROCm, not without a target): the plan writes no kernel the target cannot
    run."""
    return job.has_package("flash_attn") and fa2_refused(job) is None


def fa2_refused(job: Job) -> str | None:
    from cfgopt.environment.stated import fa2_refusal

    return fa2_refusal(job.environment, job.settings.target)


def values_for(
    job: Job, base: space.Knobs, knobs: tuple[str, ...], has_estimate: bool, platform: space.Platform
) -> dict[str, list[Any]]:
    """The values each knob may take for this job on `platform` (the baseline's first)."""
    config = job.values()
    bf16, overflows = job.settings.target.bf16, job.overflows_fp16
    options = space.SpaceOptions(
        gpus=1, allow_packing=True, max_micro=64, knobs=knobs, bf16=bf16, overflows_fp16=overflows
    )
    values = space.knob_values(config, base, platform, options)
    if job.settings.target.platform == "cpu":
        values["precision"] = [base.precision]  # no half precision to move to on a CPU (the Trainer refuses it)
    if not has_estimate:
        keep_memory_as_written(job, base, knobs, values)
    elif "zero" in knobs:
        # ZeRO-2 in the job's own JSON (MEM003's advice); no DeepSpeed too, except for a full/freeze run on several
        # GPUs, whose states plain data parallel would copy to every GPU
        full = job.value("finetuning_type") in ("full", "freeze") and hardware_gpus(job) > 1
        lower = lower_stage(job, base)
        values["zero"] = (
            [base.zero] + ([lower] if lower else []) + (["none"] if base.zero != "none" and not full else [])
        )
    stage = str(job.value("stage"))
    # packing: only where the user left it to us, for SFT (pt packs by default; methods.PACKING_STAGES)
    if job.is_set("packing") or job.on("neat_packing") or job.on("streaming") or stage != "sft":
        values["packing"] = [base.packing]
    liger_ok = job.liger_patches_model and methods.liger_fuses_loss(stage) and not job.on("use_unsloth")
    if not liger_ok or job.on("use_liger_kernel"):
        # Liger the user turned on under ZeRO-3 may be turned off (LF027): the plan keeps no failure
        values["liger"] = [base.liger] + ([False] if base.liger and base.zero.startswith("z3") else [])
    if base.attn not in ("sdpa", "disabled", "fa2"):
        values["attn"] = [base.attn]  # not a valid choice (or fa3): LF003 / LF006 own the value
    if base.attn == "fa2" and job.fa2_outcome.stops:
        # fa2 stops this job (LF049): no candidate keeps it, whether or not PF004 plans the attention; what runs
        # without flash-attn takes its place (SDPA, eager for Gemma 2, whose soft-capping SDPA drops)
        values["attn"] = [a for a in values["attn"] if a != "fa2"] or [job.fa2_fallback]
    if not job.deepspeed[0]:
        # the DeepSpeed file `deepspeed:` names was not read (outside the project, not found): it may state the
        # batch itself, and a YAML batch that differs from it stops the run (XF002), so the shape stays
        values["micro"] = [(base.micro, base.ga)]
    if not job.settings.target_stated:
        on_every_gpu(values, base)
    return values


def keep_memory_as_written(job: Job, base: space.Knobs, knobs: tuple[str, ...], values: dict[str, list[Any]]) -> None:
    """Without a memory estimate (`Job.estimate_gap` says why), only what cannot raise memory moves, and nothing
    that changes numerics for memory's sake: the micro-batch stays or shrinks, checkpointing, the optimizer and
    packing stay as written (packing fills every row to cutoff_len and, without FlashAttention-2, adds neat
    packing's 4D mask: a config sized for short samples can run out of memory), no move to eager attention (its
    L x L scores); half precision for fp32, SDPA or fa2 for eager, Liger's fused loss, and no DeepSpeed where ZeRO
    on one stated GPU shards nothing (PF050) may still be planned."""
    values["micro"] = [(m, a) for m, a in values["micro"] if m <= base.micro]
    values["gc"] = [base.gc]
    values["packing"] = [base.packing]
    values["precision"] = [p for p in values["precision"] if p != "pure_bf16" or p == base.precision]
    values["optim"] = [base.optim]
    runs = job.fa2_fallback if base.attn == "fa2" and not job.fa2_outcome.runs else base.attn
    values["attn"] = [a for a in values["attn"] if a != "disabled" or runs == "disabled"]
    # ZeRO without offload on one stated GPU shards nothing: dropping it spends no memory (PF050)
    one_gpu = job.settings.gpus == 1 and base.zero in ("z0", "z1", "z2", "z3") and "zero" in knobs
    values["zero"] = [base.zero] + (["none"] if one_gpu else [])


def on_every_gpu(values: dict[str, list[Any]], base: space.Knobs) -> None:
    """Without a target, only what holds on every GPU: the precision stays (bf16 is emulated on V100 / T4, and fp16
    is what PF001 flags where bf16 runs) and so does the micro-batch (no memory to judge it by: a 16 GiB T4 or a 192
    GiB MI300X; packing and checkpointing stay too, `keep_memory_as_written`). fa2 and Liger are left out by their
    own tests (`fa2_usable`, `liger_plannable`); SDPA for eager attention, and no DeepSpeed on one stated GPU hold
    everywhere."""
    values["precision"] = [base.precision]
    values["micro"] = [(base.micro, base.ga)]


# The stage the plan lowers ZeRO-3 to (MEM003's advice): gradients and optimizer states stay sharded, with the
# communication volume of plain data parallel.
LOWER_STAGE = 2


def lower_stage(job: Job, base: space.Knobs) -> str | None:
    """The ZeRO knob value of the job's DeepSpeed JSON at LOWER_STAGE, where the plan may write it there: a ZeRO-3
    JSON file that was read, has a literal stage, no AutoTP and no optimizer offload to NVMe (below stage 3 it runs
    as CPU offload, DS012); None otherwise. Whether another config reads it is asked only where the plan would
    write it (`planner._unless_json_shared`). Memoized on the job: a plan asks it once per values_for (its search,
    and twice for the knob values it leaves out), each time building the JSON's edits."""
    key = f"lower_stage:{base.zero}"
    if key not in job.memo:
        job.memo[key] = _lower_stage(job, base)
    return job.memo[key]


def _lower_stage(job: Job, base: space.Knobs) -> str | None:
    _, ds = job.deepspeed
    src = job.deepspeed_source
    if not base.zero.startswith("z3") or ds is None or src is None or ds is not src.data:
        return None
    from cfgopt.plan.knob_edits import stage_edits  # only here: a job with no ZeRO-3 JSON never writes a stage

    zero = ds.get("zero_optimization")
    offload = zero.get("offload_optimizer") if isinstance(zero, dict) else None
    nvme = isinstance(offload, dict) and str(offload.get("device", "")).lower() == "nvme"
    if nvme or "tensor_parallel" in ds or stage_edits(src, LOWER_STAGE) is None:
        return None
    return space.zero_of(at_stage(ds, LOWER_STAGE))


# The batch keys a DeepSpeed JSON may state itself instead of "auto"; the HF Trainer refuses a JSON whose value
# differs from the YAML's (XF002), so the plan changes the batch shape only where no JSON pins it.
BATCH_KEYS = ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size")


def json_pins_batch(ds: dict | None) -> bool:
    """Does the DeepSpeed config state a batch size or accumulation itself (not "auto")?"""
    return isinstance(ds, dict) and any(key in ds and ds[key] != "auto" for key in BATCH_KEYS)


# Liger where the plan lowers ZeRO-3: planned on the next pass, once the JSON is at the lower stage
_LIGER_AFTER_STAGE = "they fail in backward under ZeRO-3, which the JSON holds until its lower stage is written (LF027)"


def kept_combinations(
    base: space.Knobs,
    values: dict[str, list[Any]],
    batch_pinned: bool,
    rejected: dict[space.Knobs, Rejection],
    job_refusal: Callable[[space.Knobs], Rejection | None],
    soft_capped: bool = False,
) -> list[space.Knobs]:
    """Every combination tune's space allows (no SDPA for a model that soft-caps its attention, `soft_capped`:
    `space.refusal`); Liger is not turned on under ZeRO-3 (a known backward failure, LF027) nor where the plan
    lowers ZeRO-3 (`_LIGER_AFTER_STAGE`), nor what the job itself refuses (`job_refusal`: neat packing that
    fails); with a DeepSpeed JSON that states the batch itself (`batch_pinned`), the batch shape moves only where
    DeepSpeed is dropped: the plan edits the YAML alone, and a YAML batch that differs from its
    JSON's stops the run (XF002). Those left out go into `rejected` with their reason."""

    def keep(k: space.Knobs) -> bool:
        # never kept either, where the user has both: the plan keeps no combination a rule calls a failure
        if k.liger and k.zero.startswith("z3"):
            rejected[k] = Rejection(REFUSED, "liger", "they fail in backward under ZeRO-3 (LF027)")
            return False
        if k.liger and k.zero != "none" and base.zero.startswith("z3"):
            # a lowered stage: the config's part of the fix stands alone (the JSON's part may not be written: a
            # file outside the fix's scope), and alone it would run Liger under ZeRO-3
            rejected[k] = Rejection(REFUSED, "liger", _LIGER_AFTER_STAGE)
            return False
        why = job_refusal(k)
        if why is not None:
            rejected[k] = why
            return False
        if batch_pinned and k.zero != "none" and (k.micro, k.ga) != (base.micro, base.ga):
            rejected[k] = Rejection(REFUSED, "micro", "the DeepSpeed JSON states the batch itself (XF002)")
            return False
        return True

    refused: dict[space.Knobs, tuple[str, str, str]] = {}
    out = space.combinations(base, values, keep, refused, soft_capped)
    rejected.update({k: Rejection(*why) for k, why in refused.items()})
    return out


def job_refusal(job: Job, base: space.Knobs) -> Callable[[space.Knobs], Rejection | None]:
    """Why the job refuses a candidate (None: it does not), for `kept_combinations`: neat packing where LLaMA-Factory
    0.9.4 stops it at start-up (`neat_transformers_refusal`, LF054), neat packing with fa2 where the first batch
    fails (`neat_fa2_check`, LF019). SDPA for a model that soft-caps its attention is tune's refusal too
    (`space.refusal`)."""
    neat_fa2_fails = neat_fa2_check(job, base)
    transformers_refuses = neat_transformers_refusal(job)

    def refused(k: space.Knobs) -> Rejection | None:
        if transformers_refuses and k.packing and not base.packing:
            return Rejection(REFUSED, "packing", transformers_refuses)
        if neat_fa2_fails(k):
            knob = "packing" if k.packing != base.packing else "attn" if k.attn != base.attn else None
            return Rejection(REFUSED, knob, "neat packing with fa2 takes one row per micro-batch (LF019)")
        return None

    return refused


def neat_transformers_refused(job: Job) -> tuple[tuple[str, ...], bool | None] | None:
    """Where a release judged stops neat packing at start-up with transformers 4.53 or newer (LLaMA-Factory 0.9.4,
    `methods.transformers_refuses_neat`) and the job's environment does not keep transformers below it: (those
    releases, True where its transformers is refused for certain, None where it is not known: a fresh install of
    0.9.4 takes 4.57.1); None where nothing refuses. LF054 judges a config that sets `neat_packing` the same way."""
    if methods.stage_of(job.values()) != "sft":
        return None  # 0.9.4 refuses neat packing outside SFT first (LF010)
    spec = job.environment.packages.get("transformers", "")
    return methods.neat_transformers_refused(job.settings.llamafactory_releases, spec)


def neat_transformers_refusal(job: Job) -> str | None:
    """Why the plan turns no neat packing on, in the words of its notes (None: nothing against it)."""
    refused = neat_transformers_refused(job)
    if refused is None:
        return None
    env = job.environment
    spec = env.packages.get("transformers", "")
    stated = f"transformers{spec} in {env.where}" if spec else f"{env.where} states no transformers version"
    return (
        f"LLaMA-Factory {release_spans(list(refused[0]))} stops neat packing at start-up with transformers 4.53 or "
        f"newer ({stated}; LF054)"
    )


def neat_transformers_stops(job: Job) -> str | None:
    """Why the user's own `neat_packing` stops the job at start-up for certain (LF054's error), in one line: every
    release judged refuses it with the transformers of the job's environment; None otherwise."""
    refused = neat_transformers_refused(job) if job.on("neat_packing") else None
    if refused is None or refused[1] is not True or refused[0] != job.settings.llamafactory_releases:
        return None
    return neat_transformers_refusal(job)


def neat_fa2_check(job: Job, base: space.Knobs) -> Callable[[space.Knobs], bool]:
    """Does a candidate run neat packing (the user's, or the packing the plan turns on) with fa2 where the first
    batch fails (`methods.neat_fa2_fails`: a micro-batch of more than one row, or a gemma4 model), in a release
    judged that checks (`methods.neat_fa2_checked_in`: 0.9.5, not 0.9.3 or 0.9.4)? Without flash-attn in the job's
    environment `fa2` runs SDPA (eager for Gemma 2) and nothing asserts, but the file would stop once flash-attn is
    installed (LF019 warns of it): the same candidate with what runs there (`Job.fa2_fallback`), at the same speed,
    is kept."""
    model, user_neat = job.value("model_name_or_path"), job.on("neat_packing")
    checked = methods.neat_fa2_checked_in(job.settings.llamafactory_releases)
    sft = methods.stage_of(job.values()) == "sft" and bool(checked)

    def fails(k: space.Knobs) -> bool:
        neat = user_neat or (k.packing and not base.packing)
        return sft and neat and k.attn == "fa2" and methods.neat_fa2_fails(model, k.micro)

    return fails


def plan_keys(k: space.Knobs, base: space.Knobs) -> dict[str, Any]:
    """The YAML keys the plan writes for candidate `k`: tune's (`space.changed_keys`), with the packing it turns on
    written as `neat_packing`."""
    changes = space.changed_keys(k, base)
    if changes.get("packing") is True:
        del changes["packing"]
        changes["neat_packing"] = True
    return changes
