from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import counted, measured
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, first_entry
from cfgopt.text.diagnostics import Diagnostic, Severity

# cutoff_len at least this many times the longest sample: the stated length says nothing of the run's sequences
FAR_ABOVE = 4


class CutoffFarAboveData(Rule):
    code = "LF046"
    name = "cutoff-far-above-data"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    triggers = frozenset({"cutoff_len"})  # the default (2048) is no choice the user made
    summary = "`cutoff_len` is several times the longest sample of the local dataset"
    why = (
        "Confidence: measured on the job's own data (its longest rows are always measured, sampled or not). "
        "Without packing the collator pads each batch to its longest sample, so the run does not pay for the "
        "unused length; with packing, packs of `cutoff_len` tokens hold many samples (longer attention spans, "
        "fewer optimizer steps). Either way the config states a length no sequence reaches, and sizing memory "
        "or a plan by it overstates both. Info: nothing is wrong with the run."
    )
    fails_when = "Never fails."
    evidence = ("llamafactory 0.9.5 data/collator.py (pads to the longest in the batch)",)
    example = "cutoff_len: 8192   (longest sample 562 tokens)  ->  cutoff_len: 1024"
    fix_safety = "No fix: the length is the user's statement of intent (future data may be longer)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        found = measured(ctx)
        entry = first_entry(ctx, "cutoff_len")
        if found is None or entry is None:
            return
        profile, cutoff, job = found
        from cfgopt.job.data_lengths import lengths

        longest = lengths(profile, cutoff).longest
        if longest < 1 or cutoff < FAR_ABOVE * longest:
            return
        packed = " (packing: each pack holds several samples)" if job.packing else ""
        yield self.at_entry(
            ctx,
            entry,
            f"`cutoff_len: {cutoff}` is {cutoff / longest:.1f}x the longest sample of {profile.describe()} "
            f"({longest} tokens){packed}: no sequence reaches it ({counted(profile)})",
        )
