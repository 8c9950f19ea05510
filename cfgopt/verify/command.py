"""`cfgopt verify CONFIG`: the original config and its fixed version, each run for a few real training steps."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cfgopt.job.job import Job
from cfgopt.job.settings import Settings
from cfgopt.lint.fixer import fix_paths
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.project.loader import JobError, load_job
from cfgopt.project.project import resolve_reference
from cfgopt.text import termination
from cfgopt.text.document import Document, real_path
from cfgopt.text.user_files import read_text_bounded
from cfgopt.text.writer import write_report
from cfgopt.verify import comparison, flops, numerics, processes, runner
from cfgopt.verify.machine import prepare_assets_saying, run_settings, run_target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def say_plan(job: Job, say) -> None:
    """Name the hardware the fixes are planned for, and the speed plan with what it left out."""
    from cfgopt.plan.planner import plan_for
    from cfgopt.plan.wording import description

    say(f"fixes planned for {job.hardware(job.settings.gpus or 1).describe()} (the GPUs these runs use; --gpus)")
    plan = plan_for(job)
    if plan is not None and plan.changed:
        say(description(plan))
    for note in plan.notes if plan is not None else []:
        say(note)


def parameters_from_shape(metrics: dict[str, Any], job: Job, args: dict[str, Any]) -> None:
    """Where the run could not count the parameters (ZeRO-3 partitions them), count them from the model's shape
    (cfgopt.knowledge.model_shapes, the memory model's trainable count), so MFU is still reported; a mixture of
    experts' from the parameters a token passes through (`flops`), the run's arguments `args` saying what trains."""
    if metrics.get("parameters") or not metrics.get("steps"):
        return
    est = job.estimate(job.settings.gpus or 1)
    if est is not None:
        metrics["parameters"], metrics["trainable_parameters"] = est.total_params, est.trainable_params
    elif job.shape is not None:
        metrics["parameters"] = job.shape.num_parameters
    if job.shape is not None:
        counts = (metrics["parameters"], metrics.get("trainable_parameters"))
        metrics.update(flops.shape_token_parameters(job.shape, args, *counts))


def fixed_copy(config: Path, work: Path, settings: Settings) -> tuple[Path, list[str]]:
    """The config (and the DeepSpeed JSON it names) as `cfgopt fix --unsafe-fixes` would leave them, written
    into the work folder; the user's files are not touched."""
    result = fix_paths([config], settings, fix_references=True)  # copies only: the user's files are not written
    out = work / "fixed"
    out.mkdir(parents=True, exist_ok=True)
    key = real_path(config)
    text = result.fixed.get(key, result.originals.get(key) or read_text_bounded(config))
    data = load_yaml(Document.from_bytes(config, text.encode())).data or {}
    new_config = out / config.name
    ds_ref = data.get("deepspeed") if isinstance(data, dict) else None
    if isinstance(ds_ref, str):
        found, _ = resolve_reference(ds_ref, config)
        if found is not None:
            ds_key = real_path(found)
            ds_text = result.fixed.get(ds_key, result.originals.get(ds_key) or read_text_bounded(found))
            (out / found.name).write_text(ds_text)
            text = text.replace(ds_ref, str(out / found.name), 1)
    new_config.write_text(text)
    applied = [d for k, v in result.applied.items() for d in v]
    return new_config, applied


SPREAD_RUN = "original, another seed"


def _wants_spread(args: argparse.Namespace, jobs: dict[str, Job]) -> bool:
    """`--spread on`, or `auto` with a fix that changes the precision or the optimizer (a batch-only change is
    compared smoothed, where the seed's spread is not what decides)."""
    spread = getattr(args, "spread", "auto")
    if "fixed" not in jobs or spread == "off":
        return False
    return spread == "on" or bool(numerics.numerics_changes(jobs["original"].values(), jobs["fixed"].values()))


class _Stop(Exception):
    """A one-line reason the runs cannot be made (exit 2)."""


def _load(path: Path, settings: Settings) -> Job:
    try:
        return load_job(path, settings)
    except JobError as exc:
        raise _Stop(str(exc)) from None


def _fixed_config(args: argparse.Namespace, config_path: Path, work: Path, settings) -> tuple[Path | None, list[str]]:
    """The config to compare with: none (--only-original), the user's (--fixed) or `cfgopt fix`'s."""
    if args.only_original:
        return None, []
    if args.fixed:
        return args.fixed, []
    return fixed_copy(config_path, work, settings)


def _prepare_assets(args: argparse.Namespace, original: dict, config_path: Path, work: Path, say, relay):
    """The offline model and data the runs use (a CPU run in fp32), built in the cache folder."""
    from cfgopt.verify import preflight

    try:
        assets = runner.plan_assets(original, config_path, args.mode, args.cache_dir, on_cpu=preflight.cpu_only())
    except ValueError as exc:
        raise _Stop(str(exc)) from None
    prepare_assets_saying(assets, args.cache_dir, work, args.timeout, say, relay)
    return assets


def _summaries(runs: dict[str, runner.RunResult]) -> dict[str, dict[str, Any]]:
    summaries = {label: comparison.summarize(r.metrics) for label, r in runs.items()}
    for label, r in runs.items():
        if r.error and not summaries[label].get("error"):
            summaries[label]["error"] = r.error
        if r.error:
            summaries[label]["log_tail"] = r.log_tail[-3000:]
    return summaries


def loss_verdict(
    runs: dict[str, runner.RunResult], jobs: dict[str, Job], gpus: int, tolerance: float, on_cpu: bool
) -> dict[str, Any]:
    """The numerics verdict of the two runs (cfgopt.verify.numerics): what each step trained on, from the
    config's values as the run got them, decides whether steps are compared one to one."""
    content = {label: numerics.batch_content({**jobs[label].values(), **runs[label].config}, gpus) for label in jobs}
    differences = numerics.batch_differences(content["original"], content["fixed"])
    spread = runs[SPREAD_RUN].metrics if SPREAD_RUN in runs and not runs[SPREAD_RUN].error else None
    verdict = numerics.compare(
        runs["original"].metrics, runs["fixed"].metrics, differences, tolerance, one_process=gpus == 1, spread=spread
    )
    # the configs as written (a CPU run turns half precision off in both, which is not the fix's change)
    changes = numerics.numerics_changes(jobs["original"].values(), jobs["fixed"].values())
    if changes and verdict.get("method") == "smoothed":
        verdict.setdefault("notes", []).append(numerics.numerics_alone_hint(changes))
    if on_cpu:
        verdict.setdefault("notes", []).append(
            "no GPU: both runs trained in fp32, so a change of precision (pure_bf16, fp16) is not exercised "
            "here, only the fix's other changes"
        )
    return verdict


def _report(
    args: argparse.Namespace, runs: dict[str, runner.RunResult], extra: dict[str, Any], loss: dict[str, Any] | None
) -> int:
    """The comparison table (and --json, --plot); exit 1 when the fix crashes, is slower or its loss diverges."""
    summaries = _summaries(runs)
    before = summaries["original"]
    after = summaries.get("fixed", {})
    verdict = comparison.compare(before, after) if after else {"status": "measured"}
    if loss is not None:
        verdict["loss"] = loss
    print(comparison.table(before, after, verdict))
    extra["per_step"] = {label: r.metrics.get("steps", []) for label, r in runs.items()}
    extra["losses"] = {label: r.metrics.get("losses", []) for label, r in runs.items()}
    if args.json is not None:
        text = comparison.to_json(before, after, verdict, extra)
        if str(args.json) == "-":
            print(text)
        else:
            write_report(args.json, text)
    if args.plot is not None and not comparison.plot(args.plot, {k: r.metrics for k, r in runs.items()}):
        sys.stderr.write("cfgopt verify: matplotlib is not installed; no plot written\n")
    for label, s in summaries.items():
        if s.get("error"):
            sys.stderr.write(f"cfgopt verify: the {label} run crashed: {s['error']}\n")
        if s.get("cannot_measure"):  # a counting bug refused, not a verdict on the fix: exit as `not measured`
            sys.stderr.write(f"cfgopt verify: the {label} run: cannot measure: {s['cannot_measure']}\n")
    if summaries.get("fixed", before).get("error"):
        return 1  # the fix (or, measured alone, the original) crashes; the original crashing is what fixes fix
    code = 0
    if verdict.get("status") == "slower":
        sys.stderr.write(
            f"cfgopt verify: the fixed config is slower ({verdict['speedup']:.2f}x): a rule was wrong here\n"
        )
        code = 1
    if not verdict.get("loss", {}).get("passed", True):
        sys.stderr.write(
            f"cfgopt verify: the fixed config's loss diverges from the original's: {verdict['loss']['reason']} "
            f"(tolerance {verdict['loss']['tolerance']:.2%}, --loss-tolerance)\n"
        )
        code = 1
    return code


def _verify(args: argparse.Namespace, config_path: Path, work: Path, say) -> int:
    def relay(line: str) -> None:
        if line.startswith("cfgopt-verify step") or "Error" in line:
            say(line)

    target, source = run_target(args.target)
    settings, _ = run_settings(target, args.gpus or 1, say, source)
    settings.unsafe_fixes = True
    job = _load(config_path, settings)
    say_plan(job, say)
    fixed_path, applied = _fixed_config(args, config_path, work, settings)
    assets = _prepare_assets(args, job.data, config_path, work, say, relay)
    jobs = {"original": job}
    paths = {"original": config_path}
    if fixed_path is not None:
        jobs["fixed"], paths["fixed"] = _load(fixed_path, settings), fixed_path
        for line in applied:
            say(f"fix: {line}")
    # both runs from the original's seed and data order: the loss comparison needs the same samples per step
    order = numerics.same_data_order({key: job.value(key) for key in numerics.DATA_ORDER_KEYS})
    runs: dict[str, runner.RunResult] = {}
    plan = [(label, run_job, order) for label, run_job in jobs.items()]
    if _wants_spread(args, jobs):  # the original again, another seed: what a change that trains as well may differ by
        plan.append((SPREAD_RUN, job, {**order, "seed": order["seed"] + 1}))
    for label, run_job, run_order in plan:
        say(f"running the {label} config for {args.steps} steps ...")
        runs[label] = runner.run_config(
            numerics.with_data_order(run_job.data, run_order),
            assets,
            args.steps,
            label.replace(", ", "-").replace(" ", "-"),
            work,
            paths["original" if label == SPREAD_RUN else label],
            args.gpus,
            args.timeout,
            relay,
        )
        parameters_from_shape(runs[label].metrics, run_job, runs[label].config)
    loss = None
    if "fixed" in runs and not runs["original"].error and not runs["fixed"].error:
        loss = loss_verdict(runs, jobs, args.gpus or 1, args.loss_tolerance, assets.on_cpu)
    extra = {
        "config": str(config_path),
        "fixed_config": str(fixed_path) if fixed_path else None,
        "fixes": applied,
        "steps": args.steps,
        "assets": assets.notes,
        "data_order": order,
    }
    return _report(args, runs, extra, loss)


def run(args: argparse.Namespace) -> int:
    config_path: Path = args.config
    if not config_path.is_file():
        sys.stderr.write(f"cfgopt verify: {config_path}: no such file\n")
        return 2
    from cfgopt.verify import preflight

    if (cannot_run := preflight.check(args, "verify")) is not None:
        return cannot_run
    say = (lambda line: None) if args.quiet else (lambda line: sys.stderr.write(f"  {line}\n"))
    # SIGTERM / SIGHUP (a CI timeout, a closed terminal) stop the runs as Ctrl-C does: the children are
    # killed and the work folder removed
    with processes.work_folder("verify", runner.new_workdir, args.keep_temp) as work:
        try:
            return _verify(args, config_path, work, say)
        except _Stop as exc:
            sys.stderr.write(f"cfgopt verify: {exc}\n")
            return 2
        except KeyboardInterrupt as exc:
            sys.stderr.write(f"cfgopt verify: {termination.describe(exc)}; runs stopped\n")
            return termination.exit_code(exc)
