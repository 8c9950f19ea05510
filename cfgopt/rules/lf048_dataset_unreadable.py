from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import LAUNCH_FOLDER, TRIGGERS, launch_severity, profile_of
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, report
from cfgopt.text.diagnostics import Diagnostic, Severity


class DatasetUnreadable(Rule):
    code = "LF048"
    name = "dataset-unreadable"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = TRIGGERS
    summary = "A local dataset is empty, missing, not in dataset_info.json, or cannot be read"
    why = (
        "Confidence: certain where LLaMA-Factory's code stops, likely where cfgopt's reader does. cfgopt found the "
        "job's `dataset_info.json` and read each dataset's files as LLaMA-Factory does: a name not in it stops "
        "LLaMA-Factory (`Undefined dataset`), as do a file or folder that is not there (`File ... not found.`), a "
        "`columns` / `tags` block that is no object, and a file with no rows (`datasets.load_dataset`: "
        '`Instruction "train" corresponds to no data!`). A file cfgopt cannot parse is a warning: `datasets` '
        "reads some that cfgopt's reader does not (a pretty-printed object, a JSON line broken over two lines), "
        f"and so is a column name that is not a string (it fails only where the converter reads it). {LAUNCH_FOLDER}"
    )
    fails_when = (
        "At data loading, after start-up and before the model loads (`Undefined dataset`, `File ... not found.`, "
        "no data), or where the file's rows are parsed."
    )
    evidence = (
        "llamafactory 0.9.5 data/parser.py L125-126 (`Undefined dataset`), L108-113 (`Cannot open ...`)",
        "llamafactory 0.9.5 data/loader.py L73-89 (local files; L82 `File {} not found.`)",
        "datasets 4.0.0 (LLaMA-Factory 0.9.5 allows 2.16.0-4.0.0) `load_dataset(..., split='train')` on a file "
        'with no rows: `Instruction "train" corresponds to no data!` (run on `[]`, a CSV header alone, blank JSON '
        "lines); on an empty file: `DatasetGenerationError`",
        "cfgopt/rules/lf005_deepspeed_config_not_found.py: the same launch-folder assumption",
    )
    example = "dataset: my_data   (data/my_data.json is empty)  ->  fill the file or fix dataset_info.json"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        profile = profile_of(ctx)
        if profile is None:
            return
        stops, where = launch_severity(ctx.job.data_location)
        for problem in profile.problems:
            severity = stops if problem.stops else Severity.WARNING
            message = f"{problem.text} (dataset_dir: {ctx.job.value('dataset_dir')}{where if problem.stops else ''})"
            yield report(self, ctx, ("dataset",), message, severity=severity)
