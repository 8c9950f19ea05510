"""The machine `cfgopt tune` runs on: the job judged for it, its assets, one measured run, the memory check.

`RealSession` runs each candidate through `cfgopt.verify.runner.run_config` with assets prepared once (the
children run the trainer; this process imports nothing heavy); the tests give the command a fake `Session`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cfgopt.environment import probe
from cfgopt.job.job import lf_values
from cfgopt.plan import space
from cfgopt.tune import search
from cfgopt.verify.comparison import summarize
from cfgopt.verify.options import default_cache_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Session(Protocol):
        """What the command needs from the machine: the platform, assets, one run, the memory check. A shape for
        the type checker alone (nothing checks it at run time): `RealSession` and the tests' sessions match it."""

        def platform(self) -> space.Platform: ...
        def prepare(self) -> None: ...
        def asset_id(self) -> str: ...
        def measure(self, candidate: search.Candidate) -> search.Measurement: ...
        def fits(self) -> search.Fits: ...


def measurement_from(result: Any, warmup: int) -> search.Measurement:
    """A verify RunResult as the search sees it: verify's own figure (`comparison.summarize`: real tokens/s of the
    steady steps, at least `warmup` steps left out, an impossible count refused as an error), peak memory."""
    metrics = result.metrics or {}
    steps = metrics.get("steps") or []
    summary = summarize(metrics, min_warmup=warmup) if steps else {}
    error = result.error
    if not error and summary.get("cannot_measure"):
        error = f"cannot measure: {summary['cannot_measure']}"
    if error and not search.is_oom(error) and search.is_oom(result.log_tail):
        error += " (the log says: out of memory)"
    peak = metrics.get("peak_allocated_gib")
    if peak is None:
        peaks = [s["max_allocated_gib"] for s in steps if "max_allocated_gib" in s]
        peak = max(peaks) if peaks else None
    return search.Measurement(
        tokens_per_s=summary.get("real_tokens_per_s") if not error else None,
        peak_gib=peak,
        reserved_gib=metrics.get("peak_reserved_gib"),
        wall_s=result.wall_s,
        error=error,
        device=metrics.get("device"),
        steps_measured=summary.get("steps_measured", 0),
    )


@dataclass
class RealSession:
    """Runs through cfgopt.verify's runner (children: the trainer; the parent imports nothing heavy)."""

    config_path: Path
    config: dict[str, Any]
    work: Path
    steps: int
    warmup: int
    gpus: int
    timeout: float
    mode: str = "auto"
    cache_dir: Path = field(default_factory=default_cache_dir)
    target_name: str | None = None
    margin: float = 0.10
    say: Callable[[str], None] = lambda _line: None
    fill: Callable[..., dict[str, Any]] | None = None  # a config -> the values LLaMA-Factory sees (the job's)
    data_fill: Callable[[dict[str, Any]], float | None] | None = None  # `Job.data_fill`: memory sized by the data
    _assets: Any = None
    _platform: space.Platform | None = None
    notes: list[str] = field(default_factory=list)

    def _relay(self, line: str) -> None:
        if "Error" in line or "out of memory" in line:
            self.say(f"  {line[:300]}")

    def platform(self) -> space.Platform:
        if self._platform is None:
            self._platform = probe.probe_platform()
        return self._platform

    def _plan(self) -> Any:
        from cfgopt.verify import preflight, runner

        if self._assets is None:
            on_cpu = preflight.cpu_only()
            self._assets = runner.plan_assets(self.config, self.config_path, self.mode, self.cache_dir, on_cpu)
        return self._assets

    def prepare(self) -> None:
        from cfgopt.verify.machine import prepare_assets_saying

        prepare_assets_saying(self._plan(), self.cache_dir, self.work, self.timeout, self.say, self._relay)

    def asset_id(self) -> str:
        a = self._plan()
        return json.dumps([str(a.model_dir), a.dataset, a.template, a.model_config], sort_keys=True, default=str)

    def measure(self, candidate: search.Candidate) -> search.Measurement:
        from cfgopt.verify import runner

        label = f"c{candidate.index:03d}"
        result = runner.run_config(
            candidate.config,
            self._plan(),
            self.steps,
            label,
            self.work,
            self.config_path,
            self.gpus,
            self.timeout,
            self._relay,
        )
        if not os.environ.get("CFGOPT_TUNE_KEEP_OUTPUTS"):
            shutil.rmtree(self.work / f"{label}-output", ignore_errors=True)
        return measurement_from(result, self.warmup)

    def fits(self) -> search.Fits:
        from cfgopt.knowledge.model_shapes import shape_for
        from cfgopt.knowledge.targets import TARGETS
        from cfgopt.loaders.model_config import local_model
        from cfgopt.verify import runner

        name = self.target_name or runner.detect_target()
        target = TARGETS.get(name)
        ref = str(self.config.get("model_name_or_path", ""))
        shape = shape_for(ref, local_model(ref, self.config_path.parent))
        assets = self._plan()
        if shape is None and assets.model_dir is not None:
            shape = shape_for(str(assets.model_dir))
        own_data = self.trains_on_job_data()
        data_fill = self.data_fill if own_data else None
        return search.MemoryFits(shape, target, self.gpus, self.margin, self.fill, data_fill, self.platform())

    def trains_on_job_data(self) -> bool:
        """Do the runs train on the job's own local dataset (not a synthetic stand-in)?"""
        return self._plan().dataset_dir is None


def real_session(args: argparse.Namespace, job: Any, work: Path, warmup: int, gpus: int, say, probed) -> Session:
    """The session of a real `cfgopt tune` run, from its options (`probed`: the platform already probed)."""
    return RealSession(
        args.config,
        job.data,
        work,
        args.steps,
        warmup,
        gpus,
        args.timeout,
        mode=args.mode,
        cache_dir=args.cache_dir,
        target_name=args.target,
        margin=args.memory_margin,
        say=say,
        fill=functools.partial(lf_values, lf=job.lf, group=job.group),
        data_fill=job.data_fill,
        _platform=probed,
    )


def load_tune_job(
    args: argparse.Namespace, gpus: int, say, session: Session | None
) -> tuple[Any, space.Platform | None, str]:
    """The job tuned, judged for the target and GPUs the runs use and the packages the machine has, with the
    probed platform; (None, None, why) when the config cannot be read. A given session is asked instead."""
    from cfgopt.job.settings import Settings
    from cfgopt.project.loader import JobError, load_job
    from cfgopt.verify.machine import run_settings, run_target

    if session is None:
        target, source = run_target(args.target)
    else:  # a given session (tests): no detection
        target, source = (None if args.target == "none" else args.target), "--target" if args.target else ""
    if session is None:
        settings, platform = run_settings(target, gpus, say, source)
    else:
        platform = session.platform()
        environment = probe.environment_of(platform)
        settings = Settings(target_name=target, gpus=gpus, environment=environment, target_source=source)
    try:
        return load_job(args.config, settings), platform, ""
    except JobError as exc:
        return None, None, str(exc)
