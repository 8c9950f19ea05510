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
    triggers = frozenset({"fp16"})  # `check` reports on the file's own `fp16` entry, never without it
    summary = "fp16 training of a model family trained in bf16 (Qwen2 and later): loss 0 or NaN from the start"
    why = (
        "Confidence: likely. Qwen2, Qwen2.5 and Qwen3 were trained in bf16, and some of their activations exceed "
        "fp16's range (65504): with `fp16: true` a forward pass gives inf, the loss becomes NaN (shown as 0.0 "
        "by the Trainer) and `grad_norm` nan from the first logged step, in full, freeze and LoRA fine-tunes "
        "alike; inference in fp16 often still looks fine. Qwen's maintainers answer that bf16 is the data type "
        "for these models, fp32 where the GPU has no bf16 (V100, T4). In LLaMA-Factory the way out on such a GPU "
        "is no precision flag, which is fp32 training only for a full fine-tune: the weights load in the "
        'checkpoint\'s dtype whatever the flag (`torch_dtype="auto"`: bf16 for these models), the compute dtype is '
        "bf16 wherever torch says bf16 is supported, emulated on V100 / T4 with torch >= 2.3, and only the trained "
        "weights are upcast to fp32 (a LoRA's adapter, a freeze run's trained layers, every weight of a full "
        "fine-tune; none with BAdam or `pure_bf16`): a LoRA's frozen base computes in emulated bf16, slow but "
        "without fp16's overflow."
    )
    fails_when = "Never stops: the run trains nothing (loss 0.0 or nan, grad_norm nan) and saves a useless adapter."
    evidence = (
        "QwenLM/Qwen3 issue #670 (Qwen2-7B-Instruct fp16 SFT: nan tokens, loss 0; maintainer: bfloat16 is the "
        "preferred data type, float32 where the device lacks it)",
        "hiyouga/LlamaFactory issues #4278 (Qwen2-1.5B LoRA, `fp16: true`: train_loss 0.0) and #4901 (Qwen2 with "
        "fp16: nan from the start)",
        'llamafactory 0.9.5 model/loader.py L155 (`torch_dtype="auto"`: the checkpoint\'s dtype), hparams/parser.py '
        "L512-515 and model/patcher.py L321-325 (no `bf16`/`fp16`: `infer_optim_dtype`, bf16 for a bf16 checkpoint "
        "wherever `is_torch_bf16_gpu_available`), model/adapter.py L313-325 (only trainable parameters upcast to "
        "fp32; not with `pure_bf16` or BAdam)",
    )
    example = (
        "model_name_or_path: Qwen/Qwen2.5-7B-Instruct, fp16: true   ->  bf16: true (on V100 / T4: no fp16, the "
        "weights kept in emulated bf16)"
    )
    fix_safety = (
        "No fix: `bf16: true`, or no flag on a GPU without bf16, depends on the GPU (PF001 offers bf16 where the "
        "target has it)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        fp16 = entry_of(ctx, "fp16")
        if fp16 is None or not training(ctx) or not on(ctx, "fp16") or on(ctx, "bf16"):
            return  # both on: LF004
        # the families: `model_family.overflows_fp16`, which LF008, LF004, PF002 and the speed plan also ask
        name = model_name(value_of(ctx, "model_name_or_path", None), ctx.job.local_model)
        if name is None or not ctx.job.overflows_fp16:
            return
        yield self.at_entry(
            ctx,
            fp16,
            f"`fp16: true` for {name.text}, a model trained in bf16: its activations overflow fp16, and runs report "
            f"loss 0.0 or nan with grad_norm nan from the first steps; {_instead(ctx)}",
        )


def _instead(ctx: Context) -> str:
    """What to train in: `bf16: true` where the target has bf16; where it has none, no precision flag, said as what
    LLaMA-Factory then does (`_without_a_flag`), which is fp32 training only for a full fine-tune."""
    target = ctx.settings.target
    if target.stated and target.bf16:
        return "train it in `bf16: true`"
    emulated = ", emulated by torch there (slow: no tensor cores)" if target.platform != "cpu" else ""
    dropped = (
        f"drop `fp16`: with no precision flag LLaMA-Factory {_without_a_flag(ctx, emulated)}, so nothing overflows"
    )
    if target.stated:
        return f"on {target.name} {dropped}"
    return f"train it in `bf16: true`; on a GPU without bf16 hardware (V100, T4), {dropped}"


ADAPTER_NAMES = {"lora": "LoRA", "oft": "OFT"}  # LLaMA-Factory's adapter methods (`finetuning_type`), as named


def _without_a_flag(ctx: Context, emulated: str) -> str:
    """What LLaMA-Factory does with the weights without `bf16` or `fp16`, in words: they load in the checkpoint's
    dtype (model/loader.py L155, `torch_dtype="auto"`) and only the trained ones are upcast to fp32, none with BAdam
    or `pure_bf16` (model/adapter.py L313-325)."""
    if on(ctx, "use_badam") or on(ctx, "pure_bf16"):
        kept = f"keeps every weight, the trained ones too, in the checkpoint's bf16{emulated}"
        return f"{kept} (no fp32 upcast with BAdam or `pure_bf16`)"
    method = str(value_of(ctx, "finetuning_type", None) or "lora")
    if method == "full":
        return "upcasts every weight from the checkpoint's bf16 to fp32 (a full fine-tune trains in fp32)"
    trained = "the trained layers" if method == "freeze" else f"the {ADAPTER_NAMES.get(method, method)} adapter"
    return f"keeps the frozen weights in the checkpoint's bf16{emulated} and trains only {trained} in fp32"
