from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules._ds import zero_stage
from cfgopt.rules._xf import consumer_entry, lf_value, model_shape
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind

FIT_SHARE = 0.5  # LoRA: the frozen bf16 weights (2 bytes/param) must take at most half of one GPU


class Zero3ForLoraThatFits(Rule):
    code = "PF050"
    name = "zero3-for-lora-that-fits"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    summary = "DeepSpeed ZeRO-3 for LoRA on a model whose bf16 weights fit one GPU (or on a single GPU)"
    why = (
        "Confidence: certain on one GPU (measured), likely on several. ZeRO-3 shards the frozen base weights too, "
        "so every micro-batch all-gathers all of them in forward and again in backward (and in the checkpoint "
        "recompute), while plain data parallel only all-reduces the small LoRA gradients. When the bf16 weights "
        "(2 bytes per parameter) take at most half of one GPU's memory, ZeRO-3 buys no batch size and costs "
        "communication: drop `deepspeed` (llamafactory-cli launches DDP on several GPUs) or use ZeRO-0/2. On one "
        "GPU ZeRO-3 has nothing to shard across: measured 4.47x slower per step than no DeepSpeed on an H200 "
        "(Llama-3-8B LoRA), with no memory saved. Model size comes from a local config.json or cfgopt's table of "
        "common models; unknown models are judged only on one GPU. Memory rule kept deliberately simple "
        "(weights only; activations and LoRA states are small next to the other half)."
    )
    fails_when = "Never: the run is slower (4.47x measured on one H200)."
    evidence = (
        "measured: knowledge/h200_measurements.md V2 vs V4, Llama-3-8B LoRA on one H200: ZeRO-3 6.286 s/step vs "
        "1.434 s/step without DeepSpeed (4.47x), peak 21.1 vs 21.0 GiB",
        "knowledge/rocm_perf.md §6 (the seed's ZeRO-3 claim), R07; HF DeepSpeed guide speed order "
        "'Stage 0 (DDP) > Stage 1 > Stage 2 > ... > Stage 3'",
        "https://github.com/hiyouga/LlamaFactory/issues/3499 (maintainer: 'zero3 has communication cost'), "
        "https://github.com/deepspeedai/DeepSpeed/pull/8064 (ZeRO-3 27,941 vs ZeRO-1 57,414 tok/s)",
    )
    example = "finetuning_type: lora, Llama-3-8B, deepspeed: ds_z3_config.json   ->  no deepspeed (DDP) or ds_z2"
    fix_safety = "Unsafe: removing `deepspeed` changes the parallelism (DDP); memory headroom should be checked."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.deepspeed
        if ds is None or zero_stage(ds) != 3 or not isinstance(src.data, dict):
            return
        lf = ctx.settings.lf_schema
        if lf_value(src, "finetuning_type", lf) != "lora":
            return
        entry = consumer_entry(src, "deepspeed")
        if entry is None:
            return
        fix = self.fix("Remove `deepspeed` (plain data parallel)", edits.delete_entry(src, entry), safe=False)
        if ctx.settings.gpus == 1:
            yield self.at_entry(
                ctx,
                entry,
                "ZeRO-3 on 1 GPU shards nothing and adds gathers: measured 4.47x slower per step than no DeepSpeed "
                "(Llama-3-8B LoRA, H200), no memory saved",
                fix=fix,
            )
            return
        shape = model_shape(src, lf)
        target = ctx.settings.target
        if shape is None or not target.memory_gib:
            return
        weights_gb = 2 * shape.num_parameters / 1e9
        if weights_gb > FIT_SHARE * target.memory_gib:
            return
        yield self.at_entry(
            ctx,
            entry,
            f"ZeRO-3 for LoRA on {shape.name}: its bf16 weights ({weights_gb:.0f} GB) take "
            f"{weights_gb / target.memory_gib:.0%} of one {target.name}, so sharding them only adds all-gathers "
            "every micro-batch; plain data parallel "
            "(no `deepspeed`) or ZeRO-2 is faster",
            fix=fix,
        )
