"""Tune's speed priors and the one ranking of candidates, shared by `cfgopt tune` and the speed planner.

How much faster each knob setting is expected to run, measured on an H200 (the sources are in
`cfgopt/tune/search.py`'s docstring and docs/tune.md). Precision and optimizer (full / freeze fine-tuning):
  - precision: bf16 1.0; fp16 0.95 (the same tensor-core rate plus loss scaling; AMD measured MI300X GEMMs at
    708 TFLOP/s bf16 vs 654 fp16, docs/evidence/rocm_perf.md); pure_bf16 1.39 (measured: Qwen3-4B full SFT on
    one H200, 2 x 1 packed, GC off, Liger, no DeepSpeed: 16,408 tokens/s vs 11,788 with bf16 autocast over fp32
    master weights, bench/planner/README.md "Every fine-tuning method"); fp32 0.3 (matmuls outside the tensor
    cores' half rate; PF002, not measured here);
  - optimizer: transformers' default and the fused AdamW 1.0, the foreach AdamW 0.97 (not measured), bitsandbytes'
    8-bit AdamW 0.83 (measured: Qwen3-4B full SFT, 2 x 1 packed, Liger, GC on, against the default AdamW, same
    samples; bench/verify/results.md), Adafactor 0.66 (measured: 0.67x on Qwen3-4B, 0.65x on Llama-3-8B full SFT,
    same runs): what they buy is memory, and tune measures the rest. pure_bf16 and Adafactor are refused where the
    user did not choose them: they train worse (`cfgopt.plan.space.refusal`, kind numerics); their priors rank a
    user's own choice.
The micro-batch exponent of DPO (unpacked, chosen and rejected in one micro-batch, the reference forward in the
same step) is 0.69, measured: Qwen3-4B LoRA DPO on one H200, synthetic pairs, GC on, 4 x 2 vs 8 x 1: 1,606 vs
2,581 tokens/s (1.61x for twice the micro-batch; bench/planner/README.md, "Longer searches"). SFT's 0.2 there
made the plan 2 x 4 with GC off, which ran at 0.38x of 8 x 1. Fitted on that one search, not held out; rm keeps
SFT's exponent (not measured).
KTO (unpacked; per sample a policy forward with gradients, one without on the mismatched "KL" completion, and
the reference's two, of about the same length, all in the same step: LLaMA-Factory 0.9.5 `train/kto/trainer.py`)
has two priors of its own, from the held-out Llama-3.2-3B LoRA KTO on one H200 (bench/planner/README.md,
"Measured with the new verify"; `h200/2026-12-05-plans/kto/`), where SFT's made the plan 8 x 2 with GC off, 0.82
of tune's best:
  - micro-batch exponent 0.35: 16 x 1 against 8 x 2, both GC on, 1.29x with SDPA (2,888 vs 2,234 tokens/s) and
    1.27x with eager attention (3,188 vs 2,512), two pairs of runs that agree (exponents 0.37 and 0.34). The one
    smaller pair, 8 x 2 against 4 x 4 with GC off, gained more (1.74x, 1.53x against the baseline's first run:
    0.80 / 0.62): the exponent falls as the micro-batch grows, and 0.35 is its value where the plan chooses;
  - GC off 1.175 (`gc_off_by_stage`), derived, not fitted: checkpointing adds one forward of the trained model
    to a step, which is 0.37 of SFT's step without it (`gc_off` 1.37, below); KTO's step adds three forwards
    without gradients, which are not recomputed, so the same forward is 0.37 / (1 + 3 x 0.37) of it: 1.175. The
    run measured 1.17x (8 x 2 SDPA, 2,615 vs 2,234; 1.03x against the baseline's first run, 2,310): one
    comparison that agrees with the derivation, not its source. DPO's reference forward would give 1.27 by the
    same reasoning; DPO keeps 1.37 until a DPO run measures it (no DPO tune has run one shape both ways).
  With SFT's exponent the two changes are both needed: 2 ** 0.2 (1.15) < 1.175, and 2 ** 0.35 (1.27) < 1.37.
  - eager attention 1.10 of SDPA (`attn_by_stage`): eager beat SDPA in each of the four KTO runs that measured
    both at one shape, all GC on: the 3B row at 16 x 1 on an H200 (1.10x: 3,188 vs 2,888) and on an H100 (1.25x:
    2,676 vs 2,138), at 8 x 2 on the H200 (1.12x: 2,512 vs 2,234), and the held-out Qwen2.5-7B LoRA KTO at 8 x 1
    on the H100 (1.22x: 1,852 vs 1,512; bench/planner/README.md, "KTO's attention"); 1.10 is the smallest. The
    three runs since, of the plans with eager (measured first, the slower place in a pair), read 1.06-1.11x. Peaks
    were the same (22.6 and 25.2 GiB both ways; synthetic samples, shorter than the cutoff of 2048): above that
    cutoff (`attn_by_stage_up_to`) eager's L x L matrix is unmeasured and SFT's order holds. `fa2` was not
    measured against eager on KTO (no flash-attn on the GPUs lent): it is ranked level with eager, so a user's
    `fa2` is kept (`Rank`: fewer changes first among equals) and otherwise eager, the one measured, is planned.
Gradient checkpointing off (`gc_off` 1.37: V10 vs V7 of bench/h200/measurements.md, 8B LoRA SFT packed) was
measured 1.28-1.51x at six shapes of the same job (bench/tune/results/grid.md: 1 x 4, 2 x 2, 4 x 1, Liger on and
off) and 1.42x with HF + PEFT at 4 x 2048 (measurements.md); on full fine-tunes less: Qwen3-4B 1.28x / 1.25x
(Liger on / off, h200/long-tune/qwen3_full_sft.tune.json), Llama-3-8B with 8-bit AdamW 1.14x / 1.18x
(h200/longer-search) and 1.17x (h200/2026-12-05-plans/l8full): GC on ran 0.78-0.87x the plans' GC off. The same
reasoning (weight gradients and the optimizer step are more of a full fine-tune's step) says why. Full fine-tuning
keeps 1.37 for now: a lower figure changes measured plans whose alternative no run has measured (at 1.17 the
held-out Qwen2.5-7B full fine-tune, 8,225 tokens/s with GC off and 8-bit AdamW, would be planned with GC on and
AdamW: 1.17 x 0.83 < 1), so it waits for a tune that measures both.
Liger (1.196, 8B LoRA SFT packed, V7 vs V6) measured 1.02-1.04x on the Qwen3-4B and 0.99-1.02x on the Llama-3-8B
full fine-tunes at 2 x 1 (the same tunes and h200/2026-12-05-plans/q3full), and eager attention against SDPA on
DPO 1.15x / 0.98x / 1.01x (single runs, with a 6.4% run-to-run spread): both priors are kept until more runs say
otherwise (KTO's eager, measured faster four times of four, has its own prior above).
ZeRO-1 and ZeRO-3 with only the optimizer offloaded are not measured: ZeRO-1 moves what ZeRO-2 moves (the ZeRO
paper: both at data parallelism's communication volume), so it takes ZeRO-2's prior; optimizer offload costs
ZeRO-3 what it costs ZeRO-2 (0.5 / 0.95 on several GPUs: 0.42), and on one GPU it sits between ZeRO-3 (0.225,
measured) and ZeRO-3 with everything offloaded (0.206, measured). Tune measures them; the planner keeps the
user's stage or drops DeepSpeed, so it never ranks them.
The Liger prior was measured with its fused cross-entropy, which LLaMA-Factory applies to pt and sft only: the
space offers Liger for `cfgopt.knowledge.methods.LIGER_STAGES` alone, packing for `PACKING_STAGES`, precision and
optimizer for `FULL_WEIGHT_METHODS`.
Apart from the search so that the speed planner, which runs on the lint path, loads only this (no dataclasses,
no statistics, no temporary files)."""

from __future__ import annotations

from cfgopt.text.record import Record
from cfgopt.text.user_text import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.plan.space import Knobs

PRIORS: dict[str, Any] = {
    "micro_exponent_unpacked": 0.2,
    "micro_exponent_packed": 0.05,
    "micro_exponent_unpacked_by_stage": {"dpo": 0.69, "kto": 0.35},
    "gc_off": 1.37,
    "gc_off_by_stage": {"kto": 1.175},
    "packing": 2.9,
    "liger": 1.196,
    "attn": {"sdpa": 1.0, "fa2": 1.03, "disabled": 0.97},
    "attn_by_stage": {"kto": {"disabled": 1.10, "fa2": 1.10}},
    "attn_by_stage_up_to": {"kto": 2048},  # the cutoff_len the runs had: above it eager's L x L matrix is unmeasured
    "attn_other": 0.95,
    "zero_one_gpu": {
        "none": 1.0,
        "z1": 0.5,
        "z2": 0.5,
        "z2_offload": 0.3,
        "z3": 0.225,
        "z3_optim_offload": 0.215,
        "z3_offload": 0.206,
    },
    "zero_multi_gpu": {
        "none": 1.0,
        "z1": 0.95,
        "z2": 0.95,
        "z3": 0.8,
        "z2_offload": 0.5,
        "z3_optim_offload": 0.42,
        "z3_offload": 0.3,
    },
    "zero_other": 0.7,
    "precision": {"bf16": 1.0, "pure_bf16": 1.39, "fp16": 0.95, "fp32": 0.3},
    # adamw_torch_8bit_sr runs with pure_bf16 (1.39): 0.72 x 1.39 = 1.2 x the 0.83 of bf16 + bnb 8-bit, as measured
    "optim": {
        "default": 1.0,
        "adamw_torch_fused": 1.0,
        "adamw_torch": 0.97,
        "adamw_bnb_8bit": 0.83,
        "adafactor": 0.66,
        "adamw_torch_8bit_sr": 0.72,
    },
    "optim_other": 0.95,
}


DEFAULT_CUTOFF = 2048  # LLaMA-Factory 0.9.5's `cutoff_len` where a config sets none (hparams/data_args.py)


def prior_speed(k: Knobs, gpus: int = 1, stage: str = "sft", cutoff: object = None) -> float:
    """The speed prior of a candidate (relative, unitless) in a run of LLaMA-Factory's `stage` at `cutoff` (the
    config's `cutoff_len`; anything but a positive int: LLaMA-Factory's default); see the module docstring for the
    sources."""
    p = PRIORS
    cutoff = positive_int(cutoff) or DEFAULT_CUTOFF
    unpacked = p["micro_exponent_unpacked_by_stage"].get(stage, p["micro_exponent_unpacked"])
    score = float(k.micro) ** (p["micro_exponent_packed"] if k.packing else unpacked)
    if not k.gc:
        score *= p["gc_off_by_stage"].get(stage, p["gc_off"])
    if k.packing:
        score *= p["packing"]
    if k.liger:
        score *= p["liger"]
    measured = cutoff <= p["attn_by_stage_up_to"].get(stage, 0)
    score *= (measured and p["attn_by_stage"][stage].get(k.attn)) or p["attn"].get(k.attn, p["attn_other"])
    table = p["zero_one_gpu"] if gpus <= 1 else p["zero_multi_gpu"]
    score *= table.get(k.zero, p["zero_other"])
    score *= p["precision"].get(k.precision, 1.0)
    score *= p["optim"].get(k.optim, p["optim_other"])
    return score


class Rank(Record):
    """The order of candidates, the planner's and tune's alike: the fastest expected first, then the smaller
    estimated peak, then fewer changes from the user's config, then the order they were made in. Sorting by it
    is what makes `cfgopt fix --unsafe-fixes` write tune's top prediction."""

    slower: float  # minus the expected speed
    peak_gib: float  # the estimated peak per GPU (inf: no estimate)
    changes: int
    index: int


def rank(speed: float, peak_gib: float | None, changes: int, index: int) -> Rank:
    return Rank(-speed, peak_gib if peak_gib is not None else float("inf"), changes, index)
