from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, is_train_group, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

# The transformers each LLaMA-Factory release requires (its requirements.txt): both above S^2-Attn's < 4.48.
TRANSFORMERS_REQUIRED = {"0.9.4": ">=4.49", "0.9.5": ">=4.55"}


class ShiftAttnUnusable(Rule):
    code = "LF025"
    name = "shift-attn-unusable"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"shift_attn"})
    summary = "`shift_attn: true` (LongLoRA S^2-Attn) cannot work with the transformers LLaMA-Factory 0.9.5 needs"
    why = (
        "Confidence: certain. S^2-Attn patches llama's attention classes and first demands "
        "`transformers>=4.45.0,<4.48.0` (a mandatory check), while LLaMA-Factory 0.9.5 requires transformers "
        ">=4.55. On a llama model the run stops at model load; on any other model it logs 'Current model does not "
        "support shift short attention' and does nothing. An error when the model name says llama, else a warning."
    )
    fails_when = (
        "Training a llama model: at model load (after tokenisation), "
        "`ImportError: transformers>=4.45.0,<4.48.0 is required`."
    )
    evidence = (
        "llamafactory 0.9.5 model/model_utils/longlora.py L352-353, L359-370",
        "llamafactory 0.9.4 requirements.txt (`transformers>=4.49.0,<=4.57.1`)",
        "llamafactory 0.9.5 extras/constants.py L119 (`SUPPORTED_CLASS_FOR_S2ATTN = {'llama'}`)",
    )
    example = "shift_attn: true   ->  (removed)"
    fix_safety = "Safe: the option cannot take effect with a supported transformers version."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "shift_attn")
        if entry is None or not entry.node.value or not is_train_group(ctx):
            return
        model = str(value_of(ctx, "model_name_or_path") or "").lower()
        llama = "llama" in model and "llama4" not in model.replace("-", "")
        fails = llama and training(ctx)
        needs = TRANSFORMERS_REQUIRED.get(ctx.settings.llamafactory_version, ">=4.49")
        message = (
            "`shift_attn: true` on a llama model: model load stops with `ImportError: transformers>=4.45.0,<4.48.0 "
            f"is required` ({ctx.lf_label} needs transformers{needs})"
            if fails
            else f"`shift_attn: true` cannot take effect: S^2-Attn needs transformers<4.48 ({ctx.lf_label} needs "
            f"{needs}) and supports llama only; on a llama model training stops at model load"
        )
        yield self.at_entry(
            ctx,
            entry,
            message,
            severity=Severity.ERROR if fails else None,
            fix=self.fix("Remove `shift_attn`", edits.delete_entry(ctx.source, entry), safe=True),
        )
