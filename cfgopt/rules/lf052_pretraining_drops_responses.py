from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import profile_of
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, first_entry
from cfgopt.text.diagnostics import Diagnostic, Severity

DROPPED_SHARE = 0.10  # below it, what is dropped is the template allowance and stray short fields


class PretrainingDropsResponses(Rule):
    code = "LF052"
    name = "pretraining-drops-responses"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"stage=pt"})
    summary = "`stage: pt` on instruction or chat data: only each sample's first prompt is trained on"
    why = (
        "Confidence: certain for the files as they are. Pre-training reads one text per sample: "
        "`PretrainDatasetProcessor` takes the first message of the converted prompt (`_prompt[0]`), which for "
        "an alpaca entry is its instruction and input (or its history's first prompt), for a sharegpt entry "
        "the first user turn. Responses (`output`, the assistant turns) and every later turn are dropped, "
        "silently: the run trains, on the questions alone. Pre-training data is an entry whose columns map "
        'one text column (`"columns": {"prompt": "text"}`, as the stock `c4_demo`); instruction data '
        "is trained with `stage: sft`. Judged on the job's local data (dataset_info.json and its files), in "
        "tokens."
    )
    fails_when = "Never fails: the model learns the prompts and never the answers."
    evidence = (
        "llamafactory v0.9.2-v0.9.5 src/llamafactory/data/processor/pretrain.py L30 and v0.9.0 / v0.9.1 "
        'data/processors/pretrain.py L33: `messages[0]["content"] for messages in examples["_prompt"]`',
        "llamafactory 0.9.5 data/converter.py L87-124 (alpaca: history, then prompt + query as one user turn)",
    )
    example = "stage: pt, dataset: alpaca_en_demo   ->  stage: sft (or a dataset of one text column)"
    fix_safety = "No fix: sft, or other data, is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = first_entry(ctx, "stage")
        profile = profile_of(ctx)
        if entry is None or entry.node.value != "pt" or profile is None or not profile.samples:
            return
        total = sum(s.prompt + s.response for s in profile.samples)
        kept = sum(s.turns[0][0] for s in profile.samples if s.turns)
        if total <= 0 or (total - kept) / total < DROPPED_SHARE:
            return
        share = (total - kept) / total
        yield self.at_entry(
            ctx,
            entry,
            f"`stage: pt` on {profile.describe()}: pre-training reads only each sample's first prompt "
            f"(`_prompt[0]`), so about {share:.0%} of the data's tokens (responses, later turns) are never "
            "trained on; train instruction data with `stage: sft`, or map one text column "
            '(`"columns": {"prompt": "text"}`)',
            on="value",
        )
