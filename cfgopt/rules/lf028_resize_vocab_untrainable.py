from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity


class ResizeVocabUntrainable(Rule):
    code = "LF028"
    name = "resize-vocab-untrainable"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"resize_vocab"})
    summary = "LoRA with `resize_vocab` but no `additional_target`: the new token embeddings are never trained"
    why = (
        "Confidence: certain. `resize_vocab` adds rows to the embedding and output layers; under LoRA those layers "
        "are frozen unless they are listed in `additional_target` (e.g. `embed_tokens,lm_head`), so the added "
        "tokens keep their initial embeddings. LLaMA-Factory only logs a reminder."
    )
    fails_when = "Never fails: the added tokens stay untrained."
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py L424-433 ('Remember to add embedding layers to `additional_target`')",
    )
    example = "resize_vocab: true   ->  add additional_target: embed_tokens,lm_head"
    fix_safety = "No fix: the module names depend on the model."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or value_of(ctx, "finetuning_type") != "lora":
            return
        entry = entry_of(ctx, "resize_vocab")
        if entry is None or not entry.node.value:
            return
        if value_of(ctx, "quantization_bit") is not None or value_of(ctx, "additional_target") is not None:
            return
        yield self.at_entry(
            ctx,
            entry,
            "`resize_vocab` under LoRA without `additional_target`: the new token embeddings stay frozen (add e.g. "
            "`additional_target: embed_tokens,lm_head`)",
        )
