"""What each fine-tuning method and training stage of LLaMA-Factory 0.9.5 allows and costs: the one place the
memory model (`cfgopt.memory.estimate`, `cfgopt.memory.stages`), the speed planner and tune's search space read their
per-method and per-stage rules from. Each rule names the LLaMA-Factory code it was read from.

Methods: `full`, `freeze`, `lora`, `qlora` (LoRA over a `quantization_bit` base), `dora` (LoRA with `use_dora`),
`oft`. Stages: `pt`, `sft`, `rm`, `dpo`, `kto`, `ppo`. Pure data: the lint path imports this.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cfgopt.text.requirements.versions import version_key
from cfgopt.text.user_text import is_int, positive_int

STAGES = ("pt", "sft", "rm", "dpo", "kto", "ppo")

# Stages whose data processor packs sequences: `pt` groups texts (data/processor/pretrain.py) and `sft` packs with
# `packing` / `neat_packing` (data/loader.py picks PackedSupervisedDatasetProcessor for sft only); the pairwise,
# feedback and unsupervised processors of rm/dpo/kto/ppo ignore `packing` and pad each batch.
PACKING_STAGES = frozenset({"pt", "sft"})

# Stages where `enable_liger_kernel` brings Liger's fused linear cross-entropy (no logits tensor): model/loader.py
# calls `apply_liger_kernel(..., require_logits=stage not in ["pt", "sft"])`, and with require_logits Liger is
# applied with `fused_linear_cross_entropy=False` (its RMSNorm, SwiGLU and RoPE kernels still apply): rm, dpo, kto
# and ppo compute their losses from the logits (or values) themselves.
LIGER_STAGES = frozenset({"pt", "sft"})

# Stages whose collator puts two sequences of each sample through the graph (chosen + rejected concatenated:
# data/collator.py PairwiseDataCollatorWithPadding, train/dpo/trainer.py concatenated_forward). KTO puts one
# sequence per sample through the graph and its KL sequence through a no-grad forward (train/kto/trainer.py).
PAIRED_STAGES = frozenset({"rm", "dpo"})

# Stages that load ranking data (`"ranking": true` in dataset_info.json): data/loader.py `_get_merged_dataset`
# refuses a non-ranking dataset for stage "rm" and a ranking one for every other, and DPO loads its data as "rm"
# (train/dpo/workflow.py L45; KTO as "kto", PPO as "ppo").
RANKING_STAGES = frozenset({"rm", "dpo"})

# DPO losses that need no reference model (hparams/finetuning_args.py: use_ref_model = stage == "dpo" and
# pref_loss not in ["orpo", "simpo"]). KTO and PPO always build one (train/kto/workflow.py, train/ppo/workflow.py).
REFERENCE_FREE_LOSSES = frozenset({"orpo", "simpo"})

# Methods whose states are the model's size, so that the precision mode (`pure_bf16`) and the optimizer (8-bit
# AdamW, Adafactor) change the memory a lot; a LoRA/QLoRA/DoRA adapter's states are a few hundred MiB at most, so
# those knobs change its numerics for no memory (the planner leaves them alone there).
FULL_WEIGHT_METHODS = frozenset({"full", "freeze"})


def stage_of(config: dict[str, Any]) -> str:
    return str(config.get("stage") or "sft")


def method_of(config: dict[str, Any]) -> str:
    """The method in words: full, freeze, lora, qlora (LoRA over a quantized base), dora, oft."""
    ftype = str(config.get("finetuning_type") or "lora")
    if ftype != "lora":
        return ftype
    if config.get("use_dora") is True:
        return "dora"
    return "qlora" if config.get("quantization_bit") not in (None, False) else "lora"


def packing_applies(stage: str) -> bool:
    return stage in PACKING_STAGES


def liger_fuses_loss(stage: str) -> bool:
    return stage in LIGER_STAGES


def full_weight_method(config: dict[str, Any]) -> bool:
    return str(config.get("finetuning_type")) in FULL_WEIGHT_METHODS


def uses_reference(stage: str, pref_loss: Any) -> bool:
    """Does the stage run a reference model (a copy, or the adapter-disabled base)?"""
    if stage == "dpo":
        return str(pref_loss) not in REFERENCE_FREE_LOSSES
    return stage in ("kto", "ppo")


def reference_kind(config: dict[str, Any]) -> str | None:
    """How the reference model exists (train/trainer_utils.py create_ref_model): "explicit" (`ref_model` names a
    second model, loaded), "adapter" (LoRA without `ref_model`: the base with the adapter disabled, no copy),
    "copy" (full/freeze/OFT without `ref_model`: the model loaded a second time, frozen); None: no reference."""
    stage = stage_of(config)
    if not uses_reference(stage, config.get("pref_loss")):
        return None
    if config.get("ref_model"):
        return "explicit"
    return "adapter" if str(config.get("finetuning_type")) == "lora" else "copy"


def ppo_sequence(config: dict[str, Any], cutoff: int) -> int:
    """PPO trains on the prompt (truncated to cutoff_len) and its response (up to `max_new_tokens`, 1024 by
    default: hparams/generating_args.py): tokens per sequence."""
    new = config.get("max_new_tokens")
    new = positive_int(new, 2**31 - 1) or 1024
    return cutoff + new


# The first LLaMA-Factory release whose SFT collator checks neat packing under FlashAttention-2 (one row per
# micro-batch; no gemma4 / gpt-oss): 0.9.5's data/collator.py L489-493, L527-528, added by commit 833f6027b
# (2026-03-20), after 0.9.4. In the 0.9.3 and 0.9.4 wheels `SFTDataCollatorWith4DAttentionMask.__call__`
# (data/collator.py L242-251, L252-261) only skips the 4-D mask under fa2, and neat-packed rows of any micro-batch
# go through the `_get_unpad_data` patch (model/model_utils/packing.py L110-116).
NEAT_FA2_CHECKED_FROM = (0, 9, 5)


def neat_fa2_checked_in(releases: Iterable[str]) -> tuple[str, ...]:
    """The LLaMA-Factory releases among `releases` whose collator makes the checks of `neat_fa2_fails`."""
    return tuple(v for v in releases if version_key(v)[:3] >= NEAT_FA2_CHECKED_FROM)


def neat_fa2_fails(model: Any, micro: Any) -> bool:
    """Does an SFT run with `neat_packing` and `flash_attn: fa2` stop at its first batch, in a release that checks
    (`neat_fa2_checked_in`)? With flash-attn installed, LLaMA-Factory 0.9.5's collator feeds neat-packed rows
    through the varlen path and asserts one row per micro-batch (`bsz should be 1 for neat packing`), and refuses
    gemma4 and gpt-oss models (data/collator.py L527-528, L489-493; LF019)."""
    return (is_int(micro) and micro > 1) or neat_fa2_refused_model(model)


def neat_fa2_refused_model(model: Any) -> bool:
    """gemma4 and gpt-oss: the collator refuses neat packing with fa2 on them (data/collator.py L489-493)."""
    name = str(model or "").lower().replace("_", "-")
    return "gemma-4" in name or "gemma4" in name or "gpt-oss" in name
