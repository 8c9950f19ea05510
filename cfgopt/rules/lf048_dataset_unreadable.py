from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import TRIGGERS, profile_of
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, report
from cfgopt.text.diagnostics import Diagnostic, Severity


class DatasetUnreadable(Rule):
    code = "LF048"
    name = "dataset-unreadable"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = TRIGGERS
    summary = "A local dataset is empty, missing, not in dataset_info.json, or cannot be read"
    why = (
        "Confidence: likely. cfgopt found the job's `dataset_info.json` (in the current folder's `dataset_dir`, "
        "else beside the config or above it) and read each dataset's files as LLaMA-Factory does: a name not in "
        "it stops LLaMA-Factory at start-up, a file that does not parse stops `datasets.load_dataset`, and an "
        "empty file trains on nothing. A warning, not an error: the launch folder, and so the `dataset_dir` "
        "the run reads, is an assumption (docs/architecture.md, cross-file linking)."
    )
    fails_when = "At data loading (`Undefined dataset`, a JSON parse error), or trains on no rows."
    evidence = (
        "llamafactory 0.9.5 data/parser.py L120-121 (`Undefined dataset`)",
        "llamafactory 0.9.5 data/loader.py L73-89 (local files)",
    )
    example = "dataset: my_data   (data/my_data.json is empty)  ->  fill the file or fix dataset_info.json"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        profile = profile_of(ctx)
        if profile is None:
            return
        for problem in profile.problems:
            yield report(self, ctx, ("dataset",), f"{problem} (dataset_dir: {ctx.job.value('dataset_dir')})")
