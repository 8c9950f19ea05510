"""Tune's speed priors: how much faster each knob setting is expected to run, measured on an H200 (the sources
are in `cfgopt/tune/search.py`'s docstring and docs/tune.md). Apart from the search so that the speed planner,
which runs on the lint path, loads only this (no dataclasses, no statistics, no temporary files)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cfgopt.tune.space import Knobs

PRIORS: dict[str, Any] = {
    "micro_exponent_unpacked": 0.2,
    "micro_exponent_packed": 0.05,
    "gc_off": 1.37,
    "packing": 2.9,
    "liger": 1.196,
    "attn": {"sdpa": 1.0, "fa2": 1.03, "disabled": 0.97},
    "attn_other": 0.95,
    "zero_one_gpu": {"none": 1.0, "z2": 0.5, "z2_offload": 0.3, "z3": 0.225, "z3_offload": 0.206},
    "zero_multi_gpu": {"none": 1.0, "z2": 0.95, "z3": 0.8, "z2_offload": 0.5, "z3_offload": 0.3},
    "zero_other": 0.7,
}


def prior_speed(k: Knobs, gpus: int = 1) -> float:
    """The speed prior of a candidate (relative, unitless); see the module docstring for the sources."""
    p = PRIORS
    score = float(k.micro) ** (p["micro_exponent_packed"] if k.packing else p["micro_exponent_unpacked"])
    if not k.gc:
        score *= p["gc_off"]
    if k.packing:
        score *= p["packing"]
    if k.liger:
        score *= p["liger"]
    score *= p["attn"].get(k.attn, p["attn_other"])
    table = p["zero_one_gpu"] if gpus <= 1 else p["zero_multi_gpu"]
    score *= table.get(k.zero, p["zero_other"])
    return score
