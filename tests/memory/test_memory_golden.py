"""The memory estimate's numbers, pinned: every figure of a few hundred estimates (the fixtures' and bench's
training YAMLs with a known model, each on 1 and 8 GPUs and with the knobs the model reads turned) is stored in
tests/data/memory_golden.json and must come out the same. A refactor of cfgopt/memory/ keeps them all; a
change to the model's arithmetic regenerates the file and says which cases moved and why (`git diff` shows it).

Regenerate: `python tests/memory/test_memory_golden.py --write [--corpus DIR ...]` (DIR: more folders of LLaMA-Factory
YAMLs to draw configs from; the inputs are stored in the file, so the test needs none of them).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

ROOT = Path(__file__).resolve().parents[2]  # tests/memory/: run as a script too (--write)
GOLDEN = ROOT / "tests" / "data" / "memory_golden.json"
SOURCES = ("fixtures", "bench/planner/examples", "bench/memory/measured")
# Knobs the memory model reads, turned one at a time on every base config.
VARIANTS: dict[str, dict[str, Any]] = {
    "as-is": {},
    "no-gc": {"disable_gradient_checkpointing": True},
    "liger": {"enable_liger_kernel": True},
    "packed-eager": {"packing": True, "flash_attn": "disabled"},
    "fp16": {"fp16": True, "bf16": False, "pure_bf16": False},
    "pure-bf16-accum": {"pure_bf16": True, "bf16": False, "gradient_accumulation_steps": 4},
    "dpo": {"stage": "dpo", "per_device_train_batch_size": 2},
    "4bit-eager": {"quantization_bit": 4, "flash_attn": "disabled", "neat_packing": True},
    "kto": {"stage": "kto", "per_device_train_batch_size": 2},
    "ppo-full-reward": {"stage": "ppo", "reward_model_type": "full", "max_new_tokens": 256},
    "dora": {"use_dora": True},
}
GPU_COUNTS = (1, 8)
SCALARS = (
    "peak_allocated_gib",
    "margin_gib",
    "runtime_gib",
    "required_gib",
    "persistent_gib",
    "peak_phase",
    "verdict",
    "surely_out_of_memory",
    "confidence",
)


def figures(est: Any) -> dict[str, Any]:
    """Everything a caller reads off an estimate: the JSON `estimate` prints, the verdicts and the table's rows."""
    out = {k: v for k, v in est.as_dict().items() if k != "components"}
    out.update({name: getattr(est, name) for name in SCALARS})
    out["fits_with_headroom"] = est.fits_with_headroom()
    out["confidence_line"] = est.confidence_line()
    return json.loads(json.dumps(out))


def _jsonable(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError):
        return False


def _cases_of(path: Path) -> list[dict[str, Any]]:
    from cfgopt.lint.project_config import CommandLine, Resolver
    from cfgopt.project.loader import JobError, load_job

    settings = Resolver(CommandLine(target="h200", gpus=1)).settings_for(path)
    try:
        job = load_job(path, settings)
    except JobError:
        return []
    if not job.training or job.shape is None:
        return []
    known, ds = job.deepspeed
    if not known:
        return []
    out = []
    for variant, changes in VARIANTS.items():
        config = job.values(**changes)
        if not (_jsonable(config) and _jsonable(ds)):
            continue
        for gpus in GPU_COUNTS:
            out.append(
                {
                    "id": f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{variant}:{gpus}",
                    "config": config,
                    "shape": job.shape._asdict(),
                    "gpus": gpus,
                    "deepspeed": ds,
                }
            )
    return out


class _Recording(dict):
    """A config that notes which keys the estimate reads, so that the file stores only those."""

    read: ClassVar[set[str]] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        _Recording.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        _Recording.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        _Recording.read.add(key)
        return super().__contains__(key)


# Kept whether read or not: what a change to the model (precision, optimizer, DeepSpeed) is likely to read next.
ALWAYS_KEPT = {"fp16", "bf16", "pure_bf16", "optim", "stage", "finetuning_type", "deepspeed", "model_name_or_path"}


def build(corpus: list[Path], limit: int) -> dict[str, Any]:
    """Cases from the YAMLs under SOURCES and `corpus`: one per distinct estimate, at most `limit`, each config
    cut to the keys the estimate reads."""
    from cfgopt.knowledge.model_shapes import ModelShape
    from cfgopt.knowledge.targets import TARGETS
    from cfgopt.memory import estimate as memory

    files = sorted({p for folder in [ROOT / s for s in SOURCES] + corpus for p in folder.rglob("*.yaml")})
    seen: set[str] = set()
    cases = []
    for case in (case for path in files for case in _cases_of(path)):
        shape = ModelShape(**case["shape"])
        est = memory.estimate(_Recording(case["config"]), shape, TARGETS["h200"], case["gpus"], case["deepspeed"])
        case["expected"] = figures(est)
        key = json.dumps([case["shape"]["name"], case["expected"]], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        if case["id"].endswith(":as-is:1"):
            best = memory.max_micro_batch(case["config"], shape, TARGETS["h200"], 1, case["deepspeed"])
            case["max_micro_batch"] = best
        cases.append(case)
    step = max(1, math.ceil(len(cases) / limit))
    cases = cases[::step]
    kept = _Recording.read | ALWAYS_KEPT
    for case in cases:
        case["config"] = {k: v for k, v in case["config"].items() if k in kept}
    return {"cases": cases}


def _load() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        return math.isclose(actual, expected, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(_same(actual[k], expected[k]) for k in expected)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(_same(a, e) for a, e in zip(actual, expected, strict=True))
    return actual == expected


def test_golden_covers_the_model() -> None:
    golden = _load()
    cases = golden["cases"]
    assert len(cases) >= 200
    kinds = {(c["expected"]["finetuning_type"], c["expected"]["zero_stage"]) for c in cases}
    assert {("lora", None), ("full", None), ("full", 3), ("full", 2), ("freeze", None)} <= kinds


def test_every_figure_is_unchanged() -> None:
    from cfgopt.knowledge.model_shapes import ModelShape
    from cfgopt.knowledge.targets import TARGETS
    from cfgopt.memory import estimate as memory

    golden = _load()
    moved = []
    for case in golden["cases"]:
        config = case["config"]
        shape = ModelShape(**case["shape"])
        est = memory.estimate(config, shape, TARGETS["h200"], case["gpus"], case["deepspeed"])
        got = figures(est)
        diff = [k for k in case["expected"] if not _same(got.get(k), case["expected"][k])]
        if diff:
            moved.append(f"{case['id']}: {', '.join(diff)}")
        if "max_micro_batch" in case:
            best = memory.max_micro_batch(config, shape, TARGETS["h200"], 1, case["deepspeed"])
            if best != case["max_micro_batch"]:
                moved.append(f"{case['id']}: max_micro_batch {best} != {case['max_micro_batch']}")
    assert not moved, f"{len(moved)} estimates moved:\n" + "\n".join(moved[:20])


def test_components_add_up() -> None:
    """The components are the estimate: the states plus the largest phase are the allocated peak."""
    from cfgopt.knowledge.model_shapes import ModelShape
    from cfgopt.knowledge.targets import TARGETS
    from cfgopt.memory import estimate as memory

    golden = _load()
    for case in golden["cases"][::7]:
        config = case["config"]
        est = memory.estimate(config, ModelShape(**case["shape"]), TARGETS["h200"], case["gpus"], case["deepspeed"])
        states = sum(c.gib for c in est.components if "states" in c.phases)
        phases = {p: sum(c.gib for c in est.components if p in c.phases) for p in memory.PHASES}
        assert states + max(phases.values()) == pytest.approx(est.peak_allocated_gib, rel=1e-12)
        assert {c.name for c in est.components} >= {"weights", "gradients", "optimizer states", "activations"}


def main() -> int:
    parser = argparse.ArgumentParser(description="regenerate tests/data/memory_golden.json")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--corpus", type=Path, action="append", default=[], help="more folders of YAMLs")
    parser.add_argument("--limit", type=int, default=400, help="at most this many cases (default 400)")
    args = parser.parse_args()
    golden = build([c.resolve() for c in args.corpus], args.limit)
    if args.write:
        GOLDEN.write_text(json.dumps(golden, indent=0, sort_keys=True) + "\n")
    print(f"{len(golden['cases'])} cases" + (f" written to {GOLDEN.relative_to(ROOT)}" if args.write else ""))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
