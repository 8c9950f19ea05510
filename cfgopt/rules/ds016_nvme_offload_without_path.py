from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import offload_device, zero_block, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class NvmeOffloadWithoutPath(Rule):
    code = "DS016"
    name = "nvme-offload-without-path"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})
    summary = 'ZeRO-3 offload to `"device": "nvme"` without `nvme_path`'
    why = (
        "Confidence: certain. The offload config validates without `nvme_path` (it defaults to None), and the "
        "swapper later joins None into a path. Only ZeRO-3 builds NVMe swappers (stages 1/2 treat any offload "
        "device as CPU, DS012), so only stage 3 fails. Under the HF Trainer accelerate fills `nvme_path` only "
        'when it is "auto" (with the string "none", a relative folder).'
    )
    fails_when = (
        "ZeRO-3: `offload_param` at model construction (`zero.Init`), `offload_optimizer` at "
        "`deepspeed.initialize`: `TypeError: expected str, bytes or os.PathLike object, not NoneType`."
    )
    evidence = (
        "deepspeed 0.19.8 runtime/zero/offload_config.py (`nvme_path: Optional[Path] = None`)",
        "deepspeed 0.19.8 runtime/swap_tensor/partitioned_param_swapper.py:86, runtime/zero/stage3.py:840 "
        "(`os.path.join(nvme_path, ...)`)",
        "deepspeed 0.19.8 runtime/zero/stage_1_and_2.py:220-224 (any device but none is CPU offload)",
    )
    example = '"offload_param": {"device": "nvme"}   ->  add "nvme_path": "/local_nvme"'
    fix_safety = "No fix: only the user knows the NVMe mount."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        if zero is None or zero_stage(src) != 3:
            return
        for block in ("offload_param", "offload_optimizer"):
            entry = zero.node.get(block)
            if entry is None or offload_device(src, block) != "nvme":
                continue
            path = entry.node.get("nvme_path")
            if path is not None and isinstance(path.node.value, str) and path.node.value:
                continue
            yield self.at_entry(
                ctx,
                entry.node.get("device") or entry,
                f"`{block}` offloads to NVMe without `nvme_path`: ZeRO-3 stops with `TypeError: expected str, "
                "bytes or os.PathLike object, not NoneType` when it builds the swapper",
                on="value",
            )
