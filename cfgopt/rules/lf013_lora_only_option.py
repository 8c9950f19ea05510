from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

LORA_ONLY = {
    "loraplus_lr_ratio": "`loraplus_lr_ratio` is only valid for LoRA training.",
    "use_rslora": "`use_rslora` is only valid for LoRA training.",
    "use_dora": "`use_dora` is only valid for LoRA training.",
    "pissa_init": "`pissa_init` is only valid for LoRA training.",
}


class LoraOnlyOption(Rule):
    code = "LF013"
    name = "lora-only-option"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"loraplus_lr_ratio", "use_rslora", "use_dora", "pissa_init", "use_llama_pro"})
    summary = "A LoRA-only option (`use_dora`, `use_rslora`, `loraplus_lr_ratio`, `pissa_init`) with another method"
    why = (
        "Confidence: certain. FinetuningArguments.__post_init__ refuses LoRA+, rsLoRA, DoRA and PiSSA unless "
        "`finetuning_type: lora`, refuses `use_llama_pro` with full tuning, and refuses PiSSA for the ppo/kto "
        "stages and for DPO with a reference model (every `pref_loss` but orpo/simpo). These typically appear "
        "when a LoRA config is turned into a full or freeze one by changing `finetuning_type` only."
    )
    fails_when = "At start-up (FinetuningArguments), before data or model load."
    evidence = ("llamafactory 0.9.5 hparams/finetuning_args.py L574 (use_ref_model), L592-615",)
    example = "finetuning_type: full\nuse_dora: true   ->  remove use_dora"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        ftype = value_of(ctx, "finetuning_type")
        if not isinstance(ftype, str):
            return
        if ftype != "lora":
            for key, message in LORA_ONLY.items():
                entry = entry_of(ctx, key)
                value = None if entry is None else entry.node.value
                if value is None or (key != "loraplus_lr_ratio" and not value):
                    continue
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{key}` with `finetuning_type: {ftype}`: LLaMA-Factory stops at start-up with `{message}`",
                )
        if ftype == "full":
            entry = entry_of(ctx, "use_llama_pro")
            if entry is not None and entry.node.value:
                yield self.at_entry(
                    ctx,
                    entry,
                    "`use_llama_pro` with full tuning: LLaMA-Factory stops at start-up with "
                    "`use_llama_pro` is only valid for Freeze or LoRA training.`",
                )
        pissa = entry_of(ctx, "pissa_init")
        if pissa is not None and pissa.node.value and ftype == "lora":
            stage = value_of(ctx, "stage")
            ref_model = stage == "dpo" and value_of(ctx, "pref_loss") not in ("orpo", "simpo")
            if stage in ("ppo", "kto") or ref_model:
                yield report(
                    self,
                    ctx,
                    ("pissa_init",),
                    f"`pissa_init` with stage {stage}: LLaMA-Factory stops at start-up with `Cannot use PiSSA "
                    "for current training "
                    "stage.`",
                )
