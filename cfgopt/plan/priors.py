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
made the plan 2 x 4 with GC off, which ran at 0.38x of 8 x 1. Fitted on that one search, not held out; rm and
kto keep SFT's exponent (not measured).
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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.plan.space import Knobs

PRIORS: dict[str, Any] = {
    "micro_exponent_unpacked": 0.2,
    "micro_exponent_packed": 0.05,
    "micro_exponent_unpacked_by_stage": {"dpo": 0.69},
    "gc_off": 1.37,
    "packing": 2.9,
    "liger": 1.196,
    "attn": {"sdpa": 1.0, "fa2": 1.03, "disabled": 0.97},
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


def prior_speed(k: Knobs, gpus: int = 1, stage: str = "sft") -> float:
    """The speed prior of a candidate (relative, unitless) in a run of LLaMA-Factory's `stage`; see the module
    docstring for the sources."""
    p = PRIORS
    unpacked = p["micro_exponent_unpacked_by_stage"].get(stage, p["micro_exponent_unpacked"])
    score = float(k.micro) ** (p["micro_exponent_packed"] if k.packing else unpacked)
    if not k.gc:
        score *= p["gc_off"]
    if k.packing:
        score *= p["packing"]
    if k.liger:
        score *= p["liger"]
    score *= p["attn"].get(k.attn, p["attn_other"])
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
