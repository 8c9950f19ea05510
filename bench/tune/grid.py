"""The exhaustive grid that `cfgopt tune` is judged against: every candidate of the same search space, run
through the same runner (cfgopt.verify.runner.run_config via cfgopt.tune.session.RealSession), no pruning.

    python bench/tune/grid.py CONFIG [--gpus N] [--steps 10] [--warmup 3] [--allow-packing] [--knobs ...]
                                     [--out bench/tune/results/grid-NAME]

Writes OUT.json (every candidate: knobs, status, real tokens/s, peak memory, run seconds, the memory
model's estimate, the error of a crash) and OUT.md (the same as a table), both rewritten after every run.
Resumable: candidates already in OUT.json (same cache key as tune's: config, steps, warm-up, GPUs, device,
assets) are not run again. A crashed or out-of-memory candidate is recorded, never fatal; Ctrl-C keeps
what finished. Use the same --steps/--warmup/--gpus for tune so `compare.py` can match the runs by key.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cfgopt.plan import space
from cfgopt.tune import search
from cfgopt.tune.candidates import cache_key, make_candidates
from cfgopt.tune.options import KNOBS
from cfgopt.tune.session import RealSession
from cfgopt.verify.processes import interrupt_on_termination


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--steps", type=int, default=10, help="optimizer steps per candidate (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="first steps not timed (default 3)")
    p.add_argument("--allow-packing", action="store_true")
    p.add_argument("--knobs", default=",".join(KNOBS), help="knobs to vary (default: all)")
    p.add_argument("--max-micro", type=int, default=64)
    p.add_argument("--out", type=Path, default=None, help="OUT.json / OUT.md (default bench/tune/results/grid-NAME)")
    p.add_argument("--target", default=None, help="target for the memory estimates (default: detected)")
    p.add_argument("--mode", choices=("auto", "synthetic", "real"), default="auto")
    p.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "cfgopt" / "verify")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run before it is killed")
    p.add_argument("--limit", type=int, default=None, help="run at most this many new candidates (then stop)")
    p.add_argument(
        "--max-minutes", type=float, default=None, help="start no new candidate after this many minutes (resume later)"
    )
    p.add_argument("--keep-temp", action="store_true")
    return p.parse_args(argv)


def render_md(data: dict) -> str:
    rows = data["rows"]
    base = next((r for r in rows if r["baseline"]), None)
    base_tps = base.get("tokens_per_s") if base else None
    done = [r for r in rows if r["status"] != "pending"]
    best = max((r for r in done if r.get("tokens_per_s")), key=lambda r: r["tokens_per_s"], default=None)
    lines = [
        f"# Exhaustive grid: `{data['config']}`",
        "",
        f"- command: `{data['command']}`",
        f"- device: {data['device']} x {data['gpus']}; {data['steps']} steps per candidate, first {data['warmup']} "
        "not timed; real (non-padding) tokens/s of rank 0",
        f"- started {data['started']}; {len(done)} of {len(rows)} candidates done; "
        f"{data['gpu_seconds']:.0f} GPU s (run wall seconds x GPUs, start-up included)",
        f"- memory estimates: {data['memory']}",
    ]
    if best:
        lines.append(f"- best: #{best['index']} {best['label']}: {best['tokens_per_s']:,.0f} tokens/s")
    lines += [
        "",
        "| # | candidate | status | tokens/s | vs baseline | peak alloc GiB | peak reserved GiB | est GiB | run s "
        "| note |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def f(v, pat):
        return "-" if v is None else pat.format(v)

    for r in sorted(rows, key=lambda r: -(r.get("tokens_per_s") or 0)):
        tps = r.get("tokens_per_s")
        note = (r.get("error") or "").splitlines()[0][:120].replace("|", "/") if r.get("error") else ""
        lines.append(
            f"| {r['index']} | {r['label']}{' (baseline)' if r['baseline'] else ''} | {r['status']} | "
            f"{f(tps, '{:,.0f}')} | {f(tps / base_tps if tps and base_tps else None, '{:.2f}x')} | "
            f"{f(r.get('peak_gib'), '{:.1f}')} | {f(r.get('reserved_gib'), '{:.1f}')} | "
            f"{f(r.get('est_peak_gib'), '{:.1f}')} | {f(r.get('wall_s'), '{:.0f}')} | {note} |"
        )
    return "\n".join(lines) + "\n"


def save(out: Path, data: dict) -> None:
    data["gpu_seconds"] = sum((r.get("wall_s") or 0.0) for r in data["rows"]) * data["gpus"]
    for path, text in (
        (out.with_suffix(".json"), json.dumps(data, indent=2)),
        (out.with_suffix(".md"), render_md(data)),
    ):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    with interrupt_on_termination():  # SIGTERM / SIGHUP unwind like Ctrl-C: the work folder is removed
        return _grid(parse_args(argv))


def _grid(args: argparse.Namespace) -> int:
    config_path = args.config
    from cfgopt.job.settings import Settings
    from cfgopt.project.loader import load_job

    job = load_job(config_path, Settings(gpus=args.gpus))  # the one YAML + DeepSpeed JSON loader
    config, (_, user_ds) = job.data, job.deepspeed
    steps, gpus = args.steps, args.gpus
    warmup = max(0, min(args.warmup, steps - 2))
    out = args.out or Path(__file__).resolve().parent / "results" / f"grid-{config_path.stem}"
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cfgopt-grid-"))
    began = time.perf_counter()

    def say(line: str) -> None:
        sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {line}\n")

    session = RealSession(
        config_path, config, work, steps, warmup, gpus, args.timeout, args.mode, args.cache_dir, args.target, say=say
    )
    try:
        platform = session.platform()
        for note in platform.notes:
            say(note)
        knobs = tuple(k.strip() for k in args.knobs.split(",") if k.strip())
        options = space.SpaceOptions(gpus=gpus, allow_packing=args.allow_packing, max_micro=args.max_micro, knobs=knobs)
        base, knobs_list = space.build_space(config, user_ds, platform, options)
        asset_id = session.asset_id()
        cands = make_candidates(
            config,
            user_ds,
            base,
            knobs_list,
            work,
            lambda r: cache_key(r, steps, warmup, gpus, platform.device, asset_id),
        )
        fits = session.fits()
        previous: dict[str, dict] = {}
        if out.with_suffix(".json").exists():
            try:
                old = json.loads(out.with_suffix(".json").read_text())
                previous = {r["key"]: r for r in old.get("rows", []) if r.get("status") != "pending"}
            except (OSError, ValueError, KeyError):
                previous = {}
        data = {
            "config": str(config_path),
            "command": shlex.join([sys.executable, *sys.argv]),
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "device": platform.device,
            "gpus": gpus,
            "steps": steps,
            "warmup": warmup,
            "memory": getattr(fits, "note", ""),
            "platform_notes": platform.notes,
            "rows": [],
        }
        for c in cands:
            c.prior = search.prior_speed(c.knobs, gpus)
            try:
                _, c.est_peak_gib = fits(c.resolved)
            except Exception:  # noqa: BLE001 - an estimate is a nicety here
                c.est_peak_gib = None
            row = previous.get(c.key) or {
                "index": c.index,
                "label": c.knobs.label(),
                "knobs": c.knobs.as_dict(),
                "baseline": c.baseline,
                "status": "pending",
                "key": c.key,
            }
            row["est_peak_gib"] = c.est_peak_gib
            data["rows"].append(row)
        say(f"{len(cands)} candidates, {len(previous)} already done; writing {out}.json/.md")
        say("preparing assets ...")
        session.prepare()
        save(out, data)
        new = 0
        for c, row in zip(cands, data["rows"], strict=True):
            if row["status"] != "pending":
                continue
            if args.limit is not None and new >= args.limit:
                break
            if args.max_minutes is not None and time.perf_counter() - began > args.max_minutes * 60:
                say(f"--max-minutes {args.max_minutes:g} reached; run again to resume")
                break
            say(f"#{c.index} ({new + 1} new) {c.knobs.label()} ...")
            start = time.perf_counter()
            try:
                m = session.measure(c)
            except Exception as exc:  # noqa: BLE001 - a crashed candidate is recorded, not fatal
                m = search.Measurement(
                    error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}",
                    wall_s=time.perf_counter() - start,
                )
            new += 1
            row.update(
                status=search.status_of(m),
                tokens_per_s=m.tokens_per_s,
                peak_gib=m.peak_gib,
                reserved_gib=m.reserved_gib,
                wall_s=m.wall_s,
                error=m.error,
                steps_measured=m.steps_measured,
            )
            tps = f"{m.tokens_per_s:,.0f} tokens/s" if m.tokens_per_s else (m.error or "").splitlines()[0][:160]
            say(f"#{c.index}: {row['status']}: {tps} ({m.wall_s:.0f} s)")
            save(out, data)
        save(out, data)
        print(render_md(data))
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("grid: interrupted; finished candidates are saved\n")
        return 130
    finally:
        if args.keep_temp:
            sys.stderr.write(f"grid: work folder kept at {work}\n")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
