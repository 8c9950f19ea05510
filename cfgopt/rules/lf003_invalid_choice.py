from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cfgopt import edits, schema, suggest
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules._lf import LF, fields_for, top_entries
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Entry, Kind
from cfgopt.targets import Target

# Where a bad value of each field makes the real run fail (YAML path). Default: when first used.
FAILS_AT = {
    "flash_attn": "model load fails with `NotImplementedError: Unknown attention type` "
    "(after the dataset is tokenised: 16 s into a small run on an H200, hours on a real dataset)",
    "stage": "`run_exp` stops with `Unknown task` after start-up",
    "finetuning_type": "the parser stops with `AssertionError: Invalid fine-tuning method`",
    "optim": "TrainingArguments stops at once: `is not a valid OptimizerNames`",
    "lr_scheduler_type": "TrainingArguments stops at once: `is not a valid SchedulerType`",
    "eval_strategy": "TrainingArguments stops at once: `is not a valid IntervalStrategy`",
    "save_strategy": "TrainingArguments stops at once: `is not a valid SaveStrategy`",
    "logging_strategy": "TrainingArguments stops at once: `is not a valid IntervalStrategy`",
    "quantization_method": "model load matches no quantization branch and loads the model unquantized",
}
# Values whose meaning is certain: the mapping is safe.
SAFE_ALIASES: dict[str, dict[Any, str]] = {
    "flash_attn": {"flash_attention_2": "fa2", "eager": "disabled", "off": "disabled", "none": "disabled"},
    "quantization_method": {"bitsandbytes": "bnb"},
}
# Values that mean "use flash attention" without saying which: the target decides (unsafe).
FLASH_INTENT = {
    "true",
    "yes",
    "on",
    "fa",
    "flash",
    "flashattn",
    "flash_attn",
    "flash-attention",
    "flashattention",
}


def flash_attn_for(target: Target) -> str:
    """What `flash_attn: true` should become on this target.

    `sdpa`: PyTorch's scaled-dot-product attention dispatches to a flash kernel on CUDA (FlashAttention-2
    kernels inside PyTorch) and on ROCm (AOTriton/CK on MI200/MI300), with no extra package. `fa2` needs the
    `flash-attn` package (a ROCm build on AMD), and without it LLaMA-Factory silently falls back; measured on
    an H200, eager vs SDPA made no difference at Alpaca lengths (knowledge/h200_measurements.md). So `sdpa`
    is the one value that is valid and flash-backed on every GPU target; `auto` would pick it too, except
    for a few models LLaMA-Factory special-cases.
    """
    return "sdpa"


class InvalidChoice(Rule):
    code = "LF003"
    name = "invalid-choice"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "A value outside the field's choices (flash_attn, stage, optim, ...)"
    why = (
        "On the command line argparse rejects it at once. From YAML, `parse_dict` does not check Enum/Literal "
        "fields, so `flash_attn: true` or `flash_attn: Fa` *passes* the parser and the run dies later, at model "
        "load, after the dataset has been tokenised; HF's own enums (`optim`, `lr_scheduler_type`, strategies) "
        "fail at once. `flash_attn` was a boolean only until LLaMA-Factory 0.6 (2024-04); it is now one of "
        "auto, disabled, sdpa, fa2, fa3."
    )
    fails_when = "YAML: at model load for `flash_attn` (measured 16.2 s into a run), at start-up for HF enums."
    evidence = (
        "llamafactory 0.9.5 model/model_utils/attention.py L86: `NotImplementedError: Unknown attention type`",
        "measured: `flash_attn: true` fails 16.2 s after start on an H200 (knowledge/h200_measurements.md)",
        "transformers 5.6.0 hf_argparser.py: choices for Enum/Literal fields (`invalid choice`, exit 2)",
        "llamafactory commit c3c0efbaa (2025-04-07): quantization_method `bitsandbytes` renamed `bnb`",
    )
    example = "flash_attn: true        ->  flash_attn: sdpa\n--flash_attn Fa         ->  --flash_attn sdpa"
    fix_safety = (
        "Safe: a different case of a valid value (`FA2`), and renamed values with the same meaning "
        "(`bitsandbytes` -> `bnb`, `flash_attention_2` -> `fa2`, `off`/`eager` -> `disabled`). Unsafe: `true`/`Fa` "
        "for flash_attn (-> `sdpa`, the flash-backed attention available on every target without an extra "
        "package; choose `fa2` yourself if a flash-attn build is installed), and did-you-mean guesses."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        fields = fields_for(ctx)
        for entry in top_entries(src):
            spec = fields.get(entry.key)
            if spec is None or spec.choices is None:
                continue
            node = entry.node
            if src.kind == Kind.LF_CLI:
                if node.raw is None:
                    continue
                ok, _, error = schema.argparse_convert(spec, node.raw)
                if ok:
                    continue
                message = f"argparse rejects `--{entry.key} {node.raw}` at once (exit 2): {error}"
                shown = node.raw
            else:
                value = node.value
                if value in spec.choices or (value is None and spec.nullable):
                    continue
                if isinstance(value, list) and all(v in spec.choices for v in value):
                    continue
                shown = src.document.text[node.start : node.end] or repr(value)
                where = FAILS_AT.get(entry.key, "the run fails where the value is used")
                passes = (
                    "passes the parser, then " if entry.key in ("flash_attn", "stage", "quantization_method") else ""
                )
                message = (
                    f"`{entry.key}: {shown}` is not one of {', '.join(map(str, spec.choices))}; "
                    f"in {LF} it {passes}{where}"
                )
            yield self.at_entry(ctx, entry, message, on="value", fix=self._fix(ctx, entry, spec, shown))

    def _fix(self, ctx: Context, entry: Entry, spec: schema.FieldSpec, shown: str):
        src = ctx.source
        text = str(shown).strip().strip("'\"")
        choices = [str(c) for c in spec.choices or ()]
        low = text.lower()
        for choice in choices:
            if choice.lower() == low:
                return self.fix(f"Use `{choice}`", edits.replace_value(src, entry, choice), safe=True)
        alias = SAFE_ALIASES.get(entry.key, {}).get(low)
        if alias is not None and alias in choices:
            return self.fix(f"Use `{alias}`", edits.replace_value(src, entry, alias), safe=True)
        if entry.key == "flash_attn":
            if low in FLASH_INTENT or low in ("fa3",):
                target = ctx.settings.target
                value = flash_attn_for(target)
                where = target.name if target.stated else "NVIDIA and AMD GPUs"
                return self.fix(
                    f"Use `{value}` (flash-backed SDPA on {where}; `fa2` needs the flash-attn package)",
                    edits.replace_value(src, entry, value),
                    safe=False,
                )
            if low in ("false", "no"):
                return self.fix(
                    "Use `auto` (the default attention, SDPA)",
                    edits.replace_value(src, entry, "auto"),
                    safe=False,
                )
        guess = suggest.closest(text, choices, cutoff=0.6)
        if guess:
            return self.fix(f"Use `{guess}`", edits.replace_value(src, entry, guess), safe=False)
        return None
