from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import TRIGGERS, counted, measured
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, report
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_int

# Padding above this share of a micro-batch's tokens is compute spent on nothing worth a change of config.
PADDING_SHARE = 0.30


class PaddingWaste(Rule):
    code = "PF016"
    name = "padding-waste"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    triggers = TRIGGERS
    summary = "Without packing, a large share of each micro-batch is padding (measured on the local dataset)"
    why = (
        "Confidence: measured padding share on the job's own data (micro-batches drawn at random, as the shuffled "
        "sampler draws them, padded to their longest sample and a multiple of 8 as LLaMA-Factory's collator "
        "pads); the time lost is close to that share with flash attention's varlen path off, less with it. "
        "PF006 advises packing from a prior; this rule states the dataset's own figure. Info: packing changes "
        "which samples attend together (neat_packing prevents it) and the optimizer step count."
    )
    fails_when = "Never fails: slower."
    evidence = ("llamafactory 0.9.5 train/sft/workflow.py L65 (pad_to_multiple_of=8)",)
    example = "packing: false   (41% padding at micro-batch 4)  ->  packing: true"
    fix_safety = "No fix here: PF006 and the speed plan carry the packing fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        found = measured(ctx)
        if found is None:
            return
        profile, cutoff, job = found
        micro = job.value("per_device_train_batch_size")
        if job.packing or not is_int(micro) or micro < 2:
            return
        from cfgopt.job.data_lengths import padding

        pad = padding(profile, cutoff, micro)
        if pad.share < PADDING_SHARE:
            return
        yield report(
            self,
            ctx,
            ("per_device_train_batch_size", "packing"),
            f"without packing, {pad.share:.0%} of the tokens of a micro-batch of {micro} are padding on "
            f"{profile.describe()} (longest sequence per micro-batch {pad.expected_longest:.0f} tokens on average); "
            f"packing: true would fill them ({counted(profile)})",
        )
