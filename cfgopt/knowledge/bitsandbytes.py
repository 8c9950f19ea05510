"""What uses bitsandbytes in a LLaMA-Factory run, and which bitsandbytes releases run on ROCm.

Shared by PF012 (the config on a ROCm target) and the requirement-file rules (a bitsandbytes pin on a ROCm
target when the job uses it).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# transformers 5.6.0 trainer_optimizer.py:560-576 `_BITSANDBYTES_OPTIMIZERS` (the names dispatched to
# `_get_bitsandbytes_optimizer`), plus GaLore's 8-bit AdamW, whose galore_torch class subclasses bitsandbytes'
# Optimizer2State. `adamw_torch_8bit` / `adamw_torch_4bit` are torchao's, not bitsandbytes'.
BNB_OPTIMIZERS: frozenset[str] = frozenset(
    {
        "adamw_bnb_8bit",
        "adamw_8bit",
        "paged_adamw_32bit",
        "paged_adamw_8bit",
        "ademamix",
        "ademamix_8bit",
        "paged_ademamix_32bit",
        "paged_ademamix_8bit",
        "lion_32bit",
        "lion_8bit",
        "paged_lion_32bit",
        "paged_lion_8bit",
        "rmsprop_bnb",
        "rmsprop_bnb_8bit",
        "rmsprop_bnb_32bit",
        "galore_adamw_8bit",
        "galore_adamw_8bit_layerwise",
    }
)

# The first release whose PyPI package carries the ROCm backend (bitsandbytes PR #1683, merged June 2025, released
# in 0.47.0); 0.47-0.49 call it experimental, from 0.50 the installation guide lists AMD GPUs as officially supported.
ROCM_FIRST = (0, 47)
ROCM_OFFICIAL = (0, 50)
ROCM_EVIDENCE = (
    "https://github.com/bitsandbytes-foundation/bitsandbytes/pull/1683 (ROCm backend on main, first released in "
    "0.47.0); https://huggingface.co/docs/bitsandbytes/v0.48.1/installation ('experimental support ... AMD ROCm'); "
    "https://huggingface.co/docs/bitsandbytes/v0.50.0/installation ('official support for ... AMD GPUs')"
)


def is_bnb_optimizer(value: Any) -> bool:
    return isinstance(value, str) and value in BNB_OPTIMIZERS


def uses_bitsandbytes(values: dict[str, Any]) -> str:
    """What in a LLaMA-Factory config needs bitsandbytes ("" if nothing): bnb quantization or its optimizers."""
    method = values.get("quantization_method", "bnb")
    if values.get("quantization_bit") is not None and method in (None, "bnb"):
        return f"quantization_bit: {values['quantization_bit']}"
    if is_bnb_optimizer(values.get("optim")):
        return f"optim: {values['optim']}"
    return ""
