"""Whether LLaMA-Factory packs sequences: read by the job model and the memory model, so it lives below both."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def packing_on(values: dict[str, Any]) -> bool:
    """LLaMA-Factory packs when `packing` or `neat_packing` is on, and by default (`packing: null`) for
    `stage: pt` (0.9.5 hparams/parser.py L527). `values`: the values it sees (`lf_values`)."""
    neat = bool(values.get("neat_packing"))
    packing = values.get("packing")
    if packing is None:
        return values.get("stage") == "pt" or neat
    return bool(packing) or neat
