"""What the requirement rules (ENV001-ENV003) share: the build a pin or an index installs, exact versions, and
the dependency ranges each LLaMA-Factory release checks or declares."""

from __future__ import annotations

# the facts live on lower floors (the planner reads them too); the rules import them from here
from cfgopt.knowledge.requirement_pins import CHECKED, DECLARED, admitted, flash_attn_not_for_rocm
from cfgopt.rules.base import Context
from cfgopt.text.requirements.versions import exact_version, platform_of_build
from cfgopt.text.source import Entry

__all__ = [
    "CHECKED",
    "DECLARED",
    "FLASH_ATTN_ROCM_SOURCES",
    "ROCM_SOURCES",
    "TORCH_FAMILY",
    "admitted",
    "exact_version",
    "flash_attn_not_for_rocm",
    "pins_of",
    "platform_of_build",
]

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
ROCM_SOURCES = (
    "ROCm builds come from PyTorch's ROCm index (https://download.pytorch.org/whl/rocm6.2, `torch==2.5.1+rocm6.2`) "
    "or AMD's ROCm PyTorch images (rocm/pytorch)"
)
FLASH_ATTN_ROCM_SOURCES = (
    "AMD's builds come from the ROCm PyTorch images, a source build with ROCm torch installed "
    "(`pip install flash-attn --no-build-isolation`, GPU_ARCHS=gfx942 for MI300X, gfx90a for MI250X/MI210; CK "
    "backend), or the Triton backend (FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE)"
)


def pins_of(ctx: Context, names: tuple[str, ...] | frozenset[str]) -> list[Entry]:
    root = ctx.source.root
    return [e for e in (root.entries or ()) if e.key in names] if root is not None else []
