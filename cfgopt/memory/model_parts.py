"""What the estimate says of a model beyond a dense decoder: a mixture of experts (every expert counted in the
weights and states; the activations of its top-k experts from transformers 5.6's code, not measured: confidence
"low", so the rules stay silent) and a multimodal model's towers (counted where `vision_towers` knows the family,
else named as left out). docs/memory.md, "Mixture of experts and multimodal towers".
"""

from __future__ import annotations

from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.memory.base import GIB, quantized_bytes_per_param
from cfgopt.memory.method import frozen_towers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def model_caveats(
    config: dict[str, Any], shape: ModelShape, ftype: str, bits: int | None, notes: list[str]
) -> list[str]:
    """Notes on the model's parts into `notes`; returns what the estimate counts only from the code (its
    "approximate" list: confidence "low")."""
    _tower_notes(config, shape, ftype, notes)
    if not shape.is_moe:
        return []
    E, k, L = shape.num_experts, shape.experts_per_token, shape.num_hidden_layers
    notes.append(
        f"mixture of experts: {shape.sparse_layers} of {L} layers hold {E} experts, {k} per token; all "
        f"{shape.num_parameters / 1e9:.1f}B parameters counted in the weights and states"
    )
    if ftype in ("lora", "oft"):
        notes.append(
            "experts: transformers 5 holds them as 3-D parameters, which LoRA does not adapt (counted so); "
            "transformers 4 builds each expert of linears, which `lora_target: all` adapts too (more trainable)"
        )
    if bits:
        experts = shape.sparse_layers * shape.expert_parameters
        saved = experts * (2.0 - quantized_bytes_per_param(bits)) / GIB
        notes.append(
            f"experts: quantization replaces linears only, so under transformers 5 the experts stay 16-bit "
            f"(counted so); transformers 4 builds them of linears and quantizes them too (the model's weights "
            f"about {saved:.0f} GiB smaller)"
        )
    return [
        f"mixture-of-experts activations ({k} of {E} experts per token: counted as one MLP of their width, "
        "with the router; read from transformers 5.6, no MoE run measured)"
    ]


def _tower_notes(config: dict[str, Any], shape: ModelShape, ftype: str, notes: list[str]) -> None:
    if shape.vision_tower:
        towers = shape.vision_tower + shape.vision_projector
        frozen = frozen_towers(config, shape) if ftype == "full" else towers
        trains = "frozen" if frozen == towers else "trained" if not frozen else "partly trained"
        notes.append(
            f"vision tower: {towers / 1e9:.2f}B parameters counted ({trains}); its activations over image "
            "patches are not"
        )
    for part in shape.uncounted:
        notes.append(f"{part} (config.json) is not counted: weights and activations of the language model only")
