from __future__ import annotations

from collections.abc import Iterator

from cfgopt.plan.speed_knobs import liger_plannable
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import (
    TRAIN_KINDS,
    deepspeed_zero3,
    on,
    packing_on,
    report,
    tokens_per_micro_batch,
    training,
    value_of,
)
from cfgopt.text.diagnostics import Diagnostic, Severity


class LigerKernelOff(Rule):
    code = "PF009"
    name = "liger-kernel-off"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    summary = "Long or packed micro-batches without `enable_liger_kernel` on a model Liger supports"
    why = (
        "Confidence: likely (memory, measured), contested (speed on ROCm). Liger's fused linear cross-entropy "
        "never materialises the fp32 logits (about 10 x vocab bytes per token) and its fused RMSNorm/SwiGLU/RoPE "
        "save memory traffic. Measured on an H200 (8B LoRA, packed 16x2048): +19.6% tokens/s and -54% peak "
        "memory (32 vs 71 GiB). Liger is pure Triton and supported on ROCm (torch >= 2.5, triton >= 3.0); no "
        "MI300X speed figure exists (a short A/B run settles it). Reported only for packed or >= 8192-token "
        "micro-batches of pt/sft runs, where logits dominate, and not under ZeRO-3 (LF027); only where the job's "
        "environment has liger-kernel (docs/environment.md: its requirement files, a doctor snapshot, or the default "
        "that assumes LLaMA-Factory's liger-kernel extra); judged for the target: Triton supports NVIDIA compute "
        "capability 8.0+ and ROCm (its README), so not on V100 / T4 nor with no target, and on ROCm only when "
        "PF009 is selected by name (no MI300X figure)."
    )
    fails_when = "Never fails: more memory and somewhat slower than needed."
    evidence = (
        "bench/h200/measurements.md V7 vs V6 (9,284 vs 7,762 tok/s; 32.2 vs 70.7 GiB)",
        "llamafactory 0.9.5 model/model_utils/liger_kernel.py L30-90 (supported model types)",
        "docs/evidence/rocm_perf.md §2.3 and R26",
    )
    example = "packing: true   ->  add enable_liger_kernel: true   (pip install liger-kernel)"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. "
        "Unsafe: needs the liger-kernel package (start-up fails without it; the plan says so, and verify / tune "
        "leave Liger out where it is not importable) and changes the kernels."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or value_of(ctx, "stage") not in ("pt", "sft"):
            return
        if on(ctx, "enable_liger_kernel") or on(ctx, "use_liger_kernel") or on(ctx, "use_unsloth"):
            return
        if not ctx.job.liger_patches_model or not ctx.job.has_package("liger_kernel"):
            return
        if not liger_plannable(ctx.job):
            return  # the plan's own test: not before Ampere (Triton), nor without a target; on ROCm only if named
        tokens = tokens_per_micro_batch(ctx) or 0
        if not packing_on(ctx) and tokens < 8192:
            return
        z3, _ = deepspeed_zero3(ctx)
        if z3:
            return
        yield report(
            self,
            ctx,
            ("packing", "neat_packing", "cutoff_len", "model_name_or_path"),
            "Liger kernels are off here; turning them on (`enable_liger_kernel: true`: fused cross-entropy, RMSNorm, "
            "SwiGLU) was +19.6% tokens/s and -54% peak memory on packed 8B LoRA (H200)",
        )
