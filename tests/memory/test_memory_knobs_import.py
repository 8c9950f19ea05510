"""bench/memory's knobs calibration (issue 23): what device_call_knobs.sh brings back imports into measured/
files that keep every knob (stage, optim, pure_bf16, freeze, ZeRO offload) and that compare.py estimates
with those knobs."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from rule_cases import ROOT


def _bench(name: str) -> ModuleType:
    """bench/memory/<name>.py under a name of its own (bench/tune has a compare.py too)."""
    spec = importlib.util.spec_from_file_location(f"bench_memory_{name}", ROOT / "bench" / "memory" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


compare, harness, import_harness = _bench("compare"), _bench("harness"), _bench("import_harness")

KNOBS = ("pure_bf16", "optim", "stage", "finetuning_type", "freeze_trainable_layers", "disable_gradient_checkpointing")


def _record(family: str, variant: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """A record as harness.run_family writes it on the GPU (the peak and micro-batch made up)."""
    args = harness._args(variant, tmp / "model", tmp / "data", tmp / "out", tiny=False)
    pairwise = args["stage"] == "dpo"
    return {
        "family": family,
        "hub": harness.FAMILIES[family]["hub"],
        "variant": variant["name"],
        "plan": "knobs",
        "date": "2026-12-04",
        "model_config": dict(harness.FAMILIES[family]["config"], **harness.COMMON_IDS),
        "args": args,
        "ds": harness._ds(variant["ds"]) if variant.get("ds") else None,
        "peak_allocated_gib": 30.0,
        "max_tokens": 2 * 700 if pairwise else 4096,
        "max_shape": [2 * args["per_device_train_batch_size"], 700] if pairwise else [2, 2048],
    }


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    records = [_record(f, v, tmp_path) for f, plan in harness.KNOBS_PLAN.items() for v in plan]
    records.append({**records[0], "variant": "failed", "error": "OutOfMemoryError"})  # skipped, as before
    (tmp_path / "knobs").mkdir()
    for family in harness.KNOBS_PLAN:
        lines = [json.dumps(r) for r in records if r["family"] == family]
        (tmp_path / "knobs" / f"{family}.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "knobs" / "qwen3-1.7b.log").write_text("[qwen3-1.7b] not a record\n")
    with tarfile.open(tmp_path / "knobs.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "knobs", arcname="knobs")
    measured = tmp_path / "measured"
    argv = ["--add", str(tmp_path / "knobs.tar.gz"), "--raw", str(tmp_path / "raw"), "--measured", str(measured)]
    assert import_harness.main(argv) == 0
    assert import_harness.main(argv) == 0  # adding the same tarball again adds nothing
    return measured


def test_knobs_tarball_imports_every_run_with_its_knobs(imported: Path, tmp_path: Path) -> None:
    expected = sum(len(plan) for plan in harness.KNOBS_PLAN.values())
    assert len(list((tmp_path / "raw").glob("*.jsonl"))) == len(harness.KNOBS_PLAN)
    assert sum(len(p.read_text().splitlines()) for p in (tmp_path / "raw").glob("*.jsonl")) == expected + 1
    runs = compare._runs(imported)
    assert len(runs) == expected
    for family, plan in harness.KNOBS_PLAN.items():
        for variant in plan:
            name = f"h200_2026-12-04_harness_{family}_{variant['name']}".replace(".", "")
            config = yaml.safe_load((imported / f"{name}.config.yaml").read_text())
            for key in KNOBS:
                if key in variant:
                    assert config[key] == variant[key], (name, key)
            assert config["model_name_or_path"] == harness.FAMILIES[family]["hub"]
            if variant.get("ds"):
                ds = json.loads((imported / config["deepspeed"]).read_text())
                assert ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"


def test_compare_estimates_the_knobs_it_imported(imported: Path) -> None:
    rows = {r["name"].split("_harness_")[1]: r for r in map(compare.compare_one, compare._runs(imported))}
    # DPO: the longest sequence, not the pair's tokens, is the fill (the estimate counts the pair twice)
    dpo = rows["qwen3-17b_dpo_lora_gc"]
    assert dpo["tokens_from"] == "longest sequence 700" and dpo["setting"].startswith("dpo lora 2x1, 2800 tok")
    assert "pure bf16" in rows["qwen3-17b_full_pure_bf16_gc"]["setting"]
    assert "adamw_bnb_8bit" in rows["mistral-7b_full_adamw_bnb_8bit_gc"]["setting"]
    assert "freeze_trainable_layers -2" in rows["qwen3-17b_freeze_first2_gc"]["setting"]
    assert "offload" in rows["llama-32-1b_full_z3_offload_gc"]["setting"]
    # the knobs reach the estimate: pure bf16 and an 8-bit optimizer hold less than fp32 weights with AdamW
    config, shape, target, gpus, ds, fill = rows["mistral-7b_full_pure_bf16_gc"]["inputs"]
    fp32_adamw = compare.memory.estimate({**config, "pure_bf16": False}, shape, target, gpus, ds, fill=fill)
    assert rows["mistral-7b_full_pure_bf16_gc"]["estimate"] < fp32_adamw.peak_allocated_gib
    assert rows["mistral-7b_full_adamw_bnb_8bit_gc"]["estimate"] < fp32_adamw.peak_allocated_gib
