from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind


class GdsNeedsCuda(Rule):
    code = "DS009"
    name = "gds-needs-cuda"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"aio"})
    summary = "GPUDirect Storage (`aio.use_gds`) on a target that is not NVIDIA CUDA"
    why = (
        "DeepSpeed's GDS op exists only for the CUDA accelerator; on ROCm (and CPU) the config is refused. With "
        "no `--target` stated the rule still reports it (the run fails everywhere but on NVIDIA GPUs) and says "
        "so; `--target h100` / `h200` / `a100` silences it."
    )
    fails_when = "At DeepSpeedConfig construction: `GDS currently only supported for CUDA accelerator`."
    evidence = ("deepspeed 0.19.8 runtime/swap_tensor/aio_config.py (use_gds assertion), op_builder/gds.py",)
    example = '"aio": {"use_gds": true}   ->  false on MI300X'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = ctx.source.find(("aio", "use_gds"))
        # `aio` is read as a plain dict (no pydantic): any truthy value, even the string "false", turns GDS on
        target = ctx.settings.target
        if entry is None or not entry.node.value or target.is_cuda:
            return
        where = f"on {target.device}" if target.stated else "on any accelerator but CUDA (no --target stated)"
        yield self.at_entry(
            ctx,
            entry,
            f"GPUDirect Storage needs CUDA; {where} DeepSpeed "
            "stops with `GDS currently only supported for CUDA accelerator`",
            on="value",
        )
