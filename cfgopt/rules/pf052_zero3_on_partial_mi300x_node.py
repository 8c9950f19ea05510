from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_block, zero_stage
from cfgopt.rules.support.wording import a
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Zero3OnPartialMi300xNode(Rule):
    code = "PF052"
    name = "zero3-on-partial-mi300x-node"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "vendor guidance, not measured here; true only on a fully connected 8-GPU xGMI node"
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "ZeRO-3 on 2 or 4 GPUs of an 8-GPU xGMI mesh (MI300X/MI325X/MI355X): collectives use part of the links"
    why = (
        "Confidence: likely (vendor guidance, not measured here). MI300X-class nodes connect their 8 GPUs in a "
        "fully connected xGMI mesh; a collective among 2 or 4 of them uses only the links between those GPUs, "
        "so communication-heavy runs (ZeRO-3's per-layer all-gathers) get a fraction of the node's bandwidth. "
        "AMD's guidance is to use 1 or 8 GPUs. Judged with `--gpus` on a target shipped as such a mesh (MI300X, "
        "MI325X, MI355X: `xgmi_mesh` in cfgopt/knowledge/targets.py); quiet on CDNA2 (an MI250X node's 8 GCDs sit on 4 "
        "cards "
        "with uneven links, an MI210 node is PCIe with optional 2- or 4-card bridges) and on the 4-APU MI300A "
        "node. Settled by timing the same run on 4 and 8 GPUs at equal tokens per GPU."
    )
    fails_when = "Never: communication-bound steps are slower."
    evidence = (
        "AMD ROCm workload optimization guide, 'Multi-GPU communications' "
        "(https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/workload.html)",
        "AMD Instinct MI300X platform: 8 GPUs, each linked to the 7 others by xGMI (the same guide, and "
        "https://www.amd.com/en/products/accelerators/instinct/mi300/platform.html)",
        "docs/evidence/rocm_perf.md §2.1, R18",
    )
    example = "--target mi300x --gpus 4 with ZeRO-3   ->  8 GPUs, or ZeRO-2 / no DeepSpeed"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        target = ctx.settings.target
        if not target.xgmi_mesh or ctx.settings.gpus not in (2, 4) or zero_stage(src) != 3:
            return
        zero = zero_block(src)
        stage = zero.node.get("stage") if zero is not None else None
        if stage is None:
            return
        yield self.at_entry(
            ctx,
            stage,
            f"ZeRO-3 on {ctx.settings.gpus} GPUs of {a(target.name)} node: its all-gathers use only part of the "
            "xGMI mesh; AMD advises 1 or 8 GPUs for communication-heavy runs",
            on="value",
        )
