"""What each fine-tuning method and training stage of LLaMA-Factory 0.9.5 allows and costs: the one place the
memory model (`cfgopt.memory.estimate`, `cfgopt.memory.stages`), the speed planner and tune's search space read their
per-method and per-stage rules from. Each rule names the LLaMA-Factory code it was read from.

Methods: `full`, `freeze`, `lora`, `qlora` (LoRA over a `quantization_bit` base), `dora` (LoRA with `use_dora`),
`oft`. Stages: `pt`, `sft`, `rm`, `dpo`, `kto`, `ppo`. Pure data: the lint path imports this.
"""

from __future__ import annotations

from collections.abc import Iterable

from cfgopt.knowledge.requirement_pins import DECLARED
from cfgopt.text.requirements.versions import exact_version, reaches, spec_admits, stays_below, version_key
from cfgopt.text.user_text import is_int, positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
# micro-batch; no gemma4): 0.9.5's data/collator.py L489-493, L527-528, added by commit 833f6027b (2026-03-20), after
# 0.9.4. In the 0.9.3 and 0.9.4 wheels `SFTDataCollatorWith4DAttentionMask.__call__` (data/collator.py L242-251,
# L252-261) only skips the 4-D mask under fa2, and neat-packed rows of any micro-batch go through the
# `_get_unpad_data` patch (model/model_utils/packing.py L110-116).
NEAT_FA2_CHECKED_FROM = (0, 9, 5)


def neat_fa2_checked_in(releases: Iterable[str]) -> tuple[str, ...]:
    """The LLaMA-Factory releases among `releases` whose collator makes the checks of `neat_fa2_fails`."""
    return tuple(v for v in releases if version_key(v)[:3] >= NEAT_FA2_CHECKED_FROM)


def neat_fa2_fails(model: Any, micro: Any) -> bool:
    """Does an SFT run with `neat_packing` and `flash_attn: fa2` stop at its first batch, in a release that checks
    (`neat_fa2_checked_in`)? With flash-attn installed, LLaMA-Factory 0.9.5's collator feeds neat-packed rows
    through the varlen path and asserts one row per micro-batch (`bsz should be 1 for neat packing`), and refuses
    gemma4 models (data/collator.py L527-528, L489-493; LF019). Both test the model's attention for
    `flash_attention_2`, which a gpt-oss model never has (`fa3_kernel_model`): never there."""
    if fa3_kernel_model(model):
        return False
    return (is_int(micro) and micro > 1) or neat_fa2_refused_model(model)


def neat_fa2_refused_model(model: Any) -> bool:
    """gemma4: the collator refuses neat packing with fa2 on it (data/collator.py L489-493). The same check names
    gpt_oss, but it tests `attn_implementation == "flash_attention_2"`, which gpt-oss never runs
    (`fa3_kernel_model`)."""
    name = str(model or "").lower().replace("_", "-")
    return "gemma-4" in name or "gemma4" in name


def fa3_kernel_model(model: Any) -> bool:
    """gpt-oss: LLaMA-Factory 0.9.4 and 0.9.5 give it the hub kernel `kernels-community/vllm-flash-attn3` whatever
    `flash_attn` says (model/model_utils/attention.py L34-44, `_attn_implementation` set to the kernel's name,
    which transformers 5.6 keeps: gpt-oss lists it among `_compatible_flash_implementations`), so the collator,
    which gets `model.config._attn_implementation` (train/sft/workflow.py L69), never sees `flash_attention_2`."""
    return "gpt-oss" in str(model or "").lower().replace("_", "-")


# LLaMA-Factory 0.9.4's `get_train_args` stops a run with `neat_packing` at start-up where transformers is 4.53.0 or
# newer: `ValueError: Neat packing is incompatible with transformers>=4.53.0.` (hparams/parser.py L359-360;
# `is_transformers_version_greater_than` is `>=`, extras/packages.py L110-111). 0.9.4 itself allows 4.51.0 to 4.57.1
# (its `check_dependencies` and pyproject.toml), so a fresh install takes 4.57.1. 0.9.3 (which allows transformers
# up to 4.52.4) and 0.9.5 have no such check (hparams/parser.py of their wheels).
NEAT_TRANSFORMERS_REFUSED_FROM = {"0.9.4": (4, 53)}


def neat_transformers_checked_in(releases: Iterable[str]) -> tuple[str, ...]:
    """The LLaMA-Factory releases among `releases` that refuse neat packing with a newer transformers."""
    return tuple(v for v in releases if ".".join(v.split(".")[:3]) in NEAT_TRANSFORMERS_REFUSED_FROM)


def neat_transformers_refused(releases: Iterable[str], spec: str) -> tuple[tuple[str, ...], bool | None] | None:
    """Do releases judged refuse neat packing with the transformers `spec` admits (a requirement specifier, "" where
    none is stated): (the releases that check, True where it is refused for certain, None where not known), or None
    where no release judged checks or the transformers stays below 4.53 (LF054, and the plan's packing)."""
    judged = tuple(releases)
    checked = neat_transformers_checked_in(judged)
    version = exact_version(spec)
    if len(judged) > 1 and version is not None:
        # of a range, pip installs no release whose own range refuses the environment's transformers (0.9.4 with
        # transformers 5.6.0: 0.9.5 is the one installed)
        checked = tuple(v for v in checked if spec_admits(DECLARED.get(v, {}).get("transformers", ""), version))
    verdicts = {transformers_refuses_neat(spec, v) for v in checked}
    if not checked or verdicts == {False}:
        return None
    return checked, True if verdicts == {True} else None


def transformers_refuses_neat(spec: str, release: str) -> bool | None:
    """Does LLaMA-Factory `release` refuse neat packing with the transformers a requirement specifier admits: True
    where every version it admits is 4.53.0 or newer, False where every one is older, None where it cannot be told
    (no version stated, or a range across 4.53)."""
    ceiling = NEAT_TRANSFORMERS_REFUSED_FROM.get(".".join(release.split(".")[:3]))
    if ceiling is None or stays_below(spec, ceiling):
        return False
    return True if reaches(spec, ceiling) else None
