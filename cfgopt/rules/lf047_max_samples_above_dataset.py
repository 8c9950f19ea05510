from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import profile_of
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, first_entry
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_int


class MaxSamplesAboveDataset(Rule):
    code = "LF047"
    name = "max-samples-above-dataset"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    triggers = frozenset({"max_samples"})
    summary = "`max_samples` is at least the local dataset's size: it limits nothing"
    why = (
        "Confidence: certain for the files as they are. LLaMA-Factory keeps `min(max_samples, len(dataset))` rows "
        "of each dataset, so a limit above every dataset's size changes nothing; it is a limit meant for other "
        "data, or a leftover that will cut the dataset once it grows."
    )
    fails_when = "Never fails."
    evidence = ("llamafactory 0.9.5 data/loader.py L157-159",)
    example = "max_samples: 100000   (dataset of 1090 rows)  ->  (removed)"
    fix_safety = "No fix: whether the limit is meant for larger data is the user's call."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        profile = profile_of(ctx)
        entry = first_entry(ctx, "max_samples")
        if profile is None or entry is None or ctx.job.on("streaming") or profile.problems or not profile.rows:
            return
        value = entry.node.value
        if not is_int(value) or value < profile.rows:
            return
        yield self.at_entry(
            ctx,
            entry,
            f"`max_samples: {value}` is at least the {profile.rows} rows of {', '.join(profile.datasets)}: it "
            "limits nothing (LLaMA-Factory keeps min(max_samples, rows) of each dataset)",
        )
