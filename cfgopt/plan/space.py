"""The search space of `cfgopt tune`: which knobs a candidate may change, and the config each candidate is.

A candidate is a `Knobs` value: micro batch with its matching gradient accumulation (micro x GA is kept at
the user's value, so the global batch micro x GA x GPUs does not change), gradient checkpointing, attention
implementation, packing, Liger kernels and the ZeRO stage / offload. `candidate_config` turns knobs into the
user's config with only the knobs that differ from the baseline changed, so the winner's diff is small.

Nothing here imports torch or the trainer; what the machine offers (CUDA, flash-attn, Liger, DeepSpeed) is
found by `cfgopt.environment.probe.probe_platform`, which asks a child Python process.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

from cfgopt.environment import Platform
from cfgopt.knowledge import methods
from cfgopt.text.record import Record
from cfgopt.text.user_text import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KNOB_NAMES = ("micro", "gc", "attn", "packing", "liger", "zero", "precision", "optim")

# Precision modes, as LLaMA-Factory sets them: `bf16` (autocast over fp32 master weights for what trains), `pure_bf16`
# (weights, gradients and optimizer states in bf16: half the state memory, numerics change), `fp16`, `fp32`.
PRECISIONS = ("bf16", "pure_bf16", "fp16", "fp32")
# Optimizers the search may switch a full / freeze fine-tune to (transformers' names): the fused AdamW, the 8-bit
# AdamW of bitsandbytes (a quarter of AdamW's state memory) and Adafactor (factored second moments).
OPTIMS = ("adamw_torch_fused", "adamw_bnb_8bit", "adafactor", "adamw_torch_8bit_sr")
DEFAULT_OPTIM = "default"  # no `optim` in the config: transformers' default (fused AdamW on torch >= 2.8)
# torchao's 8-bit AdamW with bf16 stochastic rounding, for pure bf16 weights: transformers' `optim:
# adamw_torch_8bit` with `optim_args: bf16_stochastic_round=True` (handed to torchao's AdamW8bit since transformers
# 5.0, PR #42972; before it the argument was dropped silently). The update is computed in fp32 and rounded to bf16
# at random in proportion, so small updates survive on average: pure bf16's speed and memory with AdamW's numerics
# (H200, Llama-3-8B / Qwen2.5-7B full SFT: 1.21x / 1.18x the bf16 autocast + bnb 8-bit plan, 38-40 GiB less,
# final loss +0.03% / -19.7% after 20 steps; on Qwen3-4B 0.72x bf16 + AdamW and 0.69x the bnb plan: the planner
# ranks it by model size, `planner.SR_FASTER_FROM`; bench/planner/README.md).
SR_OPTIM = "adamw_torch_8bit_sr"
SR_KEYS = {"optim": "adamw_torch_8bit", "optim_args": "bf16_stochastic_round=True"}


def optim_of(config: dict[str, Any]) -> str:
    """The optimizer a config trains with, as a knob value: `optim` (DEFAULT_OPTIM when unset), SR_OPTIM for
    torchao's 8-bit AdamW with bf16 stochastic rounding."""
    name = str(config.get("optim") or DEFAULT_OPTIM)
    args = str(config.get("optim_args") or "").replace(" ", "").lower()
    if name == SR_KEYS["optim"] and "bf16_stochastic_round=true" in args.split(","):
        return SR_OPTIM
    return name


# ZeRO variants of the search, as LLaMA-Factory 0.9.5's examples/deepspeed/ds_z*_config.json write them.
# ZeRO stages with and without CPU offload (z3_optim_offload: the optimizer only; z3_offload: parameters too); no
# DeepSpeed ("none") stands for ZeRO-0, which partitions nothing
ZERO_VALUES = ("none", "z1", "z2", "z2_offload", "z3", "z3_optim_offload", "z3_offload")

_DS_COMMON: dict[str, Any] = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "zero_allow_untested_optimizer": True,
    "fp16": {
        "enabled": "auto",
        "loss_scale": 0,
        "loss_scale_window": 1000,
        "initial_scale_power": 16,
        "hysteresis": 2,
        "min_loss_scale": 1,
    },
    "bf16": {"enabled": "auto"},
}
_Z2: dict[str, Any] = {
    "stage": 2,
    "allgather_partitions": True,
    "allgather_bucket_size": 5e8,
    "overlap_comm": False,
    "reduce_scatter": True,
    "reduce_bucket_size": 5e8,
    "contiguous_gradients": True,
    "round_robin_gradients": True,
}
_Z3: dict[str, Any] = {
    "stage": 3,
    "overlap_comm": False,
    "contiguous_gradients": True,
    "sub_group_size": 1e9,
    "reduce_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": True,
}
_CPU = {"device": "cpu", "pin_memory": True}
BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def deepspeed_template(zero: str) -> dict[str, Any] | None:
    """LLaMA-Factory's own example JSON for a ZeRO variant (every batch and precision value "auto")."""
    if zero == "none":
        return None
    if zero == "z1":  # LLaMA-Factory ships no ZeRO-1 example: its ZeRO-2 one at stage 1
        zopt = {**_Z2, "stage": 1}
    elif zero.startswith("z2"):
        zopt = dict(_Z2)
        if zero == "z2_offload":
            zopt = {"stage": 2, "offload_optimizer": dict(_CPU), **{k: v for k, v in _Z2.items() if k != "stage"}}
    elif zero.startswith("z3"):
        zopt = dict(_Z3)
        if zero in ("z3_offload", "z3_optim_offload"):
            offload = {"offload_optimizer": dict(_CPU)}
            if zero == "z3_offload":
                offload["offload_param"] = dict(_CPU)
            zopt = {"stage": 3, **offload, **{k: v for k, v in _Z3.items() if k != "stage"}}
    else:
        raise ValueError(f"unknown ZeRO variant {zero!r}")
    return {**json.loads(json.dumps(_DS_COMMON)), "zero_optimization": zopt}


def zero_of(ds: dict[str, Any] | None) -> str:
    """The ZeRO knob value of a DeepSpeed config (None: no DeepSpeed)."""
    if ds is None:
        return "none"
    zopt = ds.get("zero_optimization") if isinstance(ds.get("zero_optimization"), dict) else {}
    try:
        stage = int(zopt.get("stage", 0))
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite stage (DS005 reports it)
        stage = 0
    offloaded = {
        k
        for k in ("offload_optimizer", "offload_param")
        if isinstance(zopt.get(k), dict) and str(zopt[k].get("device", "none")).lower() in ("cpu", "nvme")
    }
    if stage == 3 and offloaded == {"offload_optimizer"}:
        return "z3_optim_offload"
    return f"z{stage}" + ("_offload" if offloaded else "")


class Knobs(Record):
    """One candidate configuration. A record (`Record`), not a dataclass: the speed planner runs on the lint path,
    where creating a dataclass costs start-up time (docs/architecture.md)."""

    micro: int
    ga: int
    gc: bool  # gradient checkpointing on (LLaMA-Factory's default)
    attn: str  # "sdpa", "disabled" (eager), "fa2", or the user's other value
    packing: bool
    liger: bool
    zero: str  # see ZERO_VALUES; the user's own stage (e.g. "z1") may appear in the baseline
    precision: str = "bf16"  # see PRECISIONS
    optim: str = DEFAULT_OPTIM  # the config's `optim`, or DEFAULT_OPTIM

    def label(self, on_cpu: bool = False) -> str:
        """The knobs in one line; `on_cpu`: the runs go to a CPU, which trains in fp32 whatever the config
        says (verify.runner.cpu_overrides), so the precision shown is the one run, with the planned one."""
        precision = f"fp32 (run; {self.precision} planned)" if on_cpu and self.precision != "fp32" else self.precision
        return (
            f"{self.micro}x{self.ga} gc={'on' if self.gc else 'off'} attn={self.attn} "
            f"pack={'on' if self.packing else 'off'} liger={'on' if self.liger else 'off'} zero={self.zero} "
            f"{precision} optim={self.optim}"
        )

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()

    def changes(self, base: Knobs) -> list[str]:
        """The knob names where this candidate differs from `base` (micro and ga count as one)."""
        return [k for k in KNOB_NAMES if getattr(self, k) != getattr(base, k)]


def _bool(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


_MAX_KNOB = 2**31 - 1  # a micro-batch or accumulation beyond it is no knob value (tune's priors raise it to powers)


def _int(value: Any, default: int) -> int:
    return positive_int(value, _MAX_KNOB) or default


def baseline_knobs(config: dict[str, Any], ds: dict[str, Any] | None, soft_capped: bool = False) -> Knobs:
    """The user's config as knob values. `flash_attn: auto` counts as what runs: sdpa (LLaMA-Factory leaves it to
    transformers, which picks SDPA), or fa2 for a model that soft-caps its attention (`soft_capped`, Gemma 2: there
    LLaMA-Factory turns `auto` into `fa2`, eager without flash-attn, which is how `fa2` is ranked and estimated
    without it; model/model_utils/attention.py L46-53 in 0.9.5)."""
    attn = str(config.get("flash_attn", "auto")).lower()
    if attn == "auto":
        attn = "fa2" if soft_capped else "sdpa"
    stage = str(config.get("stage", "sft"))
    packing = config.get("packing")
    packing = _bool(packing, stage == "pt") or config.get("neat_packing") is True
    return Knobs(
        micro=_int(config.get("per_device_train_batch_size"), 8),
        ga=_int(config.get("gradient_accumulation_steps"), 1),
        gc=not _bool(config.get("disable_gradient_checkpointing"), False),
        attn=attn,
        packing=packing,
        liger=_bool(config.get("enable_liger_kernel"), False),
        zero=zero_of(ds) if ds is not None or config.get("deepspeed") else "none",
        precision=precision_of(config),
        optim=optim_of(config),
    )


def precision_of(config: dict[str, Any]) -> str:
    """The precision mode a config trains in (LLaMA-Factory: `pure_bf16` wins over `bf16`, which wins over `fp16`)."""
    for key in ("pure_bf16", "bf16", "fp16"):
        if config.get(key) is True:
            return key
    return "fp32"


def divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


class SpaceOptions(Record):
    gpus: int = 1
    allow_packing: bool = False
    max_micro: int = 64
    knobs: tuple[str, ...] = KNOB_NAMES  # the knobs searched; the others stay at the user's value
    bf16: bool = True  # the GPU runs bf16 (V100 and T4 do not: docs/targets.md)
    overflows_fp16: bool = False  # the model overflows fp16 (`Job.overflows_fp16`, LF050): fp16 trains nothing
    soft_capped: bool = False  # the model soft-caps its attention (`Job.soft_capped_attention`): no SDPA


# BAdam keeps the trainable weights in the checkpoint's dtype (LLaMA-Factory 0.9.5 model/adapter.py L319: "Pure bf16 /
# BAdam detected, remaining trainable params in half precision"; the model loads with `torch_dtype: auto`,
# model/loader.py L155), and its BlockOptimizer hands those weights to the trainer as its `param_groups` (badam 1.2.2
# block_optim.py). fp16 mixed precision unscales their gradients with torch's GradScaler, which refuses fp16 ones:
# with an fp16 checkpoint the job stops at its first optimizer step with `ValueError: Attempting to unscale FP16
# gradients` (bench/verify/badam_fp16_scaler.py: badam 1.2.2, torch 2.13's GradScaler on the CPU; bf16 weights ran).
BADAM_FP16 = (
    "fp16 mixed precision not planned: BAdam keeps the trained weights in the checkpoint's dtype, and with an fp16 "
    "checkpoint fp16's gradient scaler stops the job at its first step (`Attempting to unscale FP16 gradients`); "
    "its speed with BAdam is unmeasured"
)


def precision_values(config: dict[str, Any], base: Knobs, options: SpaceOptions) -> list[str]:
    """bf16 where the GPU has it (fp16 where it does not, except for a model that overflows fp16: LF050, and for
    BAdam: BADAM_FP16) instead of fp16 / fp32; `pure_bf16` for a full or freeze fine-tune, whose fp32 master
    weights, gradients and AdamW states are most of its memory."""
    out = [base.precision]
    if options.bf16:
        out.append("bf16")  # also back from pure_bf16: tune measures whether the fp32 master copy costs speed
    elif base.precision == "fp32" and not options.overflows_fp16 and config.get("use_badam") is not True:
        out.append("fp16")
    full = methods.full_weight_method(config) and not config.get("use_badam")
    if full and options.bf16 and base.precision != "pure_bf16":
        out.append("pure_bf16")
    return list(dict.fromkeys(out))


def optim_values(config: dict[str, Any], base: Knobs, platform: Platform) -> list[str]:
    """Optimizers for a full or freeze fine-tune (LoRA's states are tiny: the optimizer changes nothing there);
    only from an AdamW the user did not choose for a reason (GaLore, APOLLO, BAdam, Muon keep theirs)."""
    full = methods.full_weight_method(config)
    special = any(config.get(k) for k in ("use_galore", "use_apollo", "use_badam", "use_muon", "use_adam_mini"))
    if not full or special or base.optim not in (DEFAULT_OPTIM, "adamw_torch", "adamw_torch_fused"):
        return [base.optim]
    out = [base.optim, "adamw_torch_fused"] if base.optim == "adamw_torch" else [base.optim]
    if platform.bitsandbytes:
        out.append("adamw_bnb_8bit")
    if platform.torchao:
        out.append(SR_OPTIM)  # with pure bf16 only (refusal)
    out.append("adafactor")
    return list(dict.fromkeys(out))


# Kinds of refusal (cfgopt.plan.reasons re-exports them with the kinds the planner adds: memory, package).
REFUSED = "refused"  # LLaMA-Factory, DeepSpeed or the trainer refuse (or fail on) the combination
NUMERICS = "numerics"  # measured to train worse than the user's setting

# pure bf16 keeps the weights themselves in bf16 (8 significant bits): an AdamW update smaller than 1/512 of a weight
# rounds away. At fine-tuning learning rates most updates are that small: on the H200 a Qwen3-4B full SFT at lr 1e-5
# reached loss 7.70 after 20 steps in pure bf16 against 5.31 with bf16 autocast, same seed and samples
# (bench/verify/results.md, "Numerics of the plan's knobs"). Kept where the user chose it.
PURE_BF16_NUMERICS = (
    "it trains worse: weights in bf16 round away updates below 1/512 of a weight (Qwen3-4B full SFT, lr 1e-5: "
    "loss 7.70 vs 5.31 after 20 steps, bench/verify/results.md)"
)

# Adafactor (transformers' defaults under the Trainer: no first moment, factored second moments) follows another
# path: the same Qwen3-4B run's loss was up to 38% above AdamW's (step 10 of 20). 8-bit AdamW stayed within 0.3%.
ADAFACTOR_NUMERICS = (
    "it trains worse: Qwen3-4B full SFT's loss was up to 38% above AdamW's in 20 steps (bench/verify/results.md)"
)


# Gemma 2 soft-caps its attention logits, which only eager attention and FlashAttention-2 compute: SDPA in their
# place changes what the model computes (LLaMA-Factory warns "the SDPA attention does not support it",
# model/model_utils/attention.py L54-58 in 0.9.5). Kept where the user chose it.
SOFT_CAPPING_NUMERICS = (
    'Gemma 2 soft-caps its attention logits, which SDPA drops (LLaMA-Factory: "the SDPA attention does not support '
    'it"): what the model computes would change; it runs eager attention without flash-attn'
)


def refusal(knobs: Knobs, base: Knobs, soft_capped: bool = False) -> tuple[str, str, str] | None:
    """Why a candidate is not searched, as (kind, the knob refused, why), the fields of
    `cfgopt.plan.reasons.Rejection`; None: accepted. `pure_bf16` is refused with ZeRO-3 (hparams/parser.py) and,
    where the user did not choose it, for its numerics (PURE_BF16_NUMERICS), as Adafactor is (ADAFACTOR_NUMERICS)
    and SDPA for a model that soft-caps its attention (`soft_capped`: SOFT_CAPPING_NUMERICS); another optimizer
    only without DeepSpeed (offload needs DeepSpeed's CPU Adam, DS021, and ZeRO an optimizer it was tested with).
    The one rule of `cfgopt tune`'s search and of the speed plan (both through `combinations`)."""
    if knobs.precision == "pure_bf16" and knobs.zero.startswith("z3"):
        return REFUSED, "precision", "refused with ZeRO-3 (LLaMA-Factory)"
    if knobs.optim != base.optim and knobs.zero != "none":
        return REFUSED, "optim", "another optimizer only without DeepSpeed (ZeRO keeps one it was tested with)"
    if knobs.optim == SR_OPTIM and knobs.precision != "pure_bf16":
        return REFUSED, "optim", "stochastic rounding acts on bf16 weights: with pure_bf16 only"
    if knobs.precision == "pure_bf16" != base.precision and knobs.optim != SR_OPTIM:
        return NUMERICS, "precision", PURE_BF16_NUMERICS
    if knobs.optim == "adafactor" != base.optim:
        return NUMERICS, "optim", ADAFACTOR_NUMERICS
    if soft_capped and knobs.attn == "sdpa" != base.attn:
        return NUMERICS, "attn", SOFT_CAPPING_NUMERICS
    return None


def allowed(knobs: Knobs, base: Knobs, soft_capped: bool = False) -> bool:
    return refusal(knobs, base, soft_capped) is None


def zero_values(config: dict[str, Any], options: SpaceOptions, platform: Platform) -> list[str]:
    """One GPU: no DeepSpeed (ZeRO-3 measured 4.5x slower with no saving for LoRA). An 8-bit bitsandbytes base
    is refused with ZeRO-3 ("Only 4-bit quantized model can use fsdp+qlora", model/model_utils/quantization.py)."""
    if options.gpus <= 1 or not platform.deepspeed:
        return ["none"]
    if config.get("quantization_bit") == 8:
        return [z for z in ZERO_VALUES if not z.startswith("z3")]
    return list(ZERO_VALUES)


def knob_values(config: dict[str, Any], base: Knobs, platform: Platform, options: SpaceOptions) -> dict[str, list[Any]]:
    """The values each knob may take (the baseline's value always among them)."""
    product = base.micro * base.ga
    stage = methods.stage_of(config)
    values: dict[str, list[Any]] = {
        "micro": [(m, product // m) for m in divisors(product, options.max_micro)],
        "gc": [True, False],
        "attn": ["sdpa", "disabled"] + (["fa2"] if platform.flash_attn else []),
        "packing": [False, True] if options.allow_packing and methods.packing_applies(stage) else [],
        # the fused cross-entropy is Liger's memory and most of its measured speed; other stages keep the logits
        "liger": [False, True] if platform.liger and methods.liger_fuses_loss(stage) else [],
        "zero": zero_values(config, options, platform),
        "precision": precision_values(config, base, options),
        "optim": optim_values(config, base, platform),
    }
    if config.get("neat_packing") is True:
        values["packing"] = []  # neat_packing forces packing on
    base_values = {
        "micro": (base.micro, base.ga),
        "gc": base.gc,
        "attn": base.attn,
        "packing": base.packing,
        "liger": base.liger,
        "zero": base.zero,
        "precision": base.precision,
        "optim": base.optim,
    }
    for name in KNOB_NAMES:
        if name not in options.knobs:
            values[name] = [base_values[name]]
        elif base_values[name] not in values[name] and name not in ("zero",):
            values[name] = [base_values[name], *values[name]]
        if not values[name]:
            values[name] = [base_values[name]]
    return values


def build_space(
    config: dict[str, Any], ds: dict[str, Any] | None, platform: Platform, options: SpaceOptions
) -> tuple[Knobs, list[Knobs]]:
    """The baseline and every candidate (the baseline first; no duplicates)."""
    base = baseline_knobs(config, ds, options.soft_capped)
    values = knob_values(config, base, platform, options)
    return base, combinations(base, values, soft_capped=options.soft_capped)


def combinations(
    base: Knobs,
    values: dict[str, list[Any]],
    keep: Callable[[Knobs], bool] | None = None,
    refused: dict[Knobs, tuple[str, str, str]] | None = None,
    soft_capped: bool = False,
) -> list[Knobs]:
    """Every combination of the knobs' values that LLaMA-Factory accepts (`allowed`; `soft_capped`: the model
    soft-caps its attention) and `keep` keeps, the baseline first: the one search space of `cfgopt tune` and of the
    speed planner. `refused`, when given, collects the combinations not accepted, each with its `refusal`."""
    out: dict[Knobs, None] = {base: None}
    names = [n for n in KNOB_NAMES if n != "micro"]
    for micro, ga in values["micro"]:
        for rest in itertools.product(*(values[n] for n in names)):
            k = Knobs(micro, ga, *rest)
            why = refusal(k, base, soft_capped)
            if why is None and (keep is None or keep(k)):
                out.setdefault(k, None)
            elif why is not None and refused is not None:
                refused[k] = why
    return list(out)


def changed_keys(knobs: Knobs, base: Knobs) -> dict[str, Any]:
    """The YAML keys (other than `deepspeed`) to set for this candidate, only where it differs from the baseline."""
    out: dict[str, Any] = {}
    if knobs.micro != base.micro or knobs.ga != base.ga:
        out["per_device_train_batch_size"] = knobs.micro
        out["gradient_accumulation_steps"] = knobs.ga
    if knobs.gc != base.gc:
        out["disable_gradient_checkpointing"] = not knobs.gc
    if knobs.attn != base.attn:
        out["flash_attn"] = knobs.attn
    if knobs.packing != base.packing:
        out["packing"] = knobs.packing
    if knobs.liger != base.liger:
        out["enable_liger_kernel"] = knobs.liger
    if knobs.precision != base.precision:
        out.update(precision_keys(knobs.precision, base.precision))
    if knobs.optim != base.optim:
        out.update(SR_KEYS if knobs.optim == SR_OPTIM else {"optim": knobs.optim})
    return out


def precision_keys(new: str, old: str) -> dict[str, bool]:
    """The keys that switch LLaMA-Factory from precision `old` to `new`: the new mode on, the old one off."""
    out: dict[str, bool] = {new: True} if new != "fp32" else {}
    if old != "fp32" and old != new:
        out[old] = False
    return out


def deepspeed_for(knobs: Knobs, base: Knobs, user_ds: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """What the candidate does with `deepspeed`: ("keep", None) the user's file as it is; ("drop", None) no
    DeepSpeed; ("new", json) a JSON to write (a template, or the user's with its batch values made "auto"
    where the micro batch changed and the user had pinned them)."""
    if knobs.zero == "none":
        return ("keep", None) if base.zero == "none" else ("drop", None)
    if knobs.zero == base.zero and user_ds is not None:
        batch_changed = (knobs.micro, knobs.ga) != (base.micro, base.ga)
        pinned = [k for k in BATCH_KEYS if k in user_ds and user_ds[k] != "auto"]
        if not (batch_changed and pinned):
            return ("keep", None)
        return ("new", {**user_ds, **dict.fromkeys(pinned, "auto")})
    return ("new", deepspeed_template(knobs.zero))


def candidate_config(
    config: dict[str, Any], knobs: Knobs, base: Knobs, user_ds: dict[str, Any] | None, ds_path: str | None
) -> dict[str, Any]:
    """The user's config with this candidate's changes; `ds_path` names where a new DeepSpeed JSON was written."""
    out = dict(config)
    out.update(changed_keys(knobs, base))
    action, _ = deepspeed_for(knobs, base, user_ds)
    if action == "drop":
        out.pop("deepspeed", None)
    elif action == "new":
        out["deepspeed"] = ds_path
    return out


def with_micro(knobs: Knobs, micro: int) -> Knobs:
    return knobs._replace(micro=micro, ga=knobs.micro * knobs.ga // micro)
