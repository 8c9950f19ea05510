"""The parameters a token passes through, which the MFU's FLOP count reads (`comparison.FLOP_CONVENTION`).

A dense model's token passes through every parameter. A mixture of experts' token passes through its router's top-k
routed experts of each sparse layer, not all E (`ModelShape.active_parameters`): counting every expert overstated
Mixtral-8x7B's MFU 3.6x (46.7B parameters, 12.9B a token) and DeepSeek-V3's 18x, past 100% at a real MFU of 6%
(`comparison.impossible` then refused the run, and `tune` counted it as failed). Where the model declares experts of
a family whose layout `model_experts` does not count, no MFU is given, and the summary says why.

Import-light (cfgopt.knowledge only): the worker counts here with the model's own config, and `verify`'s command
with the job's shape where the worker could not count.
"""

from __future__ import annotations

from pathlib import Path

from cfgopt.knowledge import model_experts
from cfgopt.knowledge.model_family import LocalModel
from cfgopt.knowledge.model_shapes import ModelShape, language_config, shape_for, uncountable
from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def token_parameters(config: dict[str, Any], args: dict[str, Any], parameters: int, trainable: int | None) -> dict:
    """What the FLOP count reads of a model whose config (a config.json as a dict) is `config`, trained as the
    LLaMA-Factory arguments `args` say, of `parameters` (`trainable` of them trained): for a mixture of experts
    {"active_parameters", "trainable_active_parameters"}, or {"mfu_unknown": why}; {} for a dense model."""
    if not model_experts.declares_experts(language_config(config)):
        return {}
    local = LocalModel(Path("model"), config)
    shape = shape_for("model", local)
    if shape is None:
        why = uncountable(local)
        return {"mfu_unknown": f"a mixture of experts whose active parameters cfgopt cannot count: {why}"}
    return shape_token_parameters(shape, args, parameters, trainable)  # no sparse layer (`mlp_only_layers`): {}


def shape_token_parameters(shape: ModelShape, args: dict[str, Any], parameters: int, trainable: int | None) -> dict:
    """`token_parameters` from the model's shape (the job's, where the worker could not count)."""
    if not shape.is_moe:
        return {}
    skipped = shape.num_parameters - shape.active_parameters  # the routed experts a token's router passes over
    trained = _trained_skipped(shape, args, skipped)
    if isinstance(trained, str):
        return {"mfu_unknown": trained}
    return {
        "active_parameters": max(0, parameters - skipped),
        # an expert's weight gradient is computed for the tokens routed to it only
        "trainable_active_parameters": None if trainable is None else max(0, trainable - trained),
    }


def _trained_skipped(shape: ModelShape, args: dict[str, Any], skipped: int) -> int | str:
    """Of the routed experts a token skips, those that train: every one in a full fine-tune; none under LoRA or OFT
    (transformers 5 holds the experts as 3-D parameters, which adapters of linears do not reach, as the memory
    model counts); in freeze tuning those of the trained layers (llamafactory 0.9.5 model/adapter.py
    `_setup_freeze_tuning`). A str (why) where it cannot be told."""
    ftype = str(args.get("finetuning_type") or "lora")
    if ftype == "full":
        return skipped
    if ftype != "freeze":
        return 0
    per_layer = skipped // shape.sparse_layers
    if args.get("use_llama_pro"):
        return (
            "freeze tuning with use_llama_pro of a mixture of experts: which trained layers hold experts is not counted"
        )
    if not _experts_train(shape, args.get("freeze_trainable_modules")):
        return 0
    n = args.get("freeze_trainable_layers", 2)
    n = n if is_int(n) else 2
    layers = shape.num_hidden_layers
    trained = range(max(0, layers - n), layers) if n > 0 else range(min(-n, layers))
    if not model_experts.sparse_layers_last(shape.model_type):
        return (
            f"freeze tuning of a mixture of experts ({shape.model_type}) whose sparse layers interleave with dense "
            "ones: which trained layers hold experts is not counted"
        )
    first_sparse = layers - shape.sparse_layers
    return per_layer * sum(1 for i in trained if i >= first_sparse)


def _experts_train(shape: ModelShape, modules: Any) -> bool:
    """Does `freeze_trainable_modules` (default `all`) reach a trained layer's experts: `all`, or the name of the
    block that holds them (`model_experts.moe_block`)?"""
    if modules is None:
        return True
    names = [m.strip() for m in (modules if isinstance(modules, list) else str(modules).split(","))]
    return any(name in ("all", model_experts.moe_block(shape.model_type)) for name in names)
