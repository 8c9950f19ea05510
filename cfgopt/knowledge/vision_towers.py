"""The vision tower of a multimodal model, counted from its config.json's `vision_config` where cfgopt knows the
family's layout (transformers 5.6): Qwen2-VL and Qwen2.5-VL. `model_shapes` adds it to the model's count; another
family's `vision_config` is left out of the count, and the estimate says so (`ModelShape.uncounted`).

LLaMA-Factory freezes the tower and the projector by default (`freeze_vision_tower`, `freeze_multi_modal_projector`,
hparams/finetuning_args.py; model/model_utils/visual.py names `visual.patch_embed`, `visual.blocks` and
`visual.merger`), so the two are counted apart. Pure facts: nothing is read here.
"""

from __future__ import annotations

from cfgopt.text.record import Record
from cfgopt.text.user_text import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MOST = 2**20  # a vision dimension beyond this is no model: the products below stay small integers


class VisionTower(Record):
    tower: int  # patch embedding and blocks (LLaMA-Factory's vision_model_keys)
    projector: int  # the merger into the language model (projector_keys)


def vision_tower(data: dict[str, Any], model_type: str) -> VisionTower | None:
    """The vision tower of a Qwen2-VL / Qwen2.5-VL config.json (its `vision_config`), or None where the family is
    another or a dimension is not a usable integer."""
    vision = data.get("vision_config")
    if not isinstance(vision, dict) or model_type not in ("qwen2_vl", "qwen2_5_vl"):
        return None
    keys = ("depth", "num_heads", "patch_size", "spatial_merge_size")
    width_key = "embed_dim" if model_type == "qwen2_vl" else "hidden_size"
    out_key = "hidden_size" if model_type == "qwen2_vl" else "out_hidden_size"
    values = [vision.get(k) for k in (*keys, width_key, out_key)]
    channels = vision.get("in_channels", vision.get("in_chans", 3))
    temporal = vision.get("temporal_patch_size", 2)
    if not all(positive_int(v, _MOST) for v in (*values, channels, temporal)):
        return None
    depth, _, patch, merge, e, out = values
    patch_embed = e * channels * temporal * patch * patch  # Conv3d without bias
    attention = 3 * e * e + 3 * e + e * e + e  # qkv and proj, with biases
    if model_type == "qwen2_vl":  # LayerNorm (weight and bias) x 2, fc1/fc2 of mlp_ratio x e with biases
        ratio = vision.get("mlp_ratio", 4)
        if not positive_int(ratio, 64):
            return None
        inner = e * ratio
        block, merger_norm = 4 * e + attention + 2 * e * inner + inner + e, 2 * e
    else:  # Qwen2.5-VL: RMSNorm x 2, SwiGLU of intermediate_size with biases
        inner = vision.get("intermediate_size")
        if not positive_int(inner, _MOST):
            return None
        block, merger_norm = 2 * e + attention + 3 * e * inner + 2 * inner + e, e
    merged = e * merge * merge
    merger = merger_norm + merged * merged + merged + merged * out + out
    return VisionTower(patch_embed + depth * block, merger)
