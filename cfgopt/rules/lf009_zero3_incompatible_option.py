from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import (
    TRAIN_KINDS,
    as_list,
    deepspeed_zero3,
    entry_of,
    is_train_group,
    on,
    report,
    value_of,
)
from cfgopt.text.diagnostics import Diagnostic, Severity

PARSE = "at start-up (get_train_args)"
LOAD = "at model load (after tokenisation)"


def _checks(ctx: Context) -> list[tuple[str, str, str]]:
    out = []
    if on(ctx, "predict_with_generate"):
        out.append(("predict_with_generate", "`predict_with_generate` is incompatible with DeepSpeed ZeRO-3.", PARSE))
    if on(ctx, "pissa_init"):
        out.append(("pissa_init", "Please use scripts/pissa_init.py to initialize PiSSA in DeepSpeed ZeRO-3.", PARSE))
    if on(ctx, "pure_bf16"):
        out.append(("pure_bf16", "`pure_bf16` is incompatible with DeepSpeed ZeRO-3.", PARSE))
    if on(ctx, "use_unsloth"):
        out.append(("use_unsloth", "Unsloth is incompatible with DeepSpeed ZeRO-3.", PARSE))
    if on(ctx, "use_kt"):
        out.append(("use_kt", "KTransformers is incompatible with DeepSpeed ZeRO-3.", PARSE))
    bit = value_of(ctx, "quantization_bit")
    method = value_of(ctx, "quantization_method")
    if bit is not None and not isinstance(bit, str):
        if method == "bnb" and bit == 8:
            out.append(("quantization_bit", "Only 4-bit quantized model can use fsdp+qlora or auto device map.", LOAD))
        elif method in ("hqq", "eetq"):
            message = f"{method.upper()} quantization is incompatible with DeepSpeed ZeRO-3 or FSDP."
            out.append(("quantization_method", message, LOAD))
    adapters = as_list(value_of(ctx, "adapter_name_or_path"))
    if len(adapters) > 1 and value_of(ctx, "finetuning_type") in ("lora", "oft"):
        out.append(("adapter_name_or_path", "AssertionError: Cannot use multiple adapters in DeepSpeed ZeRO-3.", LOAD))
    return out


class Zero3IncompatibleOption(Rule):
    code = "LF009"
    name = "zero3-incompatible-option"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    # each check needs its option written (every default is off or none), beside `deepspeed` (ZeRO-3's JSON)
    triggers = frozenset(
        {"predict_with_generate", "pissa_init", "pure_bf16", "use_unsloth", "use_kt", "quantization_bit"}
        | {"adapter_name_or_path"}
    )
    summary = "An option LLaMA-Factory refuses under DeepSpeed ZeRO-3 (pure_bf16, use_unsloth, ...)"
    why = (
        "Confidence: certain. With a ZeRO-3 DeepSpeed config (`is_deepspeed_zero3_enabled()`), get_train_args "
        "refuses `predict_with_generate`, `pissa_init`, `pure_bf16`, `use_unsloth` and `use_kt`; at model load "
        "8-bit bitsandbytes, HQQ and EETQ quantization and several LoRA adapters are refused too. The ZeRO stage is "
        "read from the linked DeepSpeed JSON; when that file was not found and only its name says ZeRO-3 "
        "(`ds_z3_config.json`), the finding is a warning."
    )
    fails_when = (
        "At start-up for the parser checks (seconds); at model load, after the dataset was tokenised, for the "
        "quantization and adapter checks."
    )
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py L367-369, L377-378, L384-385, L409-413",
        "llamafactory 0.9.5 model/model_utils/quantization.py L185-188, L199-200, L211-212",
        "llamafactory 0.9.5 model/adapter.py L163-164 (`Cannot use multiple adapters in DeepSpeed ZeRO-3.`)",
        "LLaMA-Factory issues #6940, #5635 (unsloth); docs/evidence/llamafactory.md §1.6 G16-G27, L7, L8",
    )
    example = "deepspeed: ds_z3_config.json\npure_bf16: true   ->  use ds_z2_config.json, or bf16 instead of pure_bf16"
    fix_safety = "No fix: either the DeepSpeed stage or the option has to change, and that is a choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx) or entry_of(ctx, "deepspeed") is None:
            return
        z3, certain = deepspeed_zero3(ctx)
        if not z3:
            return
        how = "ZeRO-3" if certain else "ZeRO-3 (judged from the DeepSpeed file name; the file was not read)"
        for key, message, when in _checks(ctx):
            yield report(
                self,
                ctx,
                (key, "deepspeed"),
                f"`{key}` with DeepSpeed {how}: {when} LLaMA-Factory stops with `{message}`",
                severity=None if certain else Severity.WARNING,
            )
