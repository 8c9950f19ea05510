"""The speed plan: the unsafe speed fixes of one training job, chosen together.

The speed rules (PF006 packing, PF007 / MEM005 micro-batch, MEM004 gradient checkpointing, PF009 Liger, PF004
attention, MEM003 / PF050 DeepSpeed, MEM001 out of memory) each report their finding, but none writes its own
fix: the knobs interact (a bigger micro-batch can use the memory that turning checkpointing off needs), so
fixed one rule at a time they fight. Instead `plan_for(job)` searches the knobs jointly, the way `cfgopt tune`
would rank them before running anything:

- candidates: `cfgopt.plan.space` (micro-batch x accumulation with the global batch kept, checkpointing,
  attention, packing, Liger, DeepSpeed kept or dropped), limited to what the job allows (packing only for SFT
  that does not set it; Liger only for a model it patches; fa2 only where flash-attn is known to be there), and
  judged in the job's environment (`Runtime`: `fa2` without flash-attn is SDPA, and LF019 does not bind there);
- fit: the memory model through the job (`Job.estimate`, 10% headroom, tune's pruning limit); without an
  estimate, no knob that spends memory moves (only PF007's micro-batch up to 8,192 tokens);
- rank: `cfgopt.tune.search.prior_speed` (the H200 measurements tune uses), then the smaller estimated peak,
  then fewer changes: so `cfgopt fix --unsafe-fixes` writes tune's top prediction, and `tune` starts from it.

`attach_plans` (called by the engine after the rules and suppressions) removes the planned rules' own fixes and
gives the plan, as ONE fix, to the first of that job's speed findings: no two fixes touch the same key, and the
fix's description says what it expects and which package it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from cfgopt.job.job import GPUS_IF_UNSTATED_SPEND, Hardware, Job
from cfgopt.knowledge import methods
from cfgopt.knowledge.deepspeed_plan import at_stage
from cfgopt.plan import space
from cfgopt.plan.priors import PRIORS, prior_speed, rank
from cfgopt.plan.reasons import MEMORY, NUMERICS, PACKAGE, REFUSED, Rejection, does_not_fit, why_not
from cfgopt.plan.speed_knobs import LEFT_ALONE, OWNERS, PLANNED_CODES, liger_plannable
from cfgopt.text.diagnostics import Applicability, Diagnostic, Edit, Fix
from cfgopt.text.document import real_path

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from pathlib import Path

    from cfgopt.job.project import Context
    from cfgopt.plan.data_speed import DataTerm
    from cfgopt.text.source import Source

_PRECISION_WORDS = {
    "bf16": "bf16 mixed precision",
    "fp16": "fp16 mixed precision",
    "pure_bf16": "pure bf16 (weights, gradients and optimizer states in bf16: numerics change, check the loss "
    "with `cfgopt verify`)",
}
AIM_TOKENS = 8192  # without a memory estimate, PF007's aim: a micro-batch of up to 8k tokens
PACKAGES = {
    "liger": ("liger_kernel", "liger-kernel"),
    "fa2": ("flash_attn", "flash-attn"),
    "bnb": ("bitsandbytes", "bitsandbytes"),
}
_PRIOR_SOURCE = "priors measured on an H200 (8B LoRA SFT, 4B LoRA DPO, 4B and 8B full SFT; bench/tune, bench/planner)"


_OWN_NUMERICS = "its own numerics: check the loss with `cfgopt verify`"
_OPTIM_NUMERICS = {
    "adamw_bnb_8bit": "8-bit states: within 0.3% of AdamW's loss in 20 steps on an H200, bench/verify/results.md; "
    "check yours with `cfgopt verify`",
    "adamw_torch_8bit_sr": "pure bf16 weights with torchao's 8-bit AdamW and bf16 stochastic rounding "
    "(`optim: adamw_torch_8bit`, `optim_args: bf16_stochastic_round=True`): in 20 steps on an H200 a loss at or "
    "below AdamW's on 7-8B and Qwen3-4B full SFT, 3.2% above 8-bit AdamW's on qwen3_full_sft, bench/planner/README.md; "
    "check yours with `cfgopt verify`",
}


class SpeedPlan:
    """One job's plan. A plain class rather than a dataclass: the planner runs on the lint path (start-up)."""

    def __init__(self, hardware: Hardware, base: space.Knobs, best: space.Knobs, gain: float) -> None:
        self.hardware, self.base, self.best = hardware, base, best
        self.gain = gain  # prior speed of best / base
        self.est_gib: float | None = None  # the chosen candidate's estimated peak per GPU (None: no estimate)
        self.changes: dict[str, Any] = {}  # YAML keys to set
        self.drop_deepspeed = False
        self.deepspeed_stage: int | None = None  # the ZeRO stage written into the job's DeepSpeed JSON (None: kept)
        self.deepspeed_file = ""  # that JSON's name, as the description says it
        self.needs: list[str] = []  # packages of an assumed environment the plan uses (the output says so)
        self.environment = ""  # the environment planned for, in words ("environment: requirements.txt")
        # what the packages the environment lacks would bring (None: nothing notably faster)
        self.with_packages: WithPackages | None = None
        self.notes: list[str] = []  # knob values left out, and why ("pure bf16 not planned: refused with ZeRO-3")
        self.rejected: dict[space.Knobs, Rejection] = {}  # every candidate not planned, with its reason
        self.quoted: str | None = None  # the note the description quotes: a notably faster setting left out
        self.searched: set[str] = set()  # the knobs the plan chose among several values (not merely kept)
        self.data_words = ""  # where the gain's padding figure comes from (the job's data, or the prior's)
        # what the environment runs and what the plan leaves to the user, said at the description's end (`_remarks`)
        self.remarks: list[str] = []

    @property
    def changed(self) -> bool:
        return self.config_changed or self.deepspeed_stage is not None

    @property
    def config_changed(self) -> bool:
        """Does the plan edit the LLaMA-Factory config itself (not only the DeepSpeed JSON's stage)?"""
        return bool(self.changes) or self.drop_deepspeed

    def shape(self) -> str:
        """What the plan writes, in words."""
        b, k = self.base, self.best
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
            parts.append(f"attention {k.attn}")
        if self.drop_deepspeed:
            parts.append("no DeepSpeed")
        if self.deepspeed_stage is not None:
            parts.append(f"ZeRO-{self.deepspeed_stage} (in {self.deepspeed_file})")
        rounded = k.optim == space.SR_OPTIM  # pure bf16 with stochastic rounding: one change, in one phrase
        if k.precision != b.precision and not (rounded and k.precision == "pure_bf16"):
            parts.append(_PRECISION_WORDS.get(k.precision, k.precision))
        if k.optim != b.optim:
            parts.append(f"optimizer {k.optim} ({_OPTIM_NUMERICS.get(k.optim, _OWN_NUMERICS)})")
        if k.packing and not b.packing:
            parts.append(PACKED_STEPS)
        return ", ".join(parts)

    def description(self) -> str:
        peak = f", estimated peak {self.est_gib:.0f} GiB per GPU" if self.est_gib is not None else ""
        needs = (
            f"; uses {' and '.join(self.needs)} ({self.environment}; state yours: --environment FILE)"
            if self.needs
            else ""
        )
        quoted = f"; {self.quoted}" if self.quoted else ""
        data = f"; {self.data_words}" if self.data_words else ""
        more = f"; {self.with_packages.words()}" if self.with_packages is not None else ""
        remarks = "".join(f"; {r}" for r in self.remarks)
        return (
            f"Speed plan for {self.hardware.describe()}: {self.shape()} (expected {self.gain:.1f}x, "
            f"{_PRIOR_SOURCE}{data}{peak}){needs}{more}{quoted}{remarks}"
        )


# What packing the plan turns on changes, said where the plan is: a
# row holds several samples, so the rows per step stay and the samples per step do not.
PACKED_STEPS = (
    "with packing more samples per step and fewer steps per epoch, by the packing factor (learning rate and warm-up "
    "settings as written)"
)


def _same_batch_words(base: space.Knobs, best: space.Knobs) -> str:
    """What a new micro-batch x accumulation keeps: the global batch, in rows once the plan packs them."""
    return "same rows per step" if best.packing and not base.packing else "same global batch"


class WithPackages:
    """The plan the job would get with the packages its environment lacks: what they are, and its gain over the
    plan made (or over the config as written, where no plan fits without them)."""

    def __init__(self, packages: list[str], plan: SpeedPlan, gain: float, source: str, planned: bool) -> None:
        self.packages, self.plan, self.gain, self.source, self.planned = packages, plan, gain, source, planned

    def words(self, where: str | None = None) -> str:
        """In words; `where`: how to name the environment's source ("this file" on the requirement file itself)."""
        names = " and ".join(self.packages)
        than = "this plan" if self.planned else "the config as written"
        return (
            f"with {names} (not in {where or self.source}) the plan would be {self.plan.shape()}, expected "
            f"{self.gain:.2f}x {than}"
        )


# --------------------------------------------------------------------------- the search


def planned_knobs(job: Job) -> tuple[str, ...]:
    """The knobs whose rules are selected; Liger also where the job's environment has it (its rule, PF009, is
    opt-in because it speaks of the package, which the plan asks of the environment instead)."""
    selected = {k for k, codes in OWNERS.items() if any(job.settings.is_selected(c) for c in codes)}
    if job.has_package("liger_kernel") and liger_plannable(job):
        selected.add("liger")
    else:
        selected.discard("liger")
    return tuple(k for k in OWNERS if k in selected)


def hardware_gpus(job: Job) -> int:
    return job.hardware(GPUS_IF_UNSTATED_SPEND).gpus


def _platform(job: Job) -> space.Platform:
    """What the candidates may use: the packages of the job's environment (cfgopt.job.environment)."""
    return space.Platform(
        cuda=True,
        flash_attn=fa2_usable(job),
        liger=job.has_package("liger_kernel"),
        deepspeed=True,
        bitsandbytes=job.has_package("bitsandbytes"),
        torchao=stochastic_rounding_ok(job),
    )


def stochastic_rounding_ok(job: Job) -> bool:
    """torchao in the job's environment, with a transformers that hands `bf16_stochastic_round` on (5.0 and newer;
    an older one drops it silently and pure bf16 rounds updates away): stated, or probed on the node."""
    from cfgopt.job.environment import transformers_at_least

    env = job.environment
    return env.has("torchao") and transformers_at_least(env, (5, 0))


def _with_extras(job: Job) -> space.Platform:
    """The job's platform with the packages LLaMA-Factory documents as extras for what a plan uses (liger-kernel,
    bitsandbytes): what the job would be offered with them (`WithPackages`). flash-attn is no extra, and its gain
    was never measured on the H200 (not installable there), so it is not proposed."""
    return space.Platform(cuda=True, flash_attn=fa2_usable(job), liger=True, deepspeed=True, bitsandbytes=True)


def fa2_usable(job: Job) -> bool:
    """flash-attn in the job's environment, and a target its kernels run on with that build (`fa2_refusal`: not
    before Ampere, not a CUDA build on ROCm, not without a target): the plan writes no kernel the target cannot
    run."""
    return job.has_package("flash_attn") and _fa2_refusal(job) is None


def _fa2_refusal(job: Job) -> str | None:
    from cfgopt.job.environment import fa2_refusal

    return fa2_refusal(job.environment, job.settings.target)


def _values(
    job: Job, base: space.Knobs, knobs: tuple[str, ...], has_estimate: bool, platform: space.Platform
) -> dict[str, list[Any]]:
    """The values each knob may take for this job on `platform` (the baseline's first)."""
    config = job.values()
    bf16 = job.settings.target.bf16
    options = space.SpaceOptions(gpus=1, allow_packing=True, max_micro=64, knobs=knobs, bf16=bf16)
    values = space.knob_values(config, base, platform, options)
    if job.settings.target.platform == "cpu":
        values["precision"] = [base.precision]  # no half precision to move to on a CPU (the Trainer refuses it)
    cutoff = job.value("cutoff_len")
    if not has_estimate:  # nothing that spends memory without an estimate of it, and no numerics for memory
        values["gc"] = [base.gc]
        values["precision"] = [p for p in values["precision"] if p != "pure_bf16" or p == base.precision]
        values["optim"] = [base.optim]
        # ZeRO without offload on one stated GPU shards nothing: dropping it spends no memory (PF050)
        one_gpu = job.settings.gpus == 1 and base.zero in ("z0", "z1", "z2", "z3") and "zero" in knobs
        values["zero"] = [base.zero] + (["none"] if one_gpu else [])
        if isinstance(cutoff, int) and cutoff > 0 and job.value("stage") == "ppo":
            cutoff = methods.ppo_sequence(config, cutoff)  # each sequence is prompt + generated response
        aim = AIM_TOKENS // cutoff if isinstance(cutoff, int) and cutoff > 0 else base.micro
        values["micro"] = [(m, a) for m, a in values["micro"] if m <= max(base.micro, aim)]
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
    if not job.deepspeed[0]:
        # the DeepSpeed file `deepspeed:` names was not read (outside the project, not found): it may state the
        # batch itself, and a YAML batch that differs from it stops the run (XF002), so the shape stays
        values["micro"] = [(base.micro, base.ga)]
    if not job.settings.target_stated:
        _on_every_gpu(values, base)
    return values


def _on_every_gpu(values: dict[str, list[Any]], base: space.Knobs) -> None:
    """Without a target, only what holds on every GPU: the precision stays (bf16 is emulated on V100 / T4, and fp16
    is what PF001 flags where bf16 runs) and so does the micro-batch (no memory to judge it by: a 16 GiB T4 or a 192
    GiB MI300X). fa2 and Liger are left out by their own tests (`fa2_usable`, `liger_plannable`); packing, SDPA
    for eager attention, and no DeepSpeed on one stated GPU hold everywhere."""
    values["precision"] = [base.precision]
    values["micro"] = [(base.micro, base.ga)]


# The stage the plan lowers ZeRO-3 to (MEM003's advice): gradients and optimizer states stay sharded, with the
# communication volume of plain data parallel.
LOWER_STAGE = 2


def lower_stage(job: Job, base: space.Knobs) -> str | None:
    """The ZeRO knob value of the job's DeepSpeed JSON at LOWER_STAGE, where the plan may write it there: a ZeRO-3
    JSON file that was read, has a literal stage, no AutoTP and no optimizer offload to NVMe (below stage 3 it runs
    as CPU offload, DS012), and that no other config of the run reads (a shared file is left to the user: the edit
    would change the other jobs too); None otherwise."""
    from cfgopt.plan.knob_edits import stage_edits

    _, ds = job.deepspeed
    src = job.deepspeed_source
    if not base.zero.startswith("z3") or ds is None or src is None or ds is not src.data or job.deepspeed_shared:
        return None
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


def _candidates(
    base: space.Knobs,
    values: dict[str, list[Any]],
    batch_pinned: bool,
    rejected: dict[space.Knobs, Rejection],
    neat_fails: Callable[[space.Knobs], bool],
) -> list[space.Knobs]:
    """Every combination tune's space allows; Liger is not turned on under ZeRO-3 (a known backward failure,
    LF027) nor where the plan lowers ZeRO-3 (`_LIGER_AFTER_STAGE`), nor neat packing with fa2 where it fails
    (`neat_fails`, LF019); with a DeepSpeed JSON that states the batch itself (`batch_pinned`), the batch shape
    moves only where DeepSpeed is dropped: the plan edits the YAML alone, and a YAML batch that differs from its
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
        if neat_fails(k):
            knob = "packing" if k.packing != base.packing else "attn" if k.attn != base.attn else None
            rejected[k] = Rejection(REFUSED, knob, "neat packing with fa2 takes one row per micro-batch (LF019)")
            return False
        if batch_pinned and k.zero != "none" and (k.micro, k.ga) != (base.micro, base.ga):
            rejected[k] = Rejection(REFUSED, "micro", "the DeepSpeed JSON states the batch itself (XF002)")
            return False
        return True

    refused: dict[space.Knobs, tuple[str, str, str]] = {}
    out = space.combinations(base, values, keep, refused)
    rejected.update({k: Rejection(*why) for k, why in refused.items()})
    return out


def _neat_fa2_check(job: Job, base: space.Knobs) -> Callable[[space.Knobs], bool]:
    """Does a candidate run neat packing (the user's, or the packing the plan turns on) with fa2 where the first
    batch fails (`methods.neat_fa2_fails`: a micro-batch of more than one row, or a gemma4 / gpt-oss model)? Only
    in an environment with flash-attn (`fa2_runs`): the one the plan is made for judges every check."""
    model, user_neat = job.value("model_name_or_path"), job.on("neat_packing")
    # the collator asserts only where `fa2` runs: without flash-attn it falls back to SDPA (`fa2_runs`)
    sft = methods.stage_of(job.values()) == "sft" and fa2_runs(job)

    def fails(k: space.Knobs) -> bool:
        neat = user_neat or (k.packing and not base.packing)
        return sft and neat and k.attn == "fa2" and methods.neat_fa2_fails(model, k.micro)

    return fails


# Packing the plan turns on keeps the samples apart (`neat_packing`): plain packing lets packed samples attend to each
# other, a change of what the model learns that only the user chooses. Without flash-attn's varlen path
# LLaMA-Factory builds a 4-D block mask per batch. Measured on one H200 under SDPA, neat vs plain packing at the same
# shape and tokens per step (median step of 6; bench/planner/README.md): Llama-3-8B LoRA cutoff 2048, 8 x 2:
# 2.290 vs 1.930 s; Qwen2.5-7B LoRA r32 cutoff 4096, 1 x 16: 6.991 vs 5.838 s (both 0.84x); Llama-3-8B full, 2 x 1:
# 0.765 vs 0.705 s (0.92x: the optimizer step, which the mask does not touch, is a larger share of a full step).
NEAT_WITHOUT_FA2 = {"lora": (1.930 / 2.290 + 5.838 / 6.991) / 2, "full": 0.705 / 0.765}


def neat_mask_cost(job: Job) -> float:
    """Neat packing's speed under SDPA relative to plain packing, for the job's fine-tuning method (freeze, like
    full, steps an optimizer over whole layers)."""
    return NEAT_WITHOUT_FA2["full" if methods.full_weight_method(job.values()) else "lora"]


def fa2_runs(job: Job) -> bool:
    """Does `flash_attn: fa2` run FlashAttention-2 in the job's environment? Without the flash-attn package
    LLaMA-Factory warns and falls back to SDPA (model/model_utils/attention.py), so a check that needs fa2 to bite
    (LF019's one row per micro-batch) does not constrain the plan there."""
    return job.has_package("flash_attn")


# Stochastic rounding (pure bf16 + torchao's 8-bit AdamW, `space.SR_OPTIM`) against bf16 autocast, by model size, on
# one H200 (bench/planner/README.md): Llama-3-8B / Qwen2.5-7B full SFT 1.21x / 1.18x the bf16 + bnb 8-bit plan
# (what the priors give: 0.72 x 1.39 / 0.83); Qwen3-4B full packed 0.72x bf16 + AdamW (25.7 vs 61.9 GiB), and
# qwen3_full_sft 0.69x the bnb plan. Its update costs what the optimizer step costs, a larger share of a small
# model's step. Below SR_FASTER_FROM (between the 4B and 7B measured; sizes in between not measured) it ranks at
# SR_SMALL_SPEED of bf16 + AdamW, below 8-bit AdamW as measured: the memory choice, planned where nothing faster fits.
SR_FASTER_FROM = 6_000_000_000
SR_SMALL_SPEED = 0.72


class Runtime(NamedTuple):
    """What the job's environment runs of a candidate's knobs, for its speed (`runtime_of`)."""

    fa2: bool = False  # flash-attn installed: `fa2` runs FlashAttention-2 (else SDPA)
    neat_cost: float = NEAT_WITHOUT_FA2["lora"]  # neat packing under SDPA, relative to plain packing
    sr_small: bool = False  # a model below SR_FASTER_FROM (or of unknown size): stochastic rounding is slower
    user_neat: bool = False  # the user's `neat_packing`: every packed candidate is neat, not only the plan's own


def runtime_of(job: Job) -> Runtime:
    """What the job's environment runs: fa2 or SDPA, neat packing's cost for its method, the model's size."""
    small = True
    if stochastic_rounding_ok(job):  # the size matters only where stochastic rounding is a candidate (and the
        shape = job.shape  # model's shape is not read on a lint that plans without it: start-up)
        small = shape is None or shape.num_parameters < SR_FASTER_FROM
    return Runtime(fa2_runs(job), neat_mask_cost(job), small, job.on("neat_packing"))


def plan_keys(k: space.Knobs, base: space.Knobs) -> dict[str, Any]:
    """The YAML keys the plan writes for candidate `k`: tune's (`space.changed_keys`), with the packing it turns on
    written as `neat_packing`."""
    changes = space.changed_keys(k, base)
    if changes.get("packing") is True:
        del changes["packing"]
        changes["neat_packing"] = True
    return changes


def plan_speed(
    k: space.Knobs,
    base: space.Knobs,
    n: int,
    stage: str,
    data: DataTerm | None = None,
    runtime: Runtime | None = None,
) -> float:
    """tune's prior for `k` as the job's environment runs it (`runtime`: `fa2` without flash-attn is SDPA), with
    the cost of neat packing's block mask where the plan packs without fa2 running, stochastic rounding's speed at
    the model's size, and what padding costs it on the job's own data (`data`: cfgopt.plan.data_speed)."""
    runtime = runtime or Runtime()
    ran = k if k.attn != "fa2" or runtime.fa2 else k._replace(attn="sdpa")
    neat_mask = k.packing and (runtime.user_neat or not base.packing) and ran.attn != "fa2"
    on_data = data.factor(k) if data is not None else 1.0
    speed = prior_speed(ran, n, stage) * (runtime.neat_cost if neat_mask else 1.0) * on_data
    if k.optim == space.SR_OPTIM and runtime.sr_small:
        speed *= SR_SMALL_SPEED / (PRIORS["optim"][space.SR_OPTIM] * PRIORS["precision"]["pure_bf16"])
    return speed


def data_term_of(job: Job) -> DataTerm | None:
    """The job's data term where its local data is profiled (memoized on the job)."""
    if "data_term" not in job.memo:
        from cfgopt.plan.data_speed import data_term

        values = job.values()
        job.memo["data_term"] = data_term(job.data_profile, values.get("cutoff_len"), methods.stage_of(values))
    return job.memo["data_term"]


def packing_gain_on_data(job: Job) -> tuple[float, str] | None:
    """What neat packing alone is expected to bring at the job's micro-batch on its own data, and the padding it
    rests on in words (None: the data is not profiled): PF006 states it instead of the prior's 3.86x, and is silent
    where packing would not pay."""
    data = data_term_of(job)
    if data is None:
        return None
    _, ds = job.deepspeed
    base = space.baseline_knobs(job.values(), ds)
    n, stage = hardware_gpus(job), methods.stage_of(job.values())
    packed = base._replace(packing=True)
    run = runtime_of(job)
    gain = plan_speed(packed, base, n, stage, data, run) / plan_speed(base, base, n, stage, data, run)
    return gain, data.words(base.micro)


def _data_words(plan: SpeedPlan, data: DataTerm | None) -> str:
    """Where the expected gain's packing and padding figures come from, when the plan packs or moves the batch."""
    b, k = plan.base, plan.best
    if (k.packing, k.micro) == (b.packing, b.micro):
        return ""
    if data is not None:
        return data.words(b.micro)
    return "packing's gain from Alpaca-like data (the job's data not profiled)" if k.packing != b.packing else ""


def _estimate(job: Job, k: space.Knobs, base: space.Knobs, n: int):
    changes = plan_keys(k, base)
    if k.zero == "none" and base.zero != "none":
        return job.estimate(n, deepspeed=None, **changes)
    if k.zero != base.zero:  # the job's own JSON at the lower stage (`lower_stage`)
        _, ds = job.deepspeed
        return job.estimate(n, deepspeed=at_stage(ds or {}, LOWER_STAGE), **changes)
    return job.estimate(n, **changes)


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
        "releases": [settings.llamafactory_version, settings.deepspeed_version, settings.gpus, settings.gpus_source],
        "knobs": list(knobs),
        "folder": str(job.path.parent),  # a local model's config.json is read from beside the config
        "group": job.group,
        "data": hash(job.data_profile),  # the data term reads the profile (its files' contents, in this process)
    }
    key = memo_text(inputs)
    if key.startswith("id:"):  # inputs that cannot be written out: no sharing
        return _plan(job, knobs)
    if key not in _PLANS:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = _plan(job, knobs)
    return _PLANS[key]


def _plan(job: Job, knobs: tuple[str, ...]) -> SpeedPlan | None:
    """The plan for the job's environment, with what the packages it lacks would bring (`WithPackages`)."""
    plan = _search(job, knobs, _platform(job))
    missing = _missing_packages(job)
    if not missing:
        return plan
    richer = _search(job, _knobs_with_packages(job, knobs), _with_extras(job))
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


def _search(job: Job, knobs: tuple[str, ...], platform: space.Platform) -> SpeedPlan | None:
    """The fastest candidate on `platform` by tune's priors that fits by the memory model; None when none does."""
    _, ds = job.deepspeed  # a DeepSpeed file not read: no estimate, so its stage stays as it is
    hardware = job.hardware(GPUS_IF_UNSTATED_SPEND)
    n = hardware.gpus  # unstated: 1, so that what is planned fits on any count
    # the optimizer as written (tune's baseline reads the config as written): a filled-in default is no choice
    base = space.baseline_knobs(job.values(), ds)._replace(optim=space.optim_of(job.data))
    has_estimate = job.estimate(n) is not None
    stage = methods.stage_of(job.values())
    data, run = data_term_of(job), runtime_of(job)
    values = _values(job, base, knobs, has_estimate, platform)
    searched = {name for name, offered in values.items() if len(offered) > 1}
    rejected: dict[space.Knobs, Rejection] = {}
    ranked = []
    candidates = _candidates(base, values, json_pins_batch(ds), rejected, _neat_fa2_check(job, base))
    for i, k in enumerate(candidates):
        est = _estimate(job, k, base, n) if has_estimate else None
        if has_estimate and (est is None or not est.fits_with_headroom()):
            why = does_not_fit(est.required_gib) if est is not None else "the memory model cannot estimate it"
            rejected[k] = Rejection(MEMORY, None, why)
            continue
        peak = est.required_gib if est is not None else None
        ranked.append((rank(plan_speed(k, base, n, stage, data, run), peak, len(k.changes(base)), i), k, est))
    if not ranked:
        return None
    _, best, est = min(ranked, key=lambda r: r[0])
    from cfgopt.knowledge.bitsandbytes import is_bnb_optimizer  # the one list of bitsandbytes optimizers

    gain = plan_speed(best, base, n, stage, data, run) / plan_speed(base, base, n, stage, data, run)
    plan = SpeedPlan(hardware, base, best, gain)
    plan.data_words = _data_words(plan, data)
    plan.est_gib = est.required_gib if est is not None else None
    plan.searched = searched
    plan.changes = plan_keys(best, base)
    plan.drop_deepspeed = best.zero == "none" and base.zero != "none"
    if best.zero not in (base.zero, "none") and job.deepspeed_source is not None:
        plan.deepspeed_stage, plan.deepspeed_file = LOWER_STAGE, job.deepspeed_source.document.path.name
    turned_on = {
        "liger": best.liger and not base.liger,
        "fa2": best.attn == "fa2" != base.attn,
        "bnb": is_bnb_optimizer(best.optim) and best.optim != base.optim,
    }
    env = job.environment
    plan.environment = env.source
    for knob, (_module, package) in PACKAGES.items():
        if turned_on[knob] and env.assumed:
            plan.needs.append(package)
    for (name, value), rejection in _left_out(job, base, knobs, values, has_estimate).items():
        k = best._replace(**{name: value})
        refused = space.refusal(k, base)  # what LLaMA-Factory refuses anyway: said first
        rejected.setdefault(k, Rejection(*refused) if refused else rejection)
    _explain(plan, [k for _, k, _ in ranked], rejected, lambda k: plan_speed(k, base, n, stage, data, run))
    plan.remarks = _remarks(job, plan, run, values)
    plan.notes += plan.remarks
    return plan


# --------------------------------------------------------------------------- why not: the rejections in words

_QUOTED_GAIN = 1.10  # a setting left out is quoted in the fix's description when its prior is 10% above the plan's
_NO_ESTIMATE = {
    MEMORY: "no memory estimate of this job to spend memory on",
    NUMERICS: "it changes the numerics, so it is planned only with a memory estimate",
}


def _left_out(
    job: Job, base: space.Knobs, knobs: tuple[str, ...], values: dict[str, list[Any]], has_estimate: bool
) -> dict[tuple[str, Any], Rejection]:
    """Knob values (the batch shape aside) this job would be offered with every package installed and a memory
    estimate, and is not: the package is not known to be there (PACKAGE), or there is no estimate to spend memory
    (MEMORY) or change numerics (NUMERICS) on."""
    # fa2 only where the target runs it: on a V100 a note that fa2 would be faster is no advice
    runs_fa2 = job.settings.target.runs_fa2
    everything = space.Platform(cuda=True, flash_attn=runs_fa2, liger=True, deepspeed=True, bitsandbytes=True)
    offered = _values(job, base, knobs, True, everything)
    estimated = values if has_estimate else _values(job, base, knobs, True, _platform(job))
    out: dict[tuple[str, Any], Rejection] = {}
    for name in space.KNOB_NAMES[1:]:
        for value in offered[name]:
            if value in values[name]:
                continue
            if value not in estimated[name]:
                out[(name, value)] = Rejection(PACKAGE, name, _package_missing(job, name, value))
            else:
                kind = NUMERICS if name in ("precision", "optim") else MEMORY
                unknown = "" if job.settings.target.memory_gib else f" ({_no_memory(job.settings)})"
                out[(name, value)] = Rejection(kind, name, _NO_ESTIMATE[kind] + unknown)
    return out


def _no_memory(settings) -> str:
    """Why there is no memory to plan with: no target, or a target without GPU memory (`--target cpu`)."""
    if not settings.target_stated:
        return "no target stated"
    return f"{settings.target.name}: no GPU memory to estimate against"


def _package_missing(job: Job, name: str, value: Any) -> str:
    key = {"liger": "liger", "attn": "fa2"}.get(name, "bnb")
    refused = _fa2_refusal(job) if key == "fa2" and job.has_package("flash_attn") else None
    _module, package = PACKAGES[key]
    return refused or f"{package} is not in {job.environment.where}"


def _explain(
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


def _remarks(job: Job, plan: SpeedPlan, run: Runtime, values: dict[str, list[Any]]) -> list[str]:
    """What the description ends with: `fa2` that runs as SDPA, and the choices that change what the job trains on
    or its speed at this model size, said and never applied (ruff's display-only fixes)."""
    found = [
        _fa2_fallback(job, plan, run),
        _plain_packing_alternative(job, plan, run),
        _longer_row(job, plan, run),
        _stochastic_rounding(plan, run, values),
    ]
    return [words for words in found if words]


def _neat_planned(job: Job, plan: SpeedPlan) -> bool:
    """Does the planned run pack neatly (the user's `neat_packing`, or the packing the plan turns on)?"""
    return plan.best.packing and (job.on("neat_packing") or not plan.base.packing)


def _fa2_fallback(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    if plan.best.attn != "fa2" or run.fa2:
        return ""
    neat = _neat_planned(job, plan) and methods.stage_of(job.values()) == "sft"
    return FA2_FALLS_BACK + (": LF019's one row per micro-batch does not bind" if neat else "")


def _plain_packing_alternative(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    """Neat packing under SDPA: what plain packing measured, as text (it lets packed samples attend to each other,
    so only the user sets it)."""
    if not _neat_planned(job, plan) or (plan.best.attn == "fa2" and run.fa2) or job.is_set("packing"):
        return ""
    return (
        f"display only: `packing: true` ran {1 / run.neat_cost:.2f}x neat packing's speed at the same shape under "
        "SDPA (H200, bench/planner/README.md) but lets packed samples attend to each other (what the job trains on "
        "changes: yours to choose)"
    )


def _longer_row(job: Job, plan: SpeedPlan, run: Runtime) -> str:
    """Neat packing with fa2 running: one row per micro-batch (LF019). A row `micro` times longer keeps the tokens
    per micro-batch but changes what the job trains on (samples no longer cut where they were), so it is said."""
    b, k = plan.base, plan.best
    cutoff = job.value("cutoff_len")
    if not (_neat_planned(job, plan) and k.attn == "fa2" and run.fa2 and k.micro == 1 < b.micro):
        return ""
    if not isinstance(cutoff, int) or isinstance(cutoff, bool) or cutoff <= 0:
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


# --------------------------------------------------------------------------- the plan as one fix


def plan_edits(source: Source, plan: SpeedPlan) -> list[Edit] | None:
    """Span edits writing the plan into a LLaMA-Factory YAML or command line (`cfgopt.plan.knob_edits`, the writer
    tune's winner uses too); None when one cannot be made."""
    from cfgopt.plan.knob_edits import knob_edits

    made = knob_edits(source, plan.changes, ("deepspeed",) if plan.drop_deepspeed else ())
    if made is None or made.failed:
        return None
    return made.edits


def attach_plans(
    context: Callable[[Source], Context],
    diags: list[Diagnostic],
    owners: dict[int, Source],
    hidden: Collection[Path] = (),
) -> None:
    """Replace the planned rules' own fixes by each job's plan, given to its first fixable speed finding; a plan
    that lowers the ZeRO stage moves the stage's finding to the JSON, with the JSON's edit (`_move_to_json`).
    `context`: a file's rule context (the engine's `Project.context`); `hidden`: real paths of files whose
    findings are not shown (excluded, not checked)."""
    by_source: dict[int, list[Diagnostic]] = {}
    for d in diags:
        src = owners.get(id(d))
        if d.code in PLANNED_CODES and src is not None:
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
        if moved is not None:
            finding, on_json = moved
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
            continue  # no plan: a rule's own fix (PF001's bf16) stays
        for d in live:
            d.fix = None
        carrier.fix = Fix(plan.description(), Applicability.UNSAFE, made, planned=True)
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
    from cfgopt.plan.knob_edits import stage_edits

    json_src = ctx.job.deepspeed_source
    finding = next((d for d in found if "zero" in _KNOBS_OF.get(d.code, ())), None)
    if plan.deepspeed_stage is None or json_src is None or finding is None or not ctx.settings.is_fixable(finding.code):
        return None
    path = json_src.document.path
    if real_path(path) in hidden or context(json_src).settings.ignored_in_file(path, finding.code):
        return None
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
        fix=Fix(_json_fix_words(ctx.source, plan), Applicability.UNSAFE, made, planned=True),
    )
    return finding, moved


def _json_fix_words(config: Source, plan: SpeedPlan) -> str:
    """The JSON part's description: the whole plan where it is all of it, else what it is part of."""
    stage = f"`zero_optimization.stage: {plan.deepspeed_stage}`, the keys only ZeRO-3 reads removed"
    if not plan.config_changed:
        return f"{plan.description()}; {stage}"
    name = config.document.path.name
    return f"ZeRO-{plan.deepspeed_stage} ({stage}): the DeepSpeed part of the speed plan written in {name}"


class StoppedJob(SpeedPlan):
    """No plan: the job's environment stops it at start-up, so no speed-up is real; `why` says how, in one line."""

    def __init__(self, plan: SpeedPlan, why: str) -> None:
        super().__init__(plan.hardware, plan.base, plan.base, 1.0)
        self.why = why


def _unless_stopped(job: Job, plan: SpeedPlan | None) -> SpeedPlan | None:
    """The plan, or where the job's environment stops it at start-up (ENV002: a checked package outside the
    release's range) or gives it no GPU (ENV001: torch built for the other platform), a plan that changes nothing
    and says why: a gain is no gain for a job that does not start."""
    from cfgopt.job.environment import stops_at_start, torch_finds_no_gpu

    env = job.environment
    why = stops_at_start(env, job.settings.llamafactory_version, job.lf_label) or torch_finds_no_gpu(
        env, job.settings.target
    )
    return StoppedJob(plan, why) if plan is not None and why else plan


def _say_why_stopped(found: list[Diagnostic], plan: StoppedJob) -> None:
    """The job's most severe speed finding says, in one line, why there is no plan (and no fix offers a gain)."""
    first = max(found, key=lambda d: d.severity)
    if _NO_PLAN_STOPPED not in first.message:
        first.message += f"; {_NO_PLAN_STOPPED}: {plan.why}"


_NO_PLAN_STOPPED = "no speed plan"


def _say_why_no_plan(found: list[Diagnostic], plan: SpeedPlan) -> None:
    """No plan fits the job's environment, though one would with the packages it lacks: the first finding says so
    (never a silent fall-back to a plan many times slower)."""
    assert plan.with_packages is not None
    first = max(found, key=lambda d: d.severity)  # the most severe finding: MEM001 where nothing fits
    if _NO_PLAN not in first.message:
        first.message += f"; {_NO_PLAN} ({plan.with_packages.source}): {plan.with_packages.words()}"


_NO_PLAN = "no speed plan fits the job's environment"


# A speed finding whose knob the plan leaves as it is is dropped: the plan spends the memory on something the priors
# rank faster (Qwen3-4B LoRA DPO on the H200: 8 x 1 with checkpointing on ran 2.6x what 2 x 4 without it did), so
# warning about the setting would be a finding whose fix does not fix it.
_KNOBS_OF = {code: tuple(k for k, codes in OWNERS.items() if code in codes) for code in PLANNED_CODES}


def _kept_by(plan: SpeedPlan, code: str) -> bool:
    """Does the plan leave every knob that `code`'s finding is about as it is? (MEM001, about memory as a whole,
    owns several knobs and is answered by any of them.)"""
    knobs = _KNOBS_OF.get(code, ())
    if code == "MEM001" or not knobs:
        return False
    # judged, not merely left: the plan weighed other values of the knob (a ZeRO stage it cannot edit is not)
    return all(k in plan.searched and getattr(plan.best, k) == getattr(plan.base, k) for k in knobs)


# DeepSpeed JSON fixes that change only how DeepSpeed runs (its offload; DS023: the dtype it reduces gradients in):
# moot where every config using the JSON drops DeepSpeed, and the README promises that JSON is left as it is.
_JSON_SPEED_FIXES = frozenset({"PF051", "MEM002", "DS023"})


def _drop_answered_json_fixes(
    context: Callable[[Source], Context], diags: list[Diagnostic], owners: dict[int, Source]
) -> None:
    """A plan that removes `deepspeed:` from every config using a JSON leaves that JSON alone: editing it in the
    same run (an offload removed from a file no job reads any more) is a change nobody asked for, and the file
    may be shared. Its findings keep their message; their fix says so (`LEFT_ALONE`, display-only)."""
    for d in diags:
        src = owners.get(id(d))
        if d.code not in _JSON_SPEED_FIXES or d.fix is None or src is None or src.kind.is_llamafactory:
            continue
        consumers = context(src).consumers
        plans = [plan_for(context(c).job) for c in consumers]
        if consumers and all(p is not None and p.drop_deepspeed for p in plans):
            d.fix = Fix(LEFT_ALONE, Applicability.DISPLAY, [])
