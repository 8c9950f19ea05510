"""The speed the plan expects of a candidate, as the job's environment runs it: tune's priors (`cfgopt.plan.priors`)
with what flash-attn's absence, neat packing's block mask, stochastic rounding at the model's size and padding on
the job's own data (`cfgopt.plan.data_speed`) change in them."""

from __future__ import annotations

from cfgopt.job.job import GPUS_IF_UNSTATED_SPEND, Job
from cfgopt.knowledge import methods
from cfgopt.plan import space
from cfgopt.plan.priors import PRIORS, prior_speed
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.plan.data_speed import DataTerm


def hardware_gpus(job: Job) -> int:
    return job.hardware(GPUS_IF_UNSTATED_SPEND).gpus


# Packing the plan turns on keeps the samples apart (`neat_packing`): plain packing lets packed samples attend to each
# other, a change of what the model learns that only the user chooses. Without flash-attn's varlen path
# LLaMA-Factory builds a 4-D block mask per batch. Measured on one H200 under SDPA, neat vs plain packing at the same
# shape and tokens per step (median step of 6; bench/planner/README.md): Llama-3-8B LoRA cutoff 2048, 8 x 2:
# 2.290 vs 1.930 s; Qwen2.5-7B LoRA r32 cutoff 4096, 1 x 16: 6.991 vs 5.838 s (both 0.84x); Llama-3-8B full, 2 x 1:
# 0.765 vs 0.705 s (0.92x: the optimizer step, which the mask does not touch, is a larger share of a full step).
NEAT_WITHOUT_FA2 = {"lora": (1.930 / 2.290 + 5.838 / 6.991) / 2, "full": 0.705 / 0.765}
# where those were measured, as the plan's words cite them: at cutoff 1024 the seed's Llama-3-8B LoRA ran neat packing
# at 0.92x plain packing (1.016 vs 0.934 s, bench/verify/results.md), a cost not yet ranked by cutoff (bench/planner)
NEAT_MEASURED_ON = {
    "lora": "LoRA at cutoff 2048 and 4096; 1.09x at 1024",
    "full": "full fine-tuning at cutoff 2048",
}


def neat_method(job: Job) -> str:
    """Which measurement of neat packing's cost holds for the job: "full" (freeze too: it steps an optimizer over
    whole layers, like full) or "lora"."""
    return "full" if methods.full_weight_method(job.values()) else "lora"


def neat_mask_cost(job: Job) -> float:
    """Neat packing's speed under SDPA relative to plain packing, for the job's fine-tuning method."""
    return NEAT_WITHOUT_FA2[neat_method(job)]


# Stochastic rounding (pure bf16 + torchao's 8-bit AdamW, `space.SR_OPTIM`) against bf16 autocast, by model size, on
# one H200 (bench/planner/README.md): Llama-3-8B / Qwen2.5-7B full SFT 1.21x / 1.18x the bf16 + bnb 8-bit plan
# (what the priors give: 0.72 x 1.39 / 0.83); Qwen3-4B full packed 0.72x bf16 + AdamW (25.7 vs 61.9 GiB), and
# qwen3_full_sft 0.69x the bnb plan. Its update costs what the optimizer step costs, a larger share of a small
# model's step. Below SR_FASTER_FROM (between the 4B and 7B measured; sizes in between not measured) it ranks at
# SR_SMALL_SPEED of bf16 + AdamW, below 8-bit AdamW as measured: the memory choice, planned where nothing faster fits.
SR_FASTER_FROM = 6_000_000_000
SR_SMALL_SPEED = 0.72


class Runtime(Record):
    """What the job's environment runs of a candidate's knobs, for its speed (`runtime_of`)."""

    # `fa2` runs FlashAttention-2 (`Job.fa2_outcome`); else it is ranked as `fa2_fallback`: without flash-attn
    # LLaMA-Factory 0.9.5 keeps SDPA, or eager attention for Gemma 2 (model/model_utils/attention.py L46-53, L77-82)
    fa2: bool = False
    fa2_fallback: str = "sdpa"  # what `fa2` runs without flash-attn: SDPA, or eager for Gemma 2 (`Job.fa2_fallback`)
    neat_cost: float = NEAT_WITHOUT_FA2["lora"]  # neat packing under SDPA, relative to plain packing
    neat_measured_on: str = NEAT_MEASURED_ON["lora"]  # where neat_cost was measured, in the plan's words
    sr_small: bool = False  # a model below SR_FASTER_FROM (or of unknown size): stochastic rounding is slower
    user_neat: bool = False  # the user's `neat_packing`: every packed candidate is neat, not only the plan's own
    fa2_stops: str | None = None  # why `fa2` stops the job (`Job.fa2_outcome`): ranked as its fallback, never kept
    cutoff: object = None  # the job's `cutoff_len`: a stage's attention prior holds up to the one measured


def stochastic_rounding_ok(job: Job) -> bool:
    """torchao in the job's environment, with a transformers that hands `bf16_stochastic_round` on (5.0 and newer;
    an older one drops it silently and pure bf16 rounds updates away): stated, or probed on the node."""
    from cfgopt.environment.stated import transformers_at_least

    env = job.environment
    return env.has("torchao") and transformers_at_least(env, (5, 0))


def runtime_of(job: Job) -> Runtime:
    """What the job's environment runs: fa2 or its fallback, neat packing's cost for its method, the model's size."""
    small = True
    if stochastic_rounding_ok(job):  # the size matters only where stochastic rounding is a candidate (and the
        shape = job.shape  # model's shape is not read on a lint that plans without it: start-up)
        small = shape is None or shape.num_parameters < SR_FASTER_FROM
    neat = NEAT_MEASURED_ON[neat_method(job)]
    fa2, fallback, user_neat = job.fa2_outcome, job.fa2_fallback, job.on("neat_packing")
    return Runtime(fa2.runs, fallback, neat_mask_cost(job), neat, small, user_neat, fa2.stops, job.value("cutoff_len"))


def plan_speed(
    k: space.Knobs,
    base: space.Knobs,
    n: int,
    stage: str,
    data: DataTerm | None = None,
    runtime: Runtime | None = None,
) -> float:
    """tune's prior for `k` as the job's environment runs it (`runtime`: `fa2` without flash-attn is SDPA, or eager
    for Gemma 2), with the cost of neat packing's block mask where the plan packs without fa2 running, stochastic
    rounding's speed at the model's size, and what padding costs it on the job's own data (`data`:
    cfgopt.plan.data_speed)."""
    runtime = runtime or Runtime()
    ran = k if k.attn != "fa2" or runtime.fa2 else k._replace(attn=runtime.fa2_fallback)
    neat_mask = k.packing and (runtime.user_neat or not base.packing) and ran.attn != "fa2"
    on_data = data.factor(k) if data is not None else 1.0
    speed = prior_speed(ran, n, stage, runtime.cutoff) * (runtime.neat_cost if neat_mask else 1.0) * on_data
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
    base = space.baseline_knobs(job.values(), ds, job.soft_capped_attention)
    n, stage = hardware_gpus(job), methods.stage_of(job.values())
    packed = base._replace(packing=True)
    run = runtime_of(job)
    gain = plan_speed(packed, base, n, stage, data, run) / plan_speed(base, base, n, stage, data, run)
    return gain, data.words(base.micro)
