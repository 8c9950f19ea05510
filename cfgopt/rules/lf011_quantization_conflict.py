from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import as_list, entry_of, is_train_group, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

PARSE = "at start-up"
LOAD = "at model load (after tokenisation)"
BITS = {"bnb": (4, 8), "hqq": (1, 2, 3, 4, 5, 6, 8), "eetq": (8,)}
BITS_MESSAGE = {
    "bnb": "Bitsandbytes only accepts 4-bit or 8-bit quantization.",
    "hqq": "HQQ only accepts 1/2/3/4/5/6/8-bit quantization.",
    "eetq": "EETQ only accepts 8-bit quantization.",
}


def _problems(ctx: Context) -> list[tuple[tuple[str, ...], str, str]]:
    out: list[tuple[tuple[str, ...], str, str]] = []
    train = is_train_group(ctx)
    ftype = value_of(ctx, "finetuning_type")
    adapters = as_list(value_of(ctx, "adapter_name_or_path"))
    if adapters and ftype != "lora":
        out.append((("adapter_name_or_path", "finetuning_type"), "Adapter is only valid for the LoRA method.", PARSE))
    if on(ctx, "export_quantization_bit") and value_of(ctx, "export_quantization_dataset") is None:
        out.append((("export_quantization_bit",), "Quantization dataset is necessary for exporting.", PARSE))
    bit = value_of(ctx, "quantization_bit")
    if bit is None or isinstance(bit, str):  # a quoted number is LF002's finding
        return out
    keys = ("quantization_bit",)
    if ftype not in ("lora", "oft"):
        out.append((keys, "Quantization is only compatible with the LoRA or OFT method.", PARSE))
    if on(ctx, "pissa_init"):
        out.append(
            (("pissa_init",), "Please use scripts/pissa_init.py to initialize PiSSA for a quantized model.", PARSE)
        )
    if on(ctx, "resize_vocab"):
        out.append((("resize_vocab",), "Cannot resize embedding layers of a quantized model.", PARSE))
    if adapters and on(ctx, "create_new_adapter"):
        out.append((("create_new_adapter",), "Cannot create new adapter upon a quantized model.", PARSE))
    if len(adapters) > 1:
        out.append(
            (("adapter_name_or_path",), "Quantized model only accepts a single adapter. Merge them first.", PARSE)
        )
    if train and on(ctx, "do_train") and value_of(ctx, "quantization_device_map") == "auto":
        out.append((("quantization_device_map",), "Cannot use device map for quantized models in training.", PARSE))
    if train and on(ctx, "fp8"):
        message = "FP8 training is not compatible with quantization. Please disable one of them."
        out.append((("fp8", "quantization_bit"), message, PARSE))
    method = value_of(ctx, "quantization_method")
    if method in BITS and isinstance(bit, int) and bit not in BITS[method]:
        out.append((keys, BITS_MESSAGE[method], LOAD))
    return out


class QuantizationConflict(Rule):
    code = "LF011"
    name = "quantization-conflict"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    # all three default to None: every finding needs one of them written
    triggers = frozenset({"adapter_name_or_path", "export_quantization_bit", "quantization_bit"})
    summary = (
        "On-the-fly quantization combined with something LLaMA-Factory refuses (full FT, PiSSA, resize_vocab, ...)"
    )
    why = (
        "Confidence: certain. `_verify_model_args` refuses `quantization_bit` with full/freeze tuning, PiSSA "
        "initialisation, `resize_vocab`, a new adapter on top of an adapter, or several adapters; it also refuses "
        "an adapter for any method but LoRA. get_train_args refuses `quantization_device_map: auto` in training "
        "and FP8 with quantization. The bit width is checked only at model load: bitsandbytes takes 4 or 8, "
        "HQQ 1-6 or 8, EETQ 8. ExportArguments needs a calibration dataset for `export_quantization_bit`."
    )
    fails_when = "At start-up for the argument checks; at model load (after tokenisation) for a bad bit width."
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py L185-202 (`_verify_model_args`), L374-375, L403-404",
        "llamafactory 0.9.5 model/model_utils/quantization.py L167-181, L195-197, L207-209",
        "llamafactory 0.9.5 hparams/model_args.py L396-397 (export quantization dataset)",
    )
    example = "finetuning_type: full\nquantization_bit: 4   ->  finetuning_type: lora (QLoRA), or drop quantization_bit"
    fix_safety = "No fix: which of the two options to drop is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        for keys, message, when in _problems(ctx):
            shown = ", ".join(f"`{k}`" for k in keys if entry_of(ctx, k) is not None) or f"`{keys[0]}`"
            yield report(self, ctx, keys, f"{shown}: {ctx.lf_label} stops {when} with `{message}`")
