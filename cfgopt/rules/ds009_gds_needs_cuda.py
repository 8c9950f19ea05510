from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import offload_device, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind, Source

_ASSERT = "`GDS currently only supported for CUDA accelerator`"
_JIT = "`Unable to JIT load the gds op due to it not being compatible`"


def _gds_loaded_by(source: Source) -> str:
    """What makes DeepSpeed load the gds op: NVMe parameter offload at ZeRO-3, or the fast checkpoint writer."""
    if zero_stage(source) == 3 and offload_device(source, "offload_param") == "nvme":
        return "NVMe parameter offload"
    writer = source.find(("checkpoint", "writer"))
    if writer is not None and writer.node.is_mapping:
        kind = writer.node.get("type")
        value = kind.node.value if kind is not None else "fast"  # DeepSpeed's default writer type is FAST
        if isinstance(value, str) and value.upper() == "FAST":
            return "the fast checkpoint writer"
    return ""


class GdsNeedsCuda(Rule):
    code = "DS009"
    name = "gds-needs-cuda"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"aio"})
    summary = "GPUDirect Storage (`aio.use_gds`) off CUDA: refused on CPU, the gds op fails to load on ROCm when used"
    why = (
        "Two checks stand in the way, and which one fails depends on the platform. At config construction "
        "DeepSpeed asserts that the accelerator is named `cuda`: on a CPU accelerator the run stops there. On ROCm "
        "the accelerator is also named `cuda` (DeepSpeed's CUDA accelerator serves HIP builds of torch), so the "
        "assert passes; the failure comes later, when NVMe parameter offload (ZeRO-3 `offload_param.device: "
        "nvme`) or the fast checkpoint writer loads the gds op, whose `is_compatible` refuses ROCm (it links "
        "cuFile), and the JIT load raises. Without those two, `use_gds` is read and never used on ROCm: "
        "reported as info. With no `--target` stated the rule reports the config as an error (it fails on any "
        "accelerator but CUDA when the op is loaded) and says so; a CUDA target silences it."
    )
    fails_when = (
        f"CPU accelerator: at DeepSpeedConfig construction ({_ASSERT}). ROCm: at engine set-up, when NVMe "
        f"parameter offload or the fast checkpoint writer loads the gds op ({_JIT}); otherwise never."
    )
    evidence = (
        "deepspeed 0.19.8 runtime/swap_tensor/aio_config.py:38-39 (the assert on `device_name() == 'cuda'`)",
        "deepspeed 0.19.8 accelerator/cuda_accelerator.py:65-68 (`device_name` is 'cuda', ROCm builds included)",
        "deepspeed 0.19.8 ops/op_builder/gds.py:38-42 (`is_compatible` is False on ROCm), "
        "op_builder/builder.py:569-571 (the JIT load raises when not compatible)",
        "deepspeed 0.19.8 runtime/swap_tensor/partitioned_param_swapper.py:95-96 and "
        "runtime/model_checkpointing/writer_factory.py:28-31,93 (the two places that load the gds op)",
    )
    example = '"aio": {"use_gds": true} with offload_param to nvme   ->  false on MI300X'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = ctx.source.find(("aio", "use_gds"))
        # `aio` is read as a plain dict (no pydantic): any truthy value, even the string "false", turns GDS on
        target = ctx.settings.target
        if entry is None or not entry.node.value or target.is_cuda:
            return
        if not target.stated:
            message = (
                "GPUDirect Storage needs CUDA (no --target stated): on a CPU accelerator DeepSpeed stops with "
                f"{_ASSERT}; on ROCm the gds op fails to load once NVMe offload or the fast checkpoint writer uses it"
            )
            yield self.at_entry(ctx, entry, message, on="value")
        elif not target.is_rocm:
            where = "a host without a GPU (DeepSpeed's CPU accelerator)" if target.platform == "cpu" else target.device
            message = f"GPUDirect Storage needs CUDA; on {where} DeepSpeed stops with {_ASSERT}"
            yield self.at_entry(ctx, entry, message, on="value")
        elif loader := _gds_loaded_by(ctx.source):
            message = (
                f"GPUDirect Storage needs CUDA; on {target.device} (ROCm) {loader} loads the gds op, which refuses "
                f"ROCm: {_JIT}"
            )
            yield self.at_entry(ctx, entry, message, on="value")
        else:
            message = (
                f"`use_gds` is inert on {target.device} (ROCm) here: nothing loads the gds op; it would fail with "
                f"{_JIT} once NVMe parameter offload or the fast checkpoint writer is turned on"
            )
            yield self.at_entry(ctx, entry, message, on="value", severity=Severity.INFO)
