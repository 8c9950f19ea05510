"""The speed plan of every bench config and shipped LLaMA-Factory example, as text: `bench/planner/plans.golden`.

A plan change shows in review as a diff of this file (issue 41): each row is one config on one hardware (h200 /
mi300x, 1 / 8 GPUs; and 1 x h200 on a node with flash-attn and torchao), with the fix's description the planner
writes (`cfgopt fix --unsafe-fixes`) and its notes (the settings left out, and why). The planner is asked directly
(`cfgopt.plan.planner.plan_for`) with the CLI's settings (`--target T --gpus N`, the default selection, the
environment the job's files state, else assumed; the node's as `--environment` states it): the same text the fix
carries, without a process per row. No torch: a few seconds of CPU. Each config is planned as the one reader of its
DeepSpeed JSON: the examples here share `examples/deepspeed/ds_z3_config.json`, as LLaMA-Factory's do, and the fix
keeps a JSON other configs of the project read (`cfgopt.project.json_readers`); the rows track the planner, not
which files lie beside each config.

Usage: python bench/planner/golden.py            # print the plans
       python bench/planner/golden.py --write    # rewrite bench/planner/plans.golden
       python bench/planner/golden.py --check    # exit 1 with a diff where the file differs
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "bench" / "planner" / "plans.golden"
HARDWARE = (("h200", 1), ("h200", 8), ("mi300x", 1), ("mi300x", 8))
# and one node that has what the assumed environment lacks (flash-attn, torchao with transformers 5): the plans
# that LF019 and stochastic rounding change, stated as `--environment` would state them
NODE = {
    "llamafactory": "==0.9.5",
    "transformers": "==5.6.0",
    "liger_kernel": "==0.6.3",
    "bitsandbytes": "==0.50.2",
    "flash_attn": "==2.8.3",
    "torchao": "==0.17.0",
    "deepspeed": "==0.19.8",
}
NODE_ROWS = (("h200", 1),)
# the bench configs and the LLaMA-Factory examples the repository ships (copies of LLaMA-Factory's examples/)
CONFIG_GLOBS = (
    "bench/planner/examples/**/*.yaml",
    "bench/planner/heldout/*.yaml",  # issue 41's held-out rows (on main: after merging, rewrite with --write)
    "bench/planner/neat/*.yaml",
    "bench/planner/sr/examples/**/*.yaml",
    "bench/tune/*.yaml",
    "bench/verify/*.yaml",
    "fixtures/clean/*.yaml",
    "fixtures/seed/*.yaml",
)


def configs() -> list[Path]:
    found = {p for pattern in CONFIG_GLOBS for p in ROOT.glob(pattern)}
    return sorted(found, key=lambda p: p.relative_to(ROOT).as_posix())


def plan_text(path: Path, target: str, gpus: int, node: bool = False) -> list[str]:
    """One row: the plan's description and notes, or why there is none; `node`: in the NODE environment."""
    from cfgopt.environment.stated import Environment
    from cfgopt.job.settings import Settings
    from cfgopt.plan.planner import plan_for
    from cfgopt.plan.wording import description, with_packages_words
    from cfgopt.project.loader import JobError, load_job

    environment = Environment(dict(NODE), "node: " + ", ".join(NODE)) if node else None
    head = f"## {path.relative_to(ROOT).as_posix()} on {gpus} x {target}" + (
        " (node with flash-attn, torchao)" if node else ""
    )
    try:
        job = load_job(path, Settings(target_name=target, gpus=gpus, environment=environment))
    except JobError as exc:
        return [head, f"not a job: {exc}"]
    plan = plan_for(job)
    if plan is None:
        return [head, "no plan (not a training run, no speed rule selected, or nothing fits)"]
    lines = [head, "plan: " + (description(plan) if plan.changed else "unchanged")]
    if plan.with_packages is not None and not plan.changed:
        lines.append(f"no plan fits the job's environment: {with_packages_words(plan.with_packages)}")
    if not plan.changed:  # no fix carries a description: what it would end with, said here
        lines += [f"remark: {remark}" for remark in plan.remarks]
    lines += [f"note: {note}" for note in plan.notes if note not in plan.remarks]  # remarks: in the description
    return lines


def render() -> str:
    from unittest import mock

    from cfgopt.plan import planner
    from cfgopt.project import json_readers

    planner._PLANS.clear()  # plans made here, not ones an earlier caller in this process shared
    rows = []
    alone = json_readers.OutsideReaders(())  # each config the one reader of its JSON (the module docstring)
    with mock.patch.object(json_readers, "outside_readers", lambda *_: alone):
        for path in configs():
            for target, gpus in HARDWARE:
                rows += [*plan_text(path, target, gpus), ""]
            for target, gpus in NODE_ROWS:
                rows += [*plan_text(path, target, gpus, node=True), ""]
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    text = render()
    if "--write" in argv:
        GOLDEN.write_text(text)
        return 0
    if "--check" in argv:
        old = GOLDEN.read_text() if GOLDEN.exists() else ""
        diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), "plans.golden", "now", lineterm=""))
        print("\n".join(diff))
        return 1 if diff else 0
    print(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's cfgopt, not an installed one
    sys.exit(main(sys.argv[1:]))
