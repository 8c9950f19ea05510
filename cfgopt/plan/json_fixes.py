"""The DeepSpeed JSON as the same `cfgopt fix --unsafe-fixes` run leaves it: without the offload blocks its own
findings remove (MEM002: every config reading it fits without them; PF051: a LoRA run's optimizer offload).

The speed plan and MEM003 judge a lower ZeRO stage, and the plan its other knobs, on that JSON rather than on the JSON
as written: the fixes that change memory are planned together, and the figure the plan states is that of the files
the user gets (a Qwen2.5-7B full SFT on 16 x H100 was planned at 36 GiB with `offload_optimizer` kept, which MEM002
removed in the same run: `cfgopt estimate` of the result said 42.4 GiB required).

None of them edits a JSON that a config not judged in the run reads (`readers_left_out`: a config of the project that
names it and was not given, as a pre-commit run gives only the changed files): the edit would change that job unjudged
(`cfgopt.project.json_readers`). The plan also keeps a JSON another config of the run reads (`json_kept_for`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from cfgopt.text.document import real_path
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.job.job import Job
    from cfgopt.memory.result import MemoryEstimate
    from cfgopt.text.source import Source

# MEM002's order: the optimizer states first (their CPU step is what offload slows most), then the parameters, each
# judged with the blocks removed before it
OFFLOADS = ("offload_optimizer", "offload_param")


def offloaded(ds: dict[str, Any], block: str) -> bool:
    """Does `zero_optimization.<block>` move something to the host (device cpu or nvme)?"""
    zero = ds.get("zero_optimization")
    value = zero.get(block) if isinstance(zero, dict) else None
    return isinstance(value, dict) and value.get("device") in ("cpu", "nvme")


def without(ds: dict[str, Any], blocks: list[str]) -> dict[str, Any]:
    """The DeepSpeed config with these `zero_optimization` blocks removed (a new dict; `ds` is left as it is)."""
    zero = ds.get("zero_optimization")
    if not blocks or not isinstance(zero, dict):
        return ds
    return {**ds, "zero_optimization": {k: v for k, v in zero.items() if k not in blocks}}


def unneeded_offloads(
    jobs: list[Job], ds: dict[str, Any], stage: int | None, n: int
) -> Iterator[tuple[str, list[MemoryEstimate]]]:
    """MEM002's judgment: each offload block of `ds` (at ZeRO `stage`) that every job of `jobs`, the configs that read
    it, runs without on `n` GPUs within the memory headroom; yields (block, each job's estimate without it). Each is
    judged with the blocks yielded before it removed too, so the JSON without all of them fits. `offload_param` counts
    only at stage 3, and a LoRA run's optimizer offload is PF051's (it needs no estimate)."""
    if not jobs or not stage:
        return
    lora_only = all(j.value("finetuning_type") == "lora" for j in jobs)
    removed: list[str] = []
    for block in OFFLOADS:
        if not offloaded(ds, block) or (block == "offload_param" and stage != 3):
            continue
        if block == "offload_optimizer" and lora_only:
            continue  # PF051: nothing worth offloading, whatever the model
        estimates = [j.estimate(n, deepspeed=without(ds, [*removed, block])) for j in jobs]
        if any(e is None or not e.fits_with_headroom() for e in estimates):
            continue
        removed.append(block)
        yield block, estimates


class FixedJson(Record):
    """The job's DeepSpeed config as the run's own fixes of its JSON leave it, and what they remove."""

    deepspeed: dict[str, Any] | None
    removed: list[tuple[str, str]]  # (rule code, block): `offload_optimizer` by MEM002, ...


def json_as_fixed(job: Job, n: int) -> FixedJson:
    """The job's DeepSpeed config on `n` GPUs without the offloads MEM002 and PF051 remove from its JSON (where they are
    selected and fixable for it), judged for this job alone: where another config reads the JSON too, MEM002 removes
    an offload only if that one fits as well, so this may count an offload as gone that stays (a higher estimate, the
    safe side). As written for a DeepSpeed config that is no JSON file the run reads."""
    key = f"json_as_fixed:{n}"
    if key not in job.memo:
        job.memo[key] = _json_as_fixed(job, n)
    return job.memo[key]


def _json_as_fixed(job: Job, n: int) -> FixedJson:
    _, ds = job.deepspeed
    src = job.deepspeed_source
    if ds is None or src is None or ds is not src.data:
        return FixedJson(ds, [])
    settings, path = job.settings, src.document.path

    def removes(code: str) -> bool:
        return settings.is_selected(code) and settings.is_fixable(code) and not settings.ignored_in_file(path, code)

    stage = job.zero_stage
    removed = [("MEM002", block) for block, _ in unneeded_offloads([job], ds, stage, n)] if removes("MEM002") else []
    lora = job.value("finetuning_type") == "lora"
    if removes("PF051") and lora and stage and offloaded(ds, "offload_optimizer"):
        removed.append(("PF051", "offload_optimizer"))
    if removed and readers_left_out(job):
        return FixedJson(ds, [])  # MEM002 / PF051 leave it as it is: a config outside the run reads it
    return FixedJson(without(ds, [block for _, block in removed]), removed)


def readers_left_out(job: Job) -> str:
    """Why no fix may edit the job's DeepSpeed JSON, in words: the configs of the project that read it and are not
    in the run ("" where there are none; `cfgopt.project.json_readers`, searched once per JSON and run). Asked only
    where an edit of the JSON is about to be made."""
    src = job.deepspeed_source
    if src is None:
        return ""
    return json_readers_words(src, [job.source, *job.deepspeed_consumers], job, job.path.parent)


def json_readers_words(json_src: Source, readers: list[Source], job: Job, folder: Path) -> str:
    """The words of `readers_left_out` for `json_src`, read by `readers` in the run, each reader named relative to
    `folder` (that of the file the words are said on). `job`: one of the readers' jobs, whose settings read a launch
    line; the search marks it as looked at, so that its plan is not shared with another run."""
    from cfgopt.project.json_readers import outside_readers

    job.memo[JSON_READERS_LOOKED_AT] = True
    found = outside_readers(json_src, readers, job.settings.lf_schema)
    if found.stopped:
        return f"not every config that may read it was looked at ({found.stopped})"
    if not found.found:
        return ""
    names = [relative_to(p, folder) for p in found.found[:_NAMED]]
    more = f" and {len(found.found) - _NAMED} more" if len(found.found) > _NAMED else ""
    one = len(found.found) == 1
    return (
        f"{', '.join(names)}{more} {'reads' if one else 'read'} it too and {'is' if one else 'are'} not in this run "
        f"(name {'it' if one else 'them'} as well, or the folder, so that every job reading it is judged)"
    )


def relative_to(path: Path, folder: Path) -> str:
    """A reader as a message names it: relative to the folder of the file the message is on (the same words from
    any current folder), as ENV004 names a requirement file's config."""
    return Path(os.path.relpath(real_path(path), real_path(folder))).as_posix()


_NAMED = 3  # readers named in a message; the others counted
# set in a job's memo once its JSON's readers were looked for: its plan depends on files outside the run
JSON_READERS_LOOKED_AT = "json_readers_looked_at"


def json_kept_for(job: Job) -> str:
    """Why the speed plan leaves the job's DeepSpeed JSON at its stage ("" where it may write it): another config of
    the run reads it, it has other hard links (a config may read it under another name), or a config outside the
    run reads it (`readers_left_out`). An edit would change those jobs too."""
    from cfgopt.text.writer import hard_linked

    src = job.deepspeed_source
    if src is None:
        return ""
    other = next((c for c in job.deepspeed_consumers if c is not job.source), None)
    if other is not None:
        named = relative_to(other.document.path, job.path.parent)
        return f"{named} reads it too (the edit would change that job as well)"
    if hard_linked(src.document.path):
        return "it has other hard links (a config may read it under another name, and the edit would change it too)"
    return readers_left_out(job)


def removed_words(removed: list[tuple[str, str]], blocks: tuple[str, ...] = OFFLOADS) -> str:
    """The offloads removed among `blocks`, as a message says them: "`offload_optimizer` removed (MEM002)"."""
    named = [f"`{block}` removed ({code})" for code, block in removed if block in blocks]
    return " and ".join(named)
