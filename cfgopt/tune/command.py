"""`cfgopt tune CONFIG`: the fastest config that fits, found by memory-pruned short runs of the real trainer.

The candidates (cfgopt.tune.space) go through cfgopt.tune.search with `RealSession.measure`, which runs each
one through `cfgopt.verify.runner.run_config` with assets prepared once. The winner is printed as a unified
diff of the YAML (span edits from cfgopt.edits: comments, order and quoting stay as they are) or written
with --write; a DeepSpeed JSON the winner needs is written beside the config (or beside the user's JSON).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cfgopt.document import Document
from cfgopt.job import lf_values
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.tune import search, space
from cfgopt.verify import processes
from cfgopt.verify.options import default_cache_dir


class Session(Protocol):
    """What the command needs from the machine: the platform, assets, one run, the memory check."""

    def platform(self) -> space.Platform: ...
    def prepare(self) -> None: ...
    def asset_id(self) -> str: ...
    def measure(self, candidate: search.Candidate) -> search.Measurement: ...
    def fits(self) -> search.Fits: ...


def measurement_from(result: Any, warmup: int) -> search.Measurement:
    """A verify RunResult as the search sees it: real tokens/s over the steps after `warmup`, peak memory."""
    metrics = result.metrics or {}
    steps = metrics.get("steps") or []
    warm = steps[min(warmup, max(0, len(steps) - 1)) :]
    seconds = sum(s["seconds"] for s in warm)
    error = result.error
    if error and not search.is_oom(error) and search.is_oom(result.log_tail):
        error += " (the log says: out of memory)"
    peak = metrics.get("peak_allocated_gib")
    if peak is None:
        peaks = [s["max_allocated_gib"] for s in steps if "max_allocated_gib" in s]
        peak = max(peaks) if peaks else None
    return search.Measurement(
        tokens_per_s=(sum(s["real_tokens"] for s in warm) / seconds) if seconds and not error else None,
        peak_gib=peak,
        reserved_gib=metrics.get("peak_reserved_gib"),
        wall_s=result.wall_s,
        error=error,
        device=metrics.get("device"),
        steps_measured=len(warm),
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
    _assets: Any = None
    _platform: space.Platform | None = None
    notes: list[str] = field(default_factory=list)

    def _relay(self, line: str) -> None:
        if "Error" in line or "out of memory" in line:
            self.say(f"  {line[:300]}")

    def platform(self) -> space.Platform:
        if self._platform is None:
            self._platform = space.probe_platform()
        return self._platform

    def _plan(self) -> Any:
        from cfgopt.verify import preflight, runner

        if self._assets is None:
            on_cpu = preflight.cpu_only()
            self._assets = runner.plan_assets(self.config, self.config_path, self.mode, self.cache_dir, on_cpu)
        return self._assets

    def prepare(self) -> None:
        from cfgopt.verify.command import prepare_assets_saying

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
        from cfgopt.model_shapes import shape_for
        from cfgopt.targets import TARGETS
        from cfgopt.verify import runner

        name = self.target_name or runner.detect_target()
        target = TARGETS.get(name)
        ref = str(self.config.get("model_name_or_path", ""))
        shape = shape_for(ref, self.config_path.parent)
        assets = self._plan()
        if shape is None and assets.model_dir is not None:
            shape = shape_for(str(assets.model_dir))
        return search.MemoryFits(shape, target, self.gpus, self.margin, self.fill)


def load_tune_job(
    args: argparse.Namespace, gpus: int, say, session: Session | None
) -> tuple[Any, space.Platform | None, str]:
    """The job tuned, judged for the target and GPUs the runs use and the packages the machine has, with the
    probed platform; (None, None, why) when the config cannot be read. A given session is asked instead."""
    from cfgopt.job_loader import JobError, load_job
    from cfgopt.settings import Settings
    from cfgopt.verify import runner
    from cfgopt.verify.command import run_settings

    target = args.target or runner.detect_target()
    if session is None:
        settings, platform = run_settings(target, gpus, say)
    else:
        platform = session.platform()
        packages = {"liger_kernel": platform.liger, "flash_attn": platform.flash_attn}
        settings = Settings(target_name=target, gpus=gpus, packages=packages)
    try:
        return load_job(args.config, settings), platform, ""
    except JobError as exc:
        return None, None, str(exc)


def planned_start(job: Any, knobs: tuple[str, ...], say) -> space.Knobs | None:
    """The speed plan `cfgopt fix --unsafe-fixes` writes (cfgopt.planner, the same priors and memory model):
    the search runs it first after the baseline."""
    from cfgopt.planner import plan_for

    say(f"planning for {job.hardware(job.settings.gpus or 1).describe()} (the GPUs these runs use; --gpus)")
    plan = plan_for(job, knobs)
    for note in plan.notes if plan is not None else []:
        say(note)
    if plan is None or not plan.changed:
        return None
    say(f"starting from the fix's plan: {plan.description()}")
    return plan.best


def cache_key(resolved: dict[str, Any], steps: int, warmup: int, gpus: int, device: str, assets: str) -> str:
    blob = json.dumps(
        {"config": resolved, "steps": steps, "warmup": warmup, "gpus": gpus, "device": device, "assets": assets},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def make_candidates(
    config: dict[str, Any],
    user_ds: dict[str, Any] | None,
    base: space.Knobs,
    knobs_list: list[space.Knobs],
    work: Path,
    key_of: Callable[[dict[str, Any]], str],
) -> list[search.Candidate]:
    """Each candidate's config; DeepSpeed variants are written into `work` (one file per distinct JSON)."""
    out: list[search.Candidate] = []
    for i, knobs in enumerate(knobs_list):
        action, ds = space.deepspeed_for(knobs, base, user_ds)
        ds_path = None
        if action == "new":
            assert ds is not None
            text = json.dumps(ds, indent=2) + "\n"
            digest = hashlib.sha256(text.encode()).hexdigest()[:8]
            ds_file = work / f"ds-{knobs.zero}-{digest}.json"
            if not ds_file.exists():
                ds_file.write_text(text)
            ds_path = str(ds_file)
        cfg = space.candidate_config(config, knobs, base, user_ds, ds_path)
        resolved = dict(cfg)
        if action == "new":
            resolved["deepspeed"] = ds
        elif action == "keep" and "deepspeed" in cfg:
            resolved["deepspeed"] = user_ds if user_ds is not None else cfg["deepspeed"]
        out.append(search.Candidate(i, knobs, cfg, resolved, key_of(resolved), baseline=(i == 0)))
    return out


# ---------------------------------------------------------------- the winner as span edits


@dataclass
class FixPlan:
    yaml_before: str
    yaml_after: str
    ds_file: Path | None = None  # a new DeepSpeed JSON to write beside the config
    ds_text: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def plan_fix(
    config_path: Path,
    doc: Document,
    src: Any,
    winner: search.Candidate,
    base: space.Knobs,
    user_ds: dict[str, Any] | None,
    user_ds_path: Path | None,
) -> FixPlan:
    """The YAML edits (and new DeepSpeed JSON) that turn the user's config into the winner; no re-serialising."""
    from cfgopt.edits import delete_entry, insert_entry, replace_value
    from cfgopt.fixer import apply_edits

    changes = space.changed_keys(winner.knobs, base)
    action, ds = space.deepspeed_for(winner.knobs, base, user_ds)
    plan = FixPlan(doc.text, doc.text, changes=dict(changes))
    if action == "new":
        assert ds is not None
        name = f"{config_path.stem}.tune-{winner.knobs.zero}.json"
        ref = config_path.parent / name
        raw_ref = config_path.parent / name
        if user_ds_path is not None and isinstance(winner.config.get("deepspeed"), str):
            user_ref = str(src.data.get("deepspeed"))
            ref = user_ds_path.parent / name
            raw_ref = Path(user_ref).parent / name
        plan.ds_file, plan.ds_text = ref, json.dumps(ds, indent=2) + "\n"
        changes = {**changes, "deepspeed": str(raw_ref)}
        plan.changes["deepspeed"] = str(raw_ref)
    edits = []
    failed: set[str] = set()
    root = src.root
    for key, value in changes.items():
        entry = root.get(key)
        made = replace_value(src, entry, value) if entry is not None else insert_entry(src, None, key, value)
        if made is None:
            failed.add(key)
            plan.problems.append(f"`{key}` cannot be edited in place; set `{key}: {value}` by hand")
            continue
        edits.extend(made)
    if action == "drop":
        plan.changes["deepspeed"] = None
        for entry in [e for e in root.entries or () if e.key == "deepspeed"]:
            made = delete_entry(src, entry)
            if made is None:
                failed.add("deepspeed")
                plan.problems.append("`deepspeed` cannot be removed in place; remove it by hand")
                continue
            edits.extend(made)
    after = apply_edits(doc.text, edits)
    check = load_yaml(Document(path=config_path, text=after)).data
    for key, value in plan.changes.items():
        got = check.get(key) if isinstance(check, dict) else None
        if key not in failed and got != value:
            plan.problems.append(f"the edited YAML reads `{key}` as {got!r}, not {value!r}; nothing written")
    plan.yaml_after = after
    return plan


def render_diff(config_path: Path, plan: FixPlan) -> str:
    out = list(
        difflib.unified_diff(
            plan.yaml_before.splitlines(keepends=True),
            plan.yaml_after.splitlines(keepends=True),
            fromfile=f"a/{config_path}",
            tofile=f"b/{config_path}",
        )
    )
    if plan.ds_file is not None and plan.ds_text is not None:
        out += list(difflib.unified_diff([], plan.ds_text.splitlines(keepends=True), "/dev/null", f"b/{plan.ds_file}"))
    return "".join(out)


def write_fix(config_path: Path, doc: Document, plan: FixPlan) -> list[str]:
    """Write the plan; returns the problems (empty: written)."""
    from cfgopt.writer import ChangedOnDisk, atomic_write

    if plan.problems:
        return plan.problems
    if plan.ds_file is not None and plan.ds_text is not None:
        if plan.ds_file.exists() and plan.ds_file.read_text() != plan.ds_text:
            return [f"{plan.ds_file} exists with other content; not overwritten (nothing written)"]
        plan.ds_file.write_text(plan.ds_text)
    try:
        atomic_write(config_path, doc.to_bytes(plan.yaml_after), expected=doc.to_bytes())
    except (ChangedOnDisk, OSError) as exc:
        return [f"{config_path}: not written: {exc}"]
    return []


# ---------------------------------------------------------------- report


def _f(value: Any, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def row_json(row: search.Row, base_tps: float | None) -> dict[str, Any]:
    c, m = row.candidate, row.measurement
    tps = row.tokens_per_s
    return {
        "index": c.index,
        "label": c.knobs.label(),
        "knobs": c.knobs.as_dict(),
        "baseline": c.baseline,
        "status": row.status,
        "cached": row.cached,
        "reason": row.reason,
        "run_order": row.order,
        "prior": round(c.prior, 4),
        "est_peak_gib": c.est_peak_gib,
        "tokens_per_s": tps,
        "vs_baseline": (tps / base_tps) if tps and base_tps else None,
        "peak_gib": m.peak_gib if m else None,
        "reserved_gib": m.reserved_gib if m else None,
        "wall_s": m.wall_s if m else None,
        "error": m.error if m else None,
        "key": c.key,
    }


def table(result: search.SearchResult) -> str:
    base_tps = result.baseline.tokens_per_s
    head = (
        f"{'':2}{'#':>3}  {'candidate':60} {'status':22} {'tokens/s':>9} {'vs base':>8} "
        f"{'peak GiB':>9} {'est GiB':>8} {'run s':>6}  note"
    )
    lines = [head]
    for row in result.rows:
        c, m = row.candidate, row.measurement
        tps = row.tokens_per_s
        mark = "*" if result.winner is not None and row is result.winner else ""
        label = c.knobs.label() + (" (baseline)" if c.baseline else "")
        status = row.status + (" (cached)" if row.cached else "")
        lines.append(
            f"{mark:2}{c.index:>3}  {label:60} {status:22} {_f(tps, '{:,.0f}'):>9} "
            f"{_f(tps / base_tps if tps and base_tps else None, '{:.2f}x'):>8} "
            f"{_f(m.peak_gib if m else None, '{:.1f}'):>9} {_f(c.est_peak_gib, '{:.1f}'):>8} "
            f"{_f(m.wall_s if m else None, '{:.0f}'):>6}  {row.reason}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- the command


class _Stop(Exception):
    """A one-line reason the search cannot be made (exit 2)."""


def _real_session(args: argparse.Namespace, job: Any, work: Path, warmup: int, gpus: int, say, probed) -> Session:
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
        _platform=probed,
    )


def _candidates(
    args: argparse.Namespace, job: Any, session: Session, work: Path, warmup: int, gpus: int, say
) -> tuple[Any, space.Knobs, list[search.Candidate]]:
    """The platform, the user's knobs and the candidates to search (the fix's plan among them, marked)."""
    try:
        asset_id = session.asset_id()
    except ValueError as exc:
        raise _Stop(str(exc)) from None
    platform = session.platform()
    for note in platform.notes:
        say(note)
    config, (_, user_ds) = job.data, job.deepspeed
    options = space.SpaceOptions(
        gpus=gpus,
        allow_packing=args.allow_packing,
        max_micro=args.max_micro,
        knobs=tuple(args.knobs),
        bf16=job.settings.target.bf16,
    )
    base, knobs_list = space.build_space(config, user_ds, platform, options)
    planned = planned_start(job, tuple(args.knobs), say)
    if planned is not None and planned not in knobs_list:
        knobs_list.append(planned)  # the plan `cfgopt fix` writes is a candidate even outside the options
    candidates = make_candidates(
        config,
        user_ds,
        base,
        knobs_list,
        work,
        lambda resolved: cache_key(resolved, args.steps, warmup, gpus, platform.device, asset_id),
    )
    if planned is not None:
        for c in candidates:
            c.planned = c.knobs == planned and not c.baseline
    return platform, base, candidates


def _verdict(result: search.SearchResult, memory_note: str, gpus: int) -> int:
    """What the search found, printed; 1 when nothing could be measured or the config as it is crashed."""
    base_tps, winner = result.baseline.tokens_per_s, result.winner
    print(
        f"searched {sum(r.order is not None for r in result.rows)} of {len(result.rows)} candidates: "
        f"{result.spent_s:.0f} s of runs now, {result.search_s * gpus:.0f} GPU s in all (cached included); "
        f"{memory_note}"
    )
    code = 0
    if winner is None:
        print("no candidate could be measured: nothing to change")
        code = 1
    elif winner is result.baseline:
        print("the config as it is was the fastest measured: nothing to change")
    else:
        gain = f" ({winner.tokens_per_s / base_tps:.2f}x the baseline)" if base_tps and winner.tokens_per_s else ""
        print(f"winner: #{winner.candidate.index} {winner.candidate.knobs.label()}{gain}")
    if result.baseline.status == search.CRASHED:
        sys.stderr.write(
            f"cfgopt tune: the config as it is crashed: {result.baseline.reason}; try `cfgopt fix` first\n"
        )
        code = 1
    return code


def _apply(args: argparse.Namespace, doc: Document, plan: FixPlan) -> int:
    """The winner's changes: written (--write) or shown as a diff. 2 when they could not be written."""
    config_path: Path = args.config
    if not args.write:
        sys.stdout.write(render_diff(config_path, plan))
        for p in plan.problems:
            sys.stderr.write(f"cfgopt tune: {p}\n")
        return 0
    problems = write_fix(config_path, doc, plan)
    for p in problems:
        sys.stderr.write(f"cfgopt tune: {p}\n")
    if problems:
        return 2
    written = f" and {plan.ds_file}" if plan.ds_file else ""
    sys.stderr.write(f"cfgopt tune: wrote {config_path}{written}\n")
    return 0


def _write_json(
    args: argparse.Namespace,
    result: search.SearchResult,
    platform: Any,
    plan: FixPlan | None,
    gpus: int,
    warmup: int,
    memory_note: str,
) -> None:
    base_tps, winner = result.baseline.tokens_per_s, result.winner
    report = {
        "config": str(args.config),
        "device": platform.device,
        "gpus": gpus,
        "steps": args.steps,
        "warmup": warmup,
        "budget_s": result.budget_s,
        "spent_s": result.spent_s,
        "search_s": result.search_s,
        "gpu_seconds": result.search_s * gpus,
        "stopped": result.stopped,
        "memory": memory_note,
        "platform_notes": platform.notes,
        "priors": search.PRIORS,
        "baseline": row_json(result.baseline, base_tps),
        "winner": row_json(winner, base_tps) if winner else None,
        "changes": plan.changes if plan else {},
        "rows": [row_json(r, base_tps) for r in result.rows],
    }
    text = json.dumps(report, indent=2, default=str)
    if str(args.json) == "-":
        print(text)
    else:
        args.json.write_text(text)


def _tune(args: argparse.Namespace, job: Any, session: Session, work: Path, warmup: int, gpus: int, say) -> int:
    config_path: Path = args.config
    platform, base, candidates = _candidates(args, job, session, work, warmup, gpus, say)
    fits = session.fits()
    memory_note = getattr(fits, "note", "memory check given by the caller")
    say(memory_note)
    say(f"{len(candidates)} candidates on {platform.device}; global batch {base.micro * base.ga * gpus} kept")
    cache = search.ResultCache(args.cache or config_path.with_name(config_path.name + ".cfgopt-tune.json"))
    say("preparing assets ...")
    session.prepare()
    result = search.search(
        candidates,
        session.measure,
        fits,
        budget_s=args.budget * 60,
        gpus=gpus,
        cache=cache,
        patience=args.patience,
        min_gain=args.min_gain,
        on_event=say,
        memory_note=memory_note,
    )
    print(table(result))
    plan = None
    if result.winner is not None and result.winner is not result.baseline:
        user_ds = job.deepspeed[1]
        user_ds_path = job.deepspeed_source.document.path if isinstance(job.data.get("deepspeed"), str) else None
        doc, src = job.source.document, job.source
        plan = plan_fix(config_path, doc, src, result.winner.candidate, base, user_ds, user_ds_path)
    code = _verdict(result, memory_note, gpus)
    if plan is not None:
        code = _apply(args, job.source.document, plan) or code
    if args.json is not None:
        _write_json(args, result, platform, plan, gpus, warmup, memory_note)
    return code


def run(args: argparse.Namespace, session: Session | None = None) -> int:
    config_path: Path = args.config
    if not config_path.is_file():
        sys.stderr.write(f"cfgopt tune: {config_path}: no such file\n")
        return 2
    if session is None:
        from cfgopt.verify import preflight

        if (cannot_run := preflight.check(args, "tune")) is not None:
            return cannot_run
    gpus = args.gpus or 1
    if gpus < 1 or args.steps < 1 or args.budget < 0:
        sys.stderr.write("cfgopt tune: --gpus and --steps must be at least 1, --budget not negative\n")
        return 2
    warmup = max(0, min(args.warmup, args.steps - 2))
    say = (lambda line: None) if args.quiet else (lambda line: sys.stderr.write(f"  {line}\n"))
    job, probed, problem = load_tune_job(args, gpus, say, session)
    if job is None:
        sys.stderr.write(f"cfgopt tune: {problem}\n")
        return 2
    # SIGTERM / SIGHUP (an outer `timeout`, a scheduler, a closed terminal) stop the search as Ctrl-C does: the
    # trainer and its children are killed (not left on the GPU) and the work folder removed
    with processes.interrupt_on_termination():
        work = Path(tempfile.mkdtemp(prefix="cfgopt-tune-"))
        try:
            session = session or _real_session(args, job, work, warmup, gpus, say, probed)
            return _tune(args, job, session, work, warmup, gpus, say)
        except _Stop as exc:
            sys.stderr.write(f"cfgopt tune: {exc}\n")
            return 2
        except KeyboardInterrupt as exc:
            sys.stderr.write(f"cfgopt tune: {processes.describe(exc)}; finished runs are in the cache\n")
            return processes.exit_code(exc)
        finally:
            if args.keep_temp:
                sys.stderr.write(f"cfgopt tune: work folder kept at {work}\n")
            else:
                processes.remove_folder(work)
