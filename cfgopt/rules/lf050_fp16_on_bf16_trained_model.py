from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.model_family import model_name
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, on, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class Fp16OnBf16TrainedModel(Rule):
    code = "LF050"
    name = "fp16-on-bf16-trained-model"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    summary = "fp16 training of a model family trained in bf16 (Qwen2 and later): loss 0 or NaN from the start"
    why = (
        "Confidence: likely. Qwen2, Qwen2.5 and Qwen3 were trained in bf16, and some of their activations exceed "
        "fp16's range (65504): with `fp16: true` a forward pass gives inf, the loss becomes NaN (shown as 0.0 "
        "by the Trainer) and `grad_norm` nan from the first logged step, in full, freeze and LoRA fine-tunes "
        "alike; inference in fp16 often still looks fine. Qwen's maintainers answer that bf16 is the data type "
        "for these models, fp32 where the GPU has no bf16 (V100, T4)."
    )
    fails_when = "Never stops: the run trains nothing (loss 0.0 or nan, grad_norm nan) and saves a useless adapter."
    evidence = (
        "QwenLM/Qwen3 issue #670 (Qwen2-7B-Instruct fp16 SFT: nan tokens, loss 0; maintainer: bfloat16 is the "
        "preferred data type, float32 where the device lacks it)",
        "hiyouga/LlamaFactory issues #4278 (Qwen2-1.5B LoRA, `fp16: true`: train_loss 0.0) and #4901 (Qwen2 with "
        "fp16: nan from the start)",
    )
    example = "model_name_or_path: Qwen/Qwen2.5-7B-Instruct, fp16: true   ->  bf16: true (fp32 on V100 / T4)"
    fix_safety = "No fix: bf16 or fp32 depends on the GPU (PF001 offers bf16 where the target has it)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        fp16 = entry_of(ctx, "fp16")
        if fp16 is None or not training(ctx) or not on(ctx, "fp16") or on(ctx, "bf16"):
            return  # both on: LF004
        # the families: `model_family.overflows_fp16`, which LF008, LF004, PF002 and the speed plan also ask
        name = model_name(value_of(ctx, "model_name_or_path", None), ctx.job.local_model)
        if name is None or not ctx.job.overflows_fp16:
            return
        target = ctx.settings.target
        instead = (
            "fp32 (no `fp16`)" if target.stated and not target.bf16 else "`bf16: true` (fp32 where the GPU has no bf16)"
        )
        yield self.at_entry(
            ctx,
            fp16,
            f"`fp16: true` for {name.text}, a model trained in bf16: its activations overflow fp16, and runs report "
            f"loss 0.0 or nan with grad_norm nan from the first steps; train it in {instead}",
        )
