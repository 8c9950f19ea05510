from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import consumer_entry
from cfgopt.rules.support.deepspeed import zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Zero3ForLoraThatFits(Rule):
    code = "PF050"
    name = "zero3-for-lora-that-fits"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    triggers = frozenset({"deepspeed"})  # `check` reports on the file's own `deepspeed` entry, never without it
    summary = "DeepSpeed ZeRO-3 for LoRA on a single GPU, where it shards nothing"
    why = (
        "Confidence: certain (measured). With `--gpus 1` ZeRO-3 has nothing to shard across, yet it still "
        "gathers the frozen base weights layer by layer in every forward and backward: measured 4.47x slower "
        "per step than no DeepSpeed on an H200 (Llama-3-8B LoRA), with no memory saved. Needs no model size. On "
        "several GPUs, whether a lower ZeRO stage fits is a memory question: MEM003 answers it with cfgopt's "
        "memory estimate (for LoRA and every other fine-tuning type)."
    )
    fails_when = "Never: the run is slower (4.47x measured on one H200)."
    evidence = (
        "measured: bench/h200/measurements.md V2 vs V4, Llama-3-8B LoRA on one H200: ZeRO-3 6.286 s/step vs "
        "1.434 s/step without DeepSpeed (4.47x), peak 21.1 vs 21.0 GiB",
        "docs/evidence/rocm_perf.md §6 (the seed's ZeRO-3 claim), R07; HF DeepSpeed guide speed order "
        "'Stage 0 (DDP) > Stage 1 > Stage 2 > ... > Stage 3'",
        "https://github.com/hiyouga/LlamaFactory/issues/3499 (maintainer: 'zero3 has communication cost'), "
        "https://github.com/deepspeedai/DeepSpeed/pull/8064 (ZeRO-3 27,941 vs ZeRO-1 57,414 tok/s)",
    )
    example = "finetuning_type: lora, deepspeed: ds_z3_config.json, --gpus 1   ->  no deepspeed"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. Unsafe: removing `deepspeed` changes how the run is launched and saved."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.deepspeed
        if ds is None or zero_stage(ds) != 3 or not isinstance(src.data, dict):
            return
        if ctx.job.value("finetuning_type") != "lora":
            return
        entry = consumer_entry(src, "deepspeed")
        if entry is None or ctx.settings.gpus != 1:  # several GPUs: MEM003 (memory estimate)
            return
        yield self.at_entry(
            ctx,
            entry,
            "ZeRO-3 on 1 GPU shards nothing and adds gathers: measured 4.47x slower per step than no DeepSpeed "
            "(Llama-3-8B LoRA, H200), no memory saved",
        )
