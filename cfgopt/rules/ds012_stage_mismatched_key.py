from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.deepspeed_plan import STAGE3_ONLY
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import offload_device, zero_block, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

# Also read at any stage when AutoTP shards the weights (accelerate 1.11.0 accelerator.py:3909-3912).
GATHER_KEYS = {
    "stage3_gather_16bit_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
}
# Fields only stages 1 and 2 read.
STAGE12_ONLY = {"allgather_bucket_size", "allgather_partitions"}


class StageMismatchedKey(Rule):
    code = "DS012"
    name = "stage-mismatched-key"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"zero_optimization"})
    summary = "A ZeRO key the configured stage never reads (offload_param below stage 3, stage3_* keys, ...)"
    why = (
        "Confidence: certain. DeepSpeed accepts every `zero_optimization` key at every stage and reads each "
        "only on the code path of the stage it belongs to. `offload_param` below stage 3, or `offload_optimizer` "
        "at stage 0, is silently not applied (and NVMe optimizer offload at stages 1/2 runs as CPU offload): "
        "the memory saving the file asks for does not happen (warning). `stage3_*` and ZeRO++ keys below stage "
        "3, and `allgather_bucket_size`/`allgather_partitions` at stage 3, are inert (info): usually a template "
        "shared between stages, sometimes a sign the stage is not the one intended."
    )
    fails_when = "Never: the key is ignored."
    evidence = (
        "deepspeed 0.19.8 runtime/engine.py:2660-2700 (stage 1/2 optimizer: allgather_bucket_size, "
        "offload_optimizer; no offload_param) and `_configure_zero_optimizer` stage-3 branch "
        "(offload_param, stage3_* fields)",
        "accelerate 1.11.0 accelerator.py:3909-3912 (the gather flag also applies to AutoTP sharding, any stage)",
        "deepspeed 0.19.8 runtime/zero/config.py:164 (`offload_param`: 'valid only with stage 3', not enforced)",
        "https://github.com/hiyouga/LlamaFactory/issues/2643 (ZeRO-2 config with offload_param and stage3 keys)",
    )
    example = '"stage": 2, "offload_param": {"device": "cpu"}   ->  stage 3, or remove offload_param'
    fix_safety = "Unsafe: removing the key keeps what runs but drops what the file asked for; the stage may be wrong."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        zero = zero_block(src)
        stage = zero_stage(src)
        if zero is None or stage is None:
            return
        autotp = src.find(("tensor_parallel", "autotp_size"))
        tp = autotp is not None and isinstance(autotp.node.value, int) and autotp.node.value > 1
        for entry in zero.node.entries or ():
            key = entry.key
            if tp and key in GATHER_KEYS:
                continue
            if key == "offload_param" and stage < 3 and offload_device(src, "offload_param") != "none":
                yield self._report(
                    ctx,
                    entry,
                    f"`offload_param` is ignored at ZeRO stage {stage} (stage 3 only): the parameters stay on the GPU",
                    Severity.WARNING,
                )
            elif key == "offload_optimizer" and stage == 0 and offload_device(src, "offload_optimizer") != "none":
                yield self._report(
                    ctx,
                    entry,
                    "`offload_optimizer` is ignored at ZeRO stage 0 (no ZeRO optimizer "
                    "is built): the optimizer state stays on the GPU",
                    Severity.WARNING,
                )
            elif key == "offload_optimizer" and stage in (1, 2) and offload_device(src, key) == "nvme":
                yield self._report(
                    ctx,
                    entry,
                    f"`offload_optimizer` to NVMe at ZeRO stage {stage} runs as CPU "
                    "offload (NVMe swapping is stage 3 only): it uses host RAM, not the disk",
                    Severity.WARNING,
                    removable=False,
                )
            elif key in STAGE3_ONLY and stage < 3:
                yield self._report(
                    ctx, entry, f"`{key}` is read only by ZeRO stage 3; at stage {stage} it does nothing", Severity.INFO
                )
            elif key in STAGE12_ONLY and stage == 3:
                yield self._report(
                    ctx,
                    entry,
                    f"`{key}` is read only by ZeRO stages 1 and 2; at stage 3 it does "
                    "nothing (stage 3 uses `stage3_prefetch_bucket_size`)",
                    Severity.INFO,
                )

    def _report(self, ctx: Context, entry, message: str, severity: Severity, removable: bool = True) -> Diagnostic:
        fix = (
            self.fix(f"Remove `{entry.key}`", edits.delete_entry(ctx.source, entry), safe=False) if removable else None
        )
        return self.at_entry(ctx, entry, message, severity=severity, fix=fix)
