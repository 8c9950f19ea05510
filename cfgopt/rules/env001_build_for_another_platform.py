from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.requirements import (
    FLASH_ATTN_ROCM_SOURCES,
    ROCM_SOURCES,
    TORCH_FAMILY,
    flash_attn_not_for_rocm,
    pins_of,
    platform_of_build,
)
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind, Node

_NAMES = {"cuda": "CUDA", "rocm": "ROCm"}


class BuildForAnotherPlatform(Rule):
    code = "ENV001"
    name = "build-for-another-platform"
    severity = Severity.WARNING
    kinds = frozenset({Kind.REQUIREMENTS})
    triggers = frozenset({*TORCH_FAMILY, "flash_attn"})
    summary = "A requirement file installs a CUDA build of torch or flash-attn on a ROCm target (or ROCm on NVIDIA)"
    why = (
        "Confidence: likely. torch's local version says which GPU runtime a wheel was built for (`+cu121`, "
        "`+rocm6.2`), and PyTorch's wheel indexes serve one runtime each (`/whl/cu121`, `/whl/rocm6.2`). A CUDA "
        "build on an AMD node has no HIP backend: `torch.cuda.is_available()` is False and the run falls to the "
        "CPU or stops; a ROCm build on an NVIDIA node likewise. flash-attn on PyPI is a source distribution "
        "whose build follows the torch present at build time and, for CUDA torch, downloads a prebuilt CUDA "
        "wheel: a plain `flash-attn` line gives a ROCm job no control over the ROCm build (the CK backend for the "
        "GPU's architecture, or the Triton backend), and transformers selects whatever is installed (PF003). "
        "Judged for the target: a `+rocm` pin says nothing on ROCm; quiet with no target. A pin without a local "
        "version (`torch==2.5.1`) is satisfied by an installed ROCm build and is not reported."
    )
    fails_when = "At the first GPU call (no device) or at model load (a flash-attn built for another runtime)."
    evidence = (
        "https://pytorch.org/get-started/locally/ (one wheel index per runtime: /whl/cu121, /whl/rocm6.2)",
        "flash-attention setup.py (v2.8.3): `get_wheel_url` builds the wheel name from `torch.version.cuda` or the "
        "HIP version, `IS_ROCM` from the torch it is built with, `GPU_ARCHS` for the CK build",
        "https://github.com/Dao-AILab/flash-attention/issues/1538 (Triton backend needs the variable at run time)",
    )
    example = "torch==2.5.1+cu121   # --target mi300x  ->  torch==2.5.1+rocm6.2 from /whl/rocm6.2"
    fix_safety = "No fix: the matching build's version and index depend on the ROCm or CUDA release installed."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not (target.is_rocm or target.is_cuda):
            return
        wrong = "cuda" if target.is_rocm else "rocm"
        torch_pins = pins_of(ctx, TORCH_FAMILY)
        for entry in torch_pins:
            if platform_of_build(str(entry.node.value)) == wrong:
                yield self.at_entry(ctx, entry, self._message(ctx, f"`{entry.key}{entry.node.value}`"), on="value")
        for url, start, end in ctx.source.command.get("indexes", ()):
            if platform_of_build(url) == wrong and torch_pins:
                message = self._message(ctx, f"the index {url}", serves=True)
                yield self.at_node(ctx, Node(url, start, end), message, key="index")
        if target.is_rocm:
            yield from self._flash_attn(ctx)

    def _message(self, ctx: Context, what: str, *, serves: bool = False) -> str:
        target = ctx.settings.target
        wrong = "CUDA" if target.is_rocm else "ROCm"
        what = f"{what} serves {wrong} builds of torch" if serves else f"{what} is a {wrong} build"
        if target.is_rocm:
            return f"{what}: on {target.name} (ROCm) torch finds no GPU; {ROCM_SOURCES}"
        return (
            f"{what}: on {target.name} (CUDA) torch finds no GPU; CUDA builds come from PyPI or "
            "https://download.pytorch.org/whl/cu124"
        )

    def _flash_attn(self, ctx: Context) -> Iterator[Diagnostic]:
        for entry in pins_of(ctx, ("flash_attn",)):
            spec = str(entry.node.value)
            if not flash_attn_not_for_rocm(spec):
                continue  # a ROCm wheel, or a wheel / checkout whose build cfgopt cannot tell
            build = platform_of_build(spec)
            what = "a CUDA wheel" if build == "cuda" else "from the default index (a source build that follows"
            what += "" if build == "cuda" else " the torch at build time, CUDA wheels downloaded for CUDA torch)"
            yield self.at_entry(
                ctx,
                entry,
                f"flash-attn {what}: on {ctx.settings.target.name} it needs AMD's build; {FLASH_ATTN_ROCM_SOURCES}",
                on="value",
            )
