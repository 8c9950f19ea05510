"""`cfgopt tune CONFIG`: the fastest config that fits, found by memory-pruned short runs of the real trainer.

The flow only; each concern is its own module, as in `cfgopt/verify/`:
- `session`: the machine (the job judged for it, assets prepared once, one run through
  `cfgopt.verify.runner.run_config`, the memory check);
- `candidates`: the search space (cfgopt.plan.space) with the speed plan `cfgopt fix` writes among it;
- `search`: pruning, ranking, budget, cache;
- `report`: the table, the verdict and the JSON report;
- `winner`: the winner as span edits of the YAML (cfgopt.plan.knob_edits, the planner's writer) and a DeepSpeed JSON
  beside it, shown as a diff or written with --write.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from cfgopt.text import termination
from cfgopt.tune import report, search, winner
from cfgopt.tune.candidates import CannotSearch, candidates_for
from cfgopt.tune.session import load_tune_job, real_session
from cfgopt.verify import processes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.tune.session import Session


def _tune(args: argparse.Namespace, job: Any, session: Session, work: Path, warmup: int, gpus: int, say) -> int:
    config_path: Path = args.config
    platform, base, candidates = candidates_for(args, job, session, work, warmup, gpus, say)
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
        prior_factor=_data_factor(job, session),
    )
    print(report.table(result, on_cpu=not platform.cuda))
    plan = None
    if result.winner is not None and result.winner is not result.baseline:
        user_ds = job.deepspeed[1]
        user_ds_path = job.deepspeed_source.document.path if isinstance(job.data.get("deepspeed"), str) else None
        doc, src = job.source.document, job.source
        plan = winner.plan_fix(config_path, doc, src, result.winner.candidate, base, user_ds, user_ds_path)
    code = report.verdict(result, memory_note, gpus)
    if plan is not None:
        code = winner.apply(args, job.source.document, plan) or code
    if args.json is not None:
        report.write_json(args, result, platform, plan.changes if plan else {}, gpus, warmup, memory_note)
    return code


def _data_factor(job: Any, session: Session) -> Any:
    """The planner's data term (cfgopt.plan.data_speed) where the runs train on the job's own local data, so
    that tune ranks its candidates as the plan did; None for synthetic stand-ins (their lengths are the
    priors' own)."""
    if not getattr(session, "trains_on_job_data", lambda: False)():
        return None
    from cfgopt.plan.expected_speed import data_term_of

    data = data_term_of(job)
    return data.factor if data is not None else None


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
    if warmup < args.warmup:
        # said even with --quiet: the figures mean something else (bench/planner/README.md, the Qwen2.5-7B row)
        sys.stderr.write(
            f"cfgopt tune: --steps {args.steps} leaves {warmup} of the {args.warmup} warm-up step(s) untimed (two "
            f"steps are always timed): one-time costs such as kernel compilation are timed; --steps "
            f"{args.warmup + 2} or more avoids that\n"
        )
    say = (lambda line: None) if args.quiet else (lambda line: sys.stderr.write(f"  {line}\n"))
    job, probed, problem = load_tune_job(args, gpus, say, session)
    if job is None:
        sys.stderr.write(f"cfgopt tune: {problem}\n")
        return 2
    # SIGTERM / SIGHUP (an outer `timeout`, a scheduler, a closed terminal) stop the search as Ctrl-C does: the
    # trainer and its children are killed (not left on the GPU) and the work folder removed
    with processes.work_folder("tune", lambda: Path(tempfile.mkdtemp(prefix="cfgopt-tune-")), args.keep_temp) as work:
        try:
            session = session or real_session(args, job, work, warmup, gpus, say, probed)
            return _tune(args, job, session, work, warmup, gpus, say)
        except CannotSearch as exc:
            sys.stderr.write(f"cfgopt tune: {exc}\n")
            return 2
        except KeyboardInterrupt as exc:
            sys.stderr.write(f"cfgopt tune: {termination.describe(exc)}; finished runs are in the cache\n")
            return termination.exit_code(exc)
