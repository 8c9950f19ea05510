"""The DeepSpeed JSON as the same `cfgopt fix --unsafe-fixes` run leaves it: without the offload blocks its own
findings remove (MEM002: every config reading it fits without them; PF051: a LoRA run's optimizer offload).

The speed plan and MEM003 judge a lower ZeRO stage, and the plan its other knobs, on that JSON rather than on the JSON
as written: the fixes that change memory are planned together, and the figure the plan states is that of the files
the user gets (a Qwen2.5-7B full SFT on 16 x H100 was planned at 36 GiB with `offload_optimizer` kept, which MEM002
removed in the same run: `cfgopt estimate` of the result said 42.4 GiB required).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from cfgopt.job.job import Job
    from cfgopt.memory.result import MemoryEstimate

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


class FixedJson(NamedTuple):
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
    return FixedJson(without(ds, [block for _, block in removed]), removed)


def removed_words(removed: list[tuple[str, str]], blocks: tuple[str, ...] = OFFLOADS) -> str:
    """The offloads removed among `blocks`, as a message says them: "`offload_optimizer` removed (MEM002)"."""
    named = [f"`{block}` removed ({code})" for code, block in removed if block in blocks]
    return " and ".join(named)
