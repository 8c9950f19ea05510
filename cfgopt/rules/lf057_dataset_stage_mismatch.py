from __future__ import annotations

from collections.abc import Iterator

from cfgopt.job.data_location import LocalData, NotLocal, dataset_info, dataset_names
from cfgopt.knowledge.methods import RANKING_STAGES, STAGES
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import LAUNCH_FOLDER, TRIGGERS, launch_severity
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, is_set, is_train_group, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity

NOT_APPLICABLE = "The dataset is not applicable in the current training stage."  # data/loader.py L179


class DatasetStageMismatch(Rule):
    code = "LF057"
    name = "dataset-stage-mismatch"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = TRIGGERS
    summary = "A ranking dataset for a stage that reads none (sft, kto, pt, ppo), or the reverse for rm / dpo"
    why = (
        "Confidence: certain. LLaMA-Factory refuses, for each dataset it loads (`dataset` and `eval_dataset`), a "
        'dataset without `"ranking": true` in dataset_info.json for the rm stage, and one with it for every '
        "other; DPO loads its data as rm, KTO as kto. So a DPO config turned into KTO or SFT by changing `stage` "
        "alone, or DPO on an instruction dataset, stops at data loading. The flag is read as LLaMA-Factory reads "
        "it: only JSON `true` and `false` (absent is false) count. Not judged with `tokenized_path`, which may "
        f"load saved data instead. {LAUNCH_FOLDER}"
    )
    fails_when = "At data loading, after start-up and before the dataset is tokenised and the model loaded."
    evidence = (
        "llamafactory 0.9.5 data/loader.py L178-179 (`_get_merged_dataset`); data/parser.py L74 (`ranking`, "
        "default False)",
        'llamafactory 0.9.5 train/dpo/workflow.py L45 (`stage="rm"`), train/kto/workflow.py L45 (`stage="kto"`)',
        "llamafactory 0.9.5 data/loader.py L287-297: a `tokenized_path` holding saved data returns before it",
    )
    example = "stage: kto, dataset: dpo_en_demo (ranking)  ->  a KTO dataset (kto_tag), or stage: dpo"
    fix_safety = "No fix: which of the stage and the dataset is wrong is yours to say."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        found = ctx.job.data_location
        stage = value_of(ctx, "stage")
        if not (is_train_group(ctx) and isinstance(found, LocalData)) or stage not in STAGES:
            return
        if is_set(ctx, "tokenized_path"):
            return  # saved data may be loaded instead: the check never runs
        info = dataset_info(found.folder)
        if isinstance(info, NotLocal):
            return
        severity, where = launch_severity(found)
        for key in ("dataset", "eval_dataset"):
            for name in dataset_names(value_of(ctx, key)):
                entry = info.get(name)
                ranking = entry.get("ranking", False) if isinstance(entry, dict) else None
                if not _refused(stage, ranking):
                    continue
                yield report(self, ctx, (key,), _message(name, stage, ranking) + where, severity=severity)


def _refused(stage: str, ranking: object) -> bool:
    """LLaMA-Factory's own test, with its identity comparisons: `ranking is False` for rm, `is True` otherwise."""
    loads_as = "rm" if stage in RANKING_STAGES else stage
    return (loads_as == "rm" and ranking is False) or (loads_as != "rm" and ranking is True)


def _message(name: str, stage: str, ranking: object) -> str:
    kind = (
        'a ranking dataset (`"ranking": true`)' if ranking is True else 'not a ranking dataset (no `"ranking": true`)'
    )
    reads = (
        f"stage {stage} reads ranking data" + (" (it loads its data as rm)" if stage == "dpo" else "")
        if stage in RANKING_STAGES
        else f"stage {stage} reads none"
    )
    return (
        f"`{name}` is {kind} in dataset_info.json and {reads}: LLaMA-Factory stops at data loading with "
        f"`{NOT_APPLICABLE}`"
    )
