"""The speed plan in words: what it writes (`shape`), its fix's description (`description`: what it expects, from
which priors and data, the packages it uses or would use: `with_packages_words`), its notes (why each knob value it
could not take was left out, and the one the description quotes) and its remarks (what the environment runs, and the
choices left to the user, said and never applied). The plan itself is `cfgopt.plan.speed_plan`'s record."""

from __future__ import annotations

from cfgopt.knowledge import methods
from cfgopt.knowledge.versions import release_spans
from cfgopt.plan import space
from cfgopt.plan.candidates import fa2_refused
from cfgopt.plan.reasons import MEMORY, NUMERICS, value_words, why_not
from cfgopt.plan.speed_knobs import PACKAGES
from cfgopt.text.user_text import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from cfgopt.job.job import Job
    from cfgopt.plan.data_speed import DataTerm
    from cfgopt.plan.expected_speed import Runtime
    from cfgopt.plan.reasons import Rejection
    from cfgopt.plan.speed_plan import SpeedPlan, WithPackages
    from cfgopt.text.source import Source

_PRECISION_WORDS = {
    "bf16": "bf16 mixed precision",
    "fp16": "fp16 mixed precision",
    "pure_bf16": "pure bf16 (weights, gradients and optimizer states in bf16: numerics change, check the loss "
    "with `cfgopt verify`)",
}
_PRIOR_SOURCE = (
    "priors measured on an H200 and an H100 (8B LoRA SFT, 4B LoRA DPO, 3B and 7B LoRA KTO, 4B and 8B full SFT; "
    "bench/tune, bench/planner)"
)


_OWN_NUMERICS = "its own numerics: check the loss with `cfgopt verify`"
_OPTIM_NUMERICS = {
    "adamw_bnb_8bit": "8-bit states: within 0.3% of AdamW's loss in 20 steps on an H200, bench/verify/results.md; "
    "check yours with `cfgopt verify`",
    "adamw_torch_8bit_sr": "pure bf16 weights with torchao's 8-bit AdamW and bf16 stochastic rounding "
    "(`optim: adamw_torch_8bit`, `optim_args: bf16_stochastic_round=True`): in 20 steps on an H200 a loss at or "
    "below AdamW's on 7-8B and Qwen3-4B full SFT, 3.2% above 8-bit AdamW's on qwen3_full_sft, bench/planner/README.md; "
    "check yours with `cfgopt verify`",
}


def shape(plan: SpeedPlan) -> str:
    """What the plan writes, in words."""
    b, k = plan.base, plan.best
    parts = []
    if (k.micro, k.ga) != (b.micro, b.ga):
        parts.append(f"{k.micro} x {k.ga} (micro-batch x accumulation, {_same_batch_words(b, k)})")
    if k.gc != b.gc:
        parts.append(f"gradient checkpointing {'on' if k.gc else 'off'}")
    if k.packing != b.packing:
        parts.append("neat packing (samples kept apart)" if k.packing else "no packing")
    if k.liger != b.liger:
        parts.append("Liger kernels" if k.liger else "no Liger kernels")
    if k.attn != b.attn:
        parts.append(value_words("attn", k))
    if plan.drop_deepspeed:
        parts.append("no DeepSpeed")
    if plan.deepspeed_stage is not None:
        parts.append(json_part_words(plan))
    rounded = k.optim == space.SR_OPTIM  # pure bf16 with stochastic rounding: one change, in one phrase
    if k.precision != b.precision and not (rounded and k.precision == "pure_bf16"):
        parts.append(_PRECISION_WORDS.get(k.precision, k.precision))
    if k.optim != b.optim:
        parts.append(f"optimizer {k.optim} ({_OPTIM_NUMERICS.get(k.optim, _OWN_NUMERICS)})")
    if k.packing and not b.packing:
        parts.append(PACKED_STEPS)
    return ", ".join(parts)


# What packing the plan turns on changes, said where the plan is: a
# row holds several samples, so the rows per step stay and the samples per step do not.
PACKED_STEPS = (
    "with packing more samples per step and fewer steps per epoch, by the packing factor (learning rate and warm-up "
    "settings as written)"
)


def _same_batch_words(base: space.Knobs, best: space.Knobs) -> str:
    """What a new micro-batch x accumulation keeps: the global batch, in rows once the plan packs them."""
    return "same rows per step" if best.packing and not base.packing else "same global batch"


def description(plan: SpeedPlan) -> str:
    """The plan's fix description: what it writes, what it expects (and from which priors and data), the packages
    it uses or would use, the notably faster setting it left out, and its remarks."""
    peak = f", estimated peak {plan.est_gib:.0f} GiB per GPU" if plan.est_gib is not None else ""
    needs = (
        f"; uses {' and '.join(plan.needs)} ({plan.environment}; state yours: --environment FILE)" if plan.needs else ""
    )
    quoted = f"; {plan.quoted}" if plan.quoted else ""
    data = f"; {plan.data_words}" if plan.data_words else ""
    more = f"; {with_packages_words(plan.with_packages)}" if plan.with_packages is not None else ""
    remarks = "".join(f"; {r}" for r in plan.remarks)
    return (
        f"Speed plan for {plan.hardware.describe()}: {shape(plan)} (expected {plan.gain:.1f}x, "
        f"{_PRIOR_SOURCE}{data}{peak}){needs}{more}{quoted}{remarks}"
    )


def with_packages_words(more: WithPackages, where: str | None = None) -> str:
    """What the packages the job's environment lacks would bring, in words; `where`: how to name the environment's
    source ("this file" on the requirement file itself)."""
    names = " and ".join(more.packages)
    than = "this plan" if more.planned else "the config as written"
    return (
        f"with {names} (not in {where or more.source}) the plan would be {shape(more.plan)}, expected "
        f"{more.gain:.2f}x {than}"
    )


def data_words(plan: SpeedPlan, data: DataTerm | None) -> str:
    """Where the expected gain's packing and padding figures come from, when the plan packs or moves the batch."""
    b, k = plan.base, plan.best
    if (k.packing, k.micro) == (b.packing, b.micro):
        return ""
    if data is not None:
        return data.words(b.micro)
    return "packing's gain from Alpaca-like data (the job's data not profiled)" if k.packing != b.packing else ""


# --------------------------------------------------------------------------- why not: the rejections in words

_QUOTED_GAIN = 1.10  # a setting left out is quoted in the fix's description when its prior is 10% above the plan's
NO_ESTIMATE = {
    MEMORY: "no memory estimate of this job to spend memory on",
    NUMERICS: "it changes the numerics, so it is planned only with a memory estimate",
}


def no_memory(settings) -> str:
    """Why there is no memory to plan with: no target, or a target without GPU memory (`--target cpu`)."""
    if not settings.target_stated:
        return "no target stated"
    return f"{settings.target.name}: no GPU memory to estimate against"


def package_missing(job: Job, name: str, value: Any) -> str:
    key = {"liger": "liger", "attn": "fa2"}.get(name, "bnb")
    refused = fa2_refused(job) if key == "fa2" and job.has_package("flash_attn") else None
    _module, package = PACKAGES[key]
    return refused or f"{package} is not in {job.environment.where}"


def explain(
    plan: SpeedPlan, kept: list[space.Knobs], rejected: dict[space.Knobs, Rejection], speed: Callable[[Any], float]
) -> None:
    """The plan's notes (why each knob value it could not take was left out) and the one its description quotes:
    the fastest of them by the priors (`speed`), where it is notably faster than the plan."""
    plan.rejected = rejected
    found = why_not(plan.best, kept, rejected, speed)
    plan.notes = [words for _, words in found]
    floor = speed(plan.best) * _QUOTED_GAIN
    faster = [(speed(k), words) for k, words in found if speed(k) >= floor]
    plan.quoted = max(faster, key=lambda f: f[0])[1] if faster else None


# --------------------------------------------------------------------------- remarks: what runs, what is the user's

FA2_FALLS_BACK = "fa2 falls back to SDPA here (flash-attn not in the environment)"
# Gemma 2 (`Job.soft_capped_attention`): LLaMA-Factory runs it with eager attention, which keeps its soft-capping
FA2_FALLS_BACK_EAGER = (
    "fa2 falls back to eager attention here for Gemma 2 (flash-attn not in the environment; SDPA would drop its "
    "soft-capping)"
)
# `flash_attn: auto` (or none) on Gemma 2, which LLaMA-Factory turns into fa2 (`space.baseline_knobs`): eager here
AUTO_RUNS_EAGER = (
    "`flash_attn: auto` runs eager attention here for Gemma 2 (LLaMA-Factory turns it into fa2, and flash-attn is "
    "not in the environment; SDPA would drop its soft-capping)"
)
# the words for the `flash_attn` value that `fa2` runs as without flash-attn (`Runtime.fa2_fallback`)
_FALLBACK_WORDS = {"sdpa": "", "disabled": "eager attention, "}


def _fa2_written(job: Job) -> str:
    """The user's value that runs as fa2, in words: `fa2`, or `auto`, which LLaMA-Factory turns into fa2 on a
    soft-capped model (Gemma 2; the plan's baseline then reads fa2: `space.baseline_knobs`)."""
    return "`auto`" if str(job.value("flash_attn")).lower() == "auto" else "`fa2`"


def remarks_of(job: Job, plan: SpeedPlan, run: Runtime, values: dict[str, list[Any]]) -> list[str]:
    """What the description ends with: `fa2` that runs as SDPA (eager for Gemma 2), and the choices that change what
    the job trains on or its speed at this model size, said and never applied (ruff's display-only fixes)."""
    found = [
        _no_estimate(job, plan),
        _fa2_fallback(job, plan, run),
        _fa2_stopped(job, plan, run),
        _fallback_for_neat(job, plan, run),
        _plain_packing_alternative(job, plan, run),
        _longer_row(job, plan, run),
        _stochastic_rounding(plan, run, values),
        _badam_fp16(job, plan),
    ]
    return [words for words in found if words]


def _badam_fp16(job: Job, plan: SpeedPlan) -> str:
    """A BAdam job in fp32 on a GPU without bf16: fp16, which the plan writes for other jobs there, is left out
    (`space.BADAM_FP16`), and the plan says why."""
    target = job.settings.target
    gpu_without_bf16 = job.settings.target_stated and not target.bf16 and target.platform != "cpu"
    if not job.on("use_badam") or not gpu_without_bf16 or plan.base.precision != "fp32":
        return ""
    return space.BADAM_FP16


# The notes on knobs the remark on a missing estimate names (`_no_estimate`): not quoted beside it
KEPT_WITHOUT_ESTIMATE = ("packing not planned: ", "gradient checkpointing off not planned: ")


def _no_estimate(job: Job, plan: SpeedPlan) -> str:
    """A plan made without a memory estimate keeps what spends memory as written (`candidates.keep_memory_as_written`)
    and says so, and why; where a setting the memory model does not cover is why, the plan is provisional: once the
    config is fixed it can be estimated, and `cfgopt fix` plans again after its other fixes."""
    if plan.est_gib is not None:
        return ""
    gap = job.estimate_gap(plan.hardware.gpus)
    if not gap:
        return ""
    kept = f"micro-batch, packing and gradient checkpointing as written: no memory estimate to spend memory on ({gap})"
    if gap.startswith(("not modelled", "counted only roughly")):
        return f"{kept}; provisional until that is fixed: `cfgopt fix` plans again after its fixes, and may differ"
    return kept


def _neat_planned(job: Job, plan: SpeedPlan) -> bool:
    """Does the planned run pack neatly (the user's `neat_packing`, or the packing the plan turns on)?"""
    return plan.best.packing and (job.on("neat_packing") or not plan.base.packing)


def _fa2_fallback(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    if plan.best.attn != "fa2" or run.fa2:
        return ""
    if run.fa2_fallback == "sdpa":
        return FA2_FALLS_BACK
    return (
        AUTO_RUNS_EAGER if plan.best.attn == plan.base.attn and _fa2_written(job) == "`auto`" else FA2_FALLS_BACK_EAGER
    )


def _fa2_stopped(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    """The user's `fa2` (or `auto` on Gemma 2) where it stops the job (`Job.fa2_outcome`: LF049): the plan writes
    what runs instead."""
    if plan.base.attn != "fa2" or plan.best.attn == "fa2" or not run.fa2_stops:
        return ""
    return f"`flash_attn: {plan.best.attn}` written: {_fa2_written(job)} stops this job ({run.fa2_stops})"


def _fallback_for_neat(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    """Neat packing planned with several rows per micro-batch (or on a gemma4 model) where `fa2` runs without
    flash-attn: the plan writes what runs (`flash_attn: sdpa`, or `disabled` for Gemma 2, whose soft-capping SDPA
    drops), so the speed it expects is the one it ranked, because with `fa2` the file stops at the first batch once
    flash-attn is installed (LF019; `candidates.neat_fa2_check`)."""
    b, k = plan.base, plan.best
    if run.fa2_stops:
        return ""  # flash-attn is there and `fa2` stops the job: `_fa2_stopped` says why it is not kept
    if not (b.attn == "fa2" and k.attn == run.fa2_fallback and not run.fa2 and _neat_planned(job, plan)):
        return ""
    checked = methods.neat_fa2_checked_in(job.settings.llamafactory_releases)
    model = job.value("model_name_or_path")
    if not checked or methods.stage_of(job.values()) != "sft" or not methods.neat_fa2_fails(model, k.micro):
        return ""
    refused = methods.neat_fa2_refused_model(model)
    rows = "on a gemma4 model" if refused else f"at {k.micro} rows per micro-batch"
    gemma2 = " for Gemma 2" if k.attn == "disabled" else ""
    fa2 = _fa2_written(job)
    return (
        f"`flash_attn: {k.attn}` written: {_FALLBACK_WORDS[k.attn]}what {fa2} runs here{gemma2} (flash-attn not in "
        f"the environment), at the same expected speed; with {fa2} neat packing {rows} would stop at the first batch "
        f"once flash-attn is installed (LLaMA-Factory {release_spans(list(checked))}, LF019)"
    )


def _plain_packing_alternative(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    """Neat packing under SDPA: what plain packing measured, as text (it lets packed samples attend to each other,
    so only the user sets it)."""
    if not _neat_planned(job, plan) or (plan.best.attn == "fa2" and run.fa2) or job.is_set("packing"):
        return ""
    return (
        f"display only: `packing: true` ran {1 / run.neat_cost:.2f}x neat packing's speed at the same shape under "
        f"SDPA (H200, {run.neat_measured_on}; bench/planner/README.md) but lets packed samples attend to each "
        "other (what the job trains on changes: yours to choose)"
    )


def _longer_row(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    """Neat packing with fa2 running: one row per micro-batch (LF019). A row `micro` times longer keeps the tokens
    per micro-batch but changes what the job trains on (samples no longer cut where they were), so it is said."""
    b, k = plan.base, plan.best
    cutoff = job.value("cutoff_len")
    if not (_neat_planned(job, plan) and k.attn == "fa2" and run.fa2 and k.micro == 1 < b.micro):
        return ""
    if not methods.neat_fa2_checked_in(job.settings.llamafactory_releases):
        return ""  # 0.9.3, 0.9.4: neat packing with fa2 takes any micro-batch, the one row is the memory's choice
    if positive_int(cutoff) is None:
        return ""
    return (
        f"neat packing with fa2 runs one row per micro-batch (LF019); `cutoff_len: {cutoff * b.micro}` would keep "
        f"{b.micro} x {cutoff} tokens per micro-batch, but samples up to {cutoff * b.micro} tokens would no longer "
        f"be cut at {cutoff}: a change of what the job trains on, not applied"
    )


_SR_WORDS = "stochastic rounding (pure bf16 with torchao's 8-bit AdamW)"
_SR_SMALL_MEASURED = "Qwen3-4B full SFT on an H200: 0.72x bf16 + AdamW with 25.7 vs 61.9 GiB, bench/planner/README.md"


def _stochastic_rounding(plan: SpeedPlan, run: Runtime, values: dict[str, list[Any]]) -> str:
    """Below SR_FASTER_FROM stochastic rounding is the memory choice: planned only where nothing faster fits,
    which the plan says; where something faster fits, a note says it is slower at this size (and what it saves)."""
    if space.SR_OPTIM not in values.get("optim", ()) or not run.sr_small:
        return ""
    if plan.best.optim == space.SR_OPTIM:
        return f"{_SR_WORDS} planned for memory: nothing faster fits ({_SR_SMALL_MEASURED})"
    slower = "slower at this model size, planned only where nothing else fits"
    return f"{_SR_WORDS} not planned: {slower} ({_SR_SMALL_MEASURED})"


def json_part_words(plan: SpeedPlan) -> str:
    """The part of the plan written in the job's DeepSpeed JSON, as `shape` names it."""
    return f"ZeRO-{plan.deepspeed_stage} (in {plan.deepspeed_file})"


def json_fix_words(config: Source, plan: SpeedPlan) -> str:
    """The JSON part's description: the whole plan where it is all of it, else what it is part of."""
    stage = f"`zero_optimization.stage: {plan.deepspeed_stage}`, the keys only ZeRO-3 reads removed"
    if not plan.config_changed:
        return f"{description(plan)}; {stage}"
    name = config.document.path.name
    return f"ZeRO-{plan.deepspeed_stage} ({stage}): the DeepSpeed part of the speed plan written in {name}"
