from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.model_family import model_name
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on, value_of
from cfgopt.rules.support.precision import stops_on_target
from cfgopt.text.diagnostics import Diagnostic, Fix, Severity


class Bf16UnsupportedOnTarget(Rule):
    code = "LF008"
    name = "bf16-unsupported-on-target"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"bf16", "pure_bf16"})
    summary = "`bf16` / `pure_bf16` on a target without bf16: an error on CPU, emulated (use fp16) on V100 / T4"
    why = (
        "Confidence: certain (CPU) / likely (V100, T4). HF `TrainingArguments` refuses `bf16: true` unless "
        "`is_torch_bf16_gpu_available()` says yes or `use_cpu: true` is set; LLaMA-Factory refuses `pure_bf16` "
        "on the same check, whatever `use_cpu` says. Without a GPU (`--target cpu`) the check fails: an error, "
        "and why a config that is fine on the cluster fails on a login node. On a GPU without bf16 hardware "
        "(V100, T4: compute capability below 8.0) the check is `torch.cuda.is_bf16_supported()`, which since "
        "torch 2.3 also answers yes when a bf16 tensor can be created (`including_emulation=True`): the run "
        "starts (LLaMA-Factory 0.9.5 needs torch >= 2.4), but bf16 matmuls run emulated, without tensor cores, "
        "and kernels with no pre-Ampere bf16 path (FlashAttention-2, Triton kernels such as Liger) fail. fp16 "
        "has tensor cores there: a warning whose fix is fp16, except for a model trained in bf16 whose activations "
        "overflow fp16 (Qwen2 and later, LF050: loss 0 or NaN), which gets no fix: fp32 is no way out in "
        "LLaMA-Factory, which without `bf16` still computes in the checkpoint's bf16 wherever torch says bf16 is "
        "supported, emulated or not (`infer_optim_dtype`), so only the trainable weights would move to fp32. With "
        "torch < 2.3 the same config stops at start-up with `Your setup doesn't support bf16/gpu`."
    )
    fails_when = (
        "CPU: at start-up, `Your setup doesn't support bf16/gpu` (HF) or `This device does not support "
        "`pure_bf16`` (LLaMA-Factory). V100 / T4: at start-up with torch < 2.3; with newer torch it runs slowly "
        "(emulated bf16) or fails in a kernel without a bf16 path for the GPU."
    )
    evidence = (
        "transformers 5.6.0 training_args.py L1732-1738 (bf16 without a bf16 GPU and without use_cpu)",
        "transformers 5.6.0 utils/import_utils.py L508-515 (`is_torch_bf16_gpu_available`: "
        "`torch.cuda.is_bf16_supported()`)",
        "torch 2.13 torch/cuda/__init__.py L191-220 (`is_bf16_supported(including_emulation=True)`: capability "
        ">= 8, else whether a bf16 tensor can be created)",
        "https://github.com/pytorch/pytorch/pull/115924 (merged 2024-01, torch 2.3: `is_bf16_supported()` tries a "
        "bf16 tensor as a last resort, so an RTX 2060 answers True)",
        "https://github.com/pytorch/pytorch/issues/124996 (V100, torch 2.2.2: bf16 matmul runs, "
        "is_bf16_supported False)",
        "https://github.com/pytorch/pytorch/pull/148322 (the check answers True on T4 / RTX 20xx: emulated, slow)",
        "llamafactory 0.9.5 hparams/parser.py L380-382 (`This device does not support `pure_bf16``)",
        "llamafactory 0.9.5 hparams/parser.py L512-515, model/patcher.py L321-325, extras/misc.py L241-248 (no "
        "`bf16`/`fp16`: `infer_optim_dtype` picks bf16 for a bf16 checkpoint wherever `is_torch_bf16_gpu_available`)",
        "llamafactory 0.9.5 model/adapter.py L313-324 (only trainable parameters are upcast to fp32)",
    )
    example = "bf16: true   # --target cpu  ->  error;   --target v100  ->  fp16: true"
    fix_safety = (
        "CPU: no fix (the config is usually right for the cluster; lint it with the real `--target`). V100 / T4: "
        "unsafe, `bf16` becomes `fp16` (changes the training precision; fp16 needs loss scaling); no fix for a model "
        "that overflows fp16 (LF050), which keeps bf16 there."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if target.bf16 or not is_train_group(ctx):
            return
        on_gpu = target.platform in ("cuda", "rocm")
        bf16 = entry_of(ctx, "bf16")
        if bf16 is not None and bf16.node.value and not on(ctx, "use_cpu"):
            yield (
                self._bf16(ctx, bf16)
                if on_gpu
                else self.at_entry(
                    ctx,
                    bf16,
                    f"`bf16: true` on target {target.name}: {stops_on_target(ctx, 'bf16')} (set `use_cpu: true` to "
                    "train on CPU)",
                )
            )
        pure = entry_of(ctx, "pure_bf16")
        if pure is not None and pure.node.value:
            yield self.at_entry(
                ctx,
                pure,
                f"`pure_bf16: true` on {target.name}, which has no bf16 hardware: weights and matmuls in emulated "
                f"bf16 (slow; torch < 2.3 stops with `This device does not support `pure_bf16``); "
                f"{_instead(ctx, 'train with `fp16: true` instead')}"
                if on_gpu
                else f"`pure_bf16: true` on target {target.name}: {stops_on_target(ctx, 'pure_bf16')}",
                severity=Severity.WARNING if on_gpu else None,
            )

    def _bf16(self, ctx: Context, bf16) -> Diagnostic:
        """`bf16: true` on a GPU without bf16 hardware: it starts (emulated) with torch >= 2.3; fp16 is the fix,
        except for a model that overflows fp16 (`Job.overflows_fp16`, LF050), which keeps bf16."""
        target = ctx.settings.target
        return self.at_entry(
            ctx,
            bf16,
            f"`bf16: true` on {target.name} ({target.device}), which has no bf16 hardware: torch >= 2.3 emulates "
            "it, so the run starts but its matmuls skip the tensor cores (far slower than fp16) and "
            "FlashAttention-2 / Triton kernels (Liger) fail; torch < 2.3 stops at start-up with "
            f"`Your setup doesn't support bf16/gpu`; {_instead(ctx, 'use fp16')}",
            severity=Severity.WARNING,
            fix=None if ctx.job.overflows_fp16 else _to_fp16(self, ctx, bf16),
        )


def _instead(ctx: Context, otherwise: str) -> str:
    """What to train in instead of bf16 on a GPU without it: fp16 (`otherwise`'s words), unless the model overflows
    fp16 (LF050). Then nothing on this GPU: without `bf16` LLaMA-Factory still computes in the checkpoint's bf16
    where torch emulates it (`infer_optim_dtype`), and only the trainable weights would move to fp32."""
    if not ctx.job.overflows_fp16:
        return otherwise
    name = model_name(value_of(ctx, "model_name_or_path", None), ctx.job.local_model)
    return (
        f"not fp16 for {name.text if name else 'this model'}, trained in bf16: its activations overflow fp16 "
        "(LF050), and without `bf16` LLaMA-Factory still computes in its bf16 here; keep bf16, or train on a GPU "
        "with bf16 hardware"
    )


def _to_fp16(rule: Rule, ctx: Context, bf16) -> Fix | None:
    src = ctx.source
    fp16 = entry_of(ctx, "fp16")
    if fp16 is None:
        fix_edits = edits.rename_key(src, bf16, "fp16")
    elif fp16.node.value is True:
        fix_edits = edits.replace_value(src, bf16, False)
    else:
        a, b = edits.replace_value(src, bf16, False), edits.replace_value(src, fp16, True)
        fix_edits = a + b if a and b else None
    return rule.fix("Use fp16", fix_edits, safe=False)
