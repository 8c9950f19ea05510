"""The candidates `cfgopt tune` searches: the space (cfgopt.plan.space) for the options given, the speed plan
`cfgopt fix --unsafe-fixes` writes among them, each with its config, the config the memory model sees and its
cache key; DeepSpeed variants written into the work folder."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from cfgopt.plan import space
from cfgopt.tune import search

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.tune.session import Session


class CannotSearch(Exception):
    """A one-line reason the search cannot be made (exit 2)."""


def planned_start(job: Any, knobs: tuple[str, ...], say) -> space.Knobs | None:
    """The speed plan `cfgopt fix --unsafe-fixes` writes (cfgopt.plan.planner, the same priors and memory model):
    the search runs it first after the baseline."""
    from cfgopt.plan.planner import plan_for
    from cfgopt.plan.wording import description

    say(f"planning for {job.hardware(job.settings.gpus or 1).describe()} (the GPUs these runs use; --gpus)")
    plan = plan_for(job, knobs)
    for note in plan.notes if plan is not None else []:
        say(note)
    if plan is None or not plan.changed:
        return None
    say(f"starting from the fix's plan: {description(plan)}")
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


def candidates_for(
    args: argparse.Namespace, job: Any, session: Session, work: Path, warmup: int, gpus: int, say
) -> tuple[Any, space.Knobs, list[search.Candidate]]:
    """The platform, the user's knobs and the candidates to search (the fix's plan among them, marked)."""
    try:
        asset_id = session.asset_id()
    except ValueError as exc:
        raise CannotSearch(str(exc)) from None
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
        overflows_fp16=job.overflows_fp16,
        soft_capped=job.soft_capped_attention,
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
