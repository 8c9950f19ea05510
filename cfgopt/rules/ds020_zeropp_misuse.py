from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_block, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind
from cfgopt.text.user_text import is_int

GPUS_PER_NODE = 8  # every target in cfgopt/knowledge/targets.py ships as 8-GPU nodes (MI300X/MI325X/H100/H200/A100)
QUANTIZED = ("zero_quantized_weights", "zero_quantized_gradients")


class ZeroppMisuse(Rule):
    code = "DS020"
    name = "zeropp-misuse"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})
    summary = "ZeRO++ hierarchical partitioning on a single node, or quantized ZeRO++ collectives on ROCm"
    why = (
        "Confidence: likely. ZeRO++ hpZ (`zero_hpz_partition_size` > 1) keeps a secondary copy of the weights "
        "inside each node so that forward all-gathers stay off the inter-node network; on a single node every "
        "all-gather is intra-node anyway, so it only costs the extra copy (the ZeRO++ tutorial sizes it to the "
        "ranks per node, for multi-node runs). Checked when `--gpus` is given and is at most 8 (one node). "
        "On ROCm the quantized collectives (`zero_quantized_weights`/`_gradients`) need DeepSpeed's quantizer "
        "ops hipified and built; a build failure was reported on MI200 with DeepSpeed 0.14.4 and ROCm 6.0 "
        "(December 2024; no later report found), so it is info: verify with the installed release before use."
    )
    fails_when = "hpZ: never (memory spent for nothing). qwZ/qgZ on ROCm: at op build, if it fails."
    evidence = (
        "https://www.deepspeed.ai/tutorials/zeropp/ (hpZ: 'ideal is number of ranks per node'), arXiv:2306.10209",
        "deepspeed 0.19.8 runtime/zero/config.py (`zero_hpz_partition_size`, `zero_quantized_*`, stage 3 only)",
        "https://github.com/deepspeedai/DeepSpeed/issues/6795 (quantizer build failure on ROCm/MI200: DeepSpeed "
        "0.14.4, ROCm 6.0, December 2024)",
    )
    example = '"zero_hpz_partition_size": 8 with --gpus 8   ->  1'
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        if zero is None or zero_stage(src) != 3:
            return  # below stage 3 DS012 reports these keys as ignored
        hpz = zero.node.get("zero_hpz_partition_size")
        gpus = ctx.settings.gpus
        value = hpz.node.value if hpz is not None else None
        if is_int(value) and value > 1 and gpus and gpus <= GPUS_PER_NODE:
            yield self.at_entry(
                ctx,
                hpz,
                f"`zero_hpz_partition_size` is {value} on {gpus} GPU(s), one node: hpZ only saves inter-node "
                "traffic, so here it just keeps a second copy of the weights",
                on="value",
            )
        if ctx.settings.target.is_rocm:
            for key in QUANTIZED:
                entry = zero.node.get(key)
                if entry is not None and entry.node.value is True:
                    yield self.at_entry(
                        ctx,
                        entry,
                        f"`{key}` on {ctx.settings.target.device}: ZeRO++ quantized collectives need DeepSpeed's "
                        "quantizer ops built with hipcc (build failures reported on ROCm); verify before relying "
                        "on it",
                        on="value",
                        severity=Severity.INFO,
                    )
