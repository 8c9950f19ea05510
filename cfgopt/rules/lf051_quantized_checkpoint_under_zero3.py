from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.model_family import naming_component
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, deepspeed_zero3, entry_of, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.patterns import lazy
from cfgopt.text.requirements.versions import version_key

# 0.9.4 and later dequantize FP8 and MXFP4 checkpoints at load (FineGrainedFP8Config / Mxfp4Config(dequantize=True))
# and refuse only the other PTQ methods under ZeRO-3 (v0.9.4 model/model_utils/quantization.py L97-101).
DEQUANTIZED_FROM = (0, 9, 4)
DEQUANTIZED = frozenset({"fp8", "mxfp4"})
# Hub names of pre-quantized checkpoints: `-AWQ`, `-GPTQ-Int4`, `-bnb-4bit`, `-FP8`, DeepSeek-V3 / R1 (FP8 weights)
_NAMED = lazy(
    r"(?:^|[-_.])(awq|gptq|bnb-4bit|fp8|int4|int8)(?:$|[-_.])", needs=("awq", "gptq", "bnb-4bit", "fp8", "int4", "int8")
)
_DEEPSEEK_FP8 = lazy(r"^deepseek-(?:v3|r1)(?!.*distill)", needs=("deepseek-",))


class QuantizedCheckpointUnderZero3(Rule):
    code = "LF051"
    name = "quantized-checkpoint-under-zero3"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"deepspeed"})
    summary = "A pre-quantized checkpoint (AWQ, GPTQ, bitsandbytes, FP8) trained under DeepSpeed ZeRO-3"
    why = (
        "Confidence: certain (a local model's config.json) / likely (a hub name). A checkpoint saved quantized "
        "carries a `quantization_config` (AWQ, GPTQ, bitsandbytes, FP8 as DeepSeek-V3/R1 ship theirs). "
        "LLaMA-Factory's `configure_quantization` refuses it under ZeRO-3 (or FSDP), which would partition "
        "weights the quantized layers keep packed: model loading stops, after the dataset is tokenised. 0.9.0-"
        "0.9.3 refuse every method; 0.9.4 and later dequantize FP8 and MXFP4 checkpoints at load and refuse the "
        "others."
    )
    fails_when = (
        "At model load, after tokenisation: `ValueError: DeepSpeed ZeRO-3 or FSDP is incompatible with "
        "PTQ-quantized models.`"
    )
    evidence = (
        "llamafactory v0.9.5 src/llamafactory/model/model_utils/quantization.py L90-101 (FP8 and MXFP4 exempt), "
        "v0.9.4 L92-101, v0.9.3 L93-94, v0.9.2 L113-114, v0.9.1 and v0.9.0 L114-115 (every PTQ method refused)",
    )
    example = "model_name_or_path: Qwen/Qwen2.5-7B-Instruct-AWQ, deepspeed: ds_z3_config.json  ->  ZeRO-2"
    fix_safety = "No fix: ZeRO-2, another model or LoRA on fewer GPUs is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        zero3, certain = deepspeed_zero3(ctx)
        if not zero3 or not certain or not training(ctx):
            return
        ref = value_of(ctx, "model_name_or_path", None)
        if not isinstance(ref, str) or not ref.strip():
            return
        method, from_config = _quantization(ref, ctx)
        if method is None:
            return
        release = ctx.settings.llamafactory_version
        accepted = version_key(release)[:3] >= DEQUANTIZED_FROM and method in DEQUANTIZED
        if accepted:
            return
        entry = entry_of(ctx, "deepspeed") or entry_of(ctx, "model_name_or_path")
        if entry is None:
            return  # both from the YAML a launch line names: reported there
        where = "its config.json's `quantization_config`" if from_config else "by its name"
        later = " (0.9.4 and later dequantize FP8 and MXFP4 checkpoints at load)" if method in DEQUANTIZED else ""
        message = (
            f"`{ref}` is a pre-quantized checkpoint ({method.upper()}, {where}), which LLaMA-Factory {release} "
            f"refuses under DeepSpeed ZeRO-3{later}: model loading stops, after the dataset is tokenised, with "
            "`DeepSpeed ZeRO-3 or FSDP is incompatible with PTQ-quantized models.`; use ZeRO-2 or the model it "
            "was quantized from"
        )
        yield self.at_entry(ctx, entry, message, on="value", severity=None if from_config else Severity.WARNING)


def _quantization(ref: str, ctx: Context) -> tuple[str | None, bool]:
    """The quantization method of a pre-quantized checkpoint, and whether its config.json says so (else its
    name); None: not one (or not known)."""
    local = ctx.job.local_model
    if local is not None:
        quant = local.config.get("quantization_config")
        method = quant.get("quant_method") if isinstance(quant, dict) else None
        return (str(method).lower() if method else None), True
    name, _ = naming_component(ref)
    if _DEEPSEEK_FP8.match(name):
        return "fp8", False
    match = _NAMED.search(name)
    if match is None:
        return None, False
    word = match.group(1)
    return {"bnb-4bit": "bitsandbytes", "int4": "gptq", "int8": "gptq"}.get(word, word), False
