from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group
from cfgopt.text.diagnostics import Diagnostic, Severity


class Fp8OnTarget(Rule):
    code = "PF013"
    name = "fp8-on-target"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "contested: FP8 support depends on the software stack, not measured here"
    kinds = TRAIN_KINDS
    summary = "`fp8: true` on a target where LLaMA-Factory's FP8 path is unproven (ROCm, A100, CPU)"
    why = (
        "Confidence: contested. LLaMA-Factory's FP8 goes through Accelerate (torchao by default, Transformer "
        "Engine optionally); its own help says it requires PyTorch 2.7+ and Hopper. A100 has no FP8 tensor "
        "cores, nor do CDNA2 GPUs (MI250X, MI210). CDNA3 (MI300X/MI325X/MI300A) uses the FNUZ FP8 formats "
        "(`float8_e4m3fnuz`), CDNA4 (MI355X) the OCP ones; on CDNA3 the HF path is immature (FP8 was 21% "
        "slower than bf16 for Llama-3-8B FSDP until an AMD fix in ROCm TransformerEngine #79). A short "
        "bf16-vs-fp8 A/B run on the target settles it. Under transformers 5 LLaMA-Factory 0.9.5 does not apply "
        "`fp8` at all when `bf16` or `fp16` is on (LF058)."
    )
    fails_when = "At train start or never (silently slower), depending on the backend and versions."
    evidence = (
        "llamafactory 0.9.5 hparams/training_args.py L123-140 (fp8 fields and help)",
        "docs/evidence/rocm_perf.md §2.2 and R30 (contested)",
    )
    example = "fp8: true   # --target mi300x  ->  bf16: true unless an A/B run shows a gain"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not target.stated or (target.is_cuda and target.fp8) or not is_train_group(ctx):
            return  # no target: nothing to say; Ada / Hopper / Blackwell: FP8 tensor cores
        entry = entry_of(ctx, "fp8")
        if entry is None or not entry.node.value:
            return
        if target.is_rocm and not target.fp8:
            why = f"{target.device} has no FP8 matrix cores ({target.arch.upper()})"
        elif target.is_rocm and target.arch == "cdna3":
            why = f"{target.device} and the HF/Accelerate FP8 path are not validated together (CDNA3 uses FNUZ FP8)"
        elif target.is_rocm:
            why = f"{target.device} and the HF/Accelerate FP8 path are not validated together"
        elif target.is_cuda:
            why = f"{target.device} has no FP8 tensor cores (LLaMA-Factory's help: requires Hopper)"
        else:
            why = "FP8 training needs a Hopper-class GPU"
        yield self.at_entry(ctx, entry, f"`fp8: true` on {target.name}: {why}; compare with bf16 before relying on it")
