"""`cfgopt verify` / `cfgopt tune` beyond SFT: the synthetic data each LLaMA-Factory stage gets (pure, fast),
the format LLaMA-Factory's own loader reads from it (oracle), CPU runs of the real trainer for dpo, kto, rm and
pt (oracle group, as tests/verify/test_verify.py's runs), and ppo refused with one line (exit 2)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from llamafactory_child import LlamaFactoryChild
from rule_cases import ROOT
from tiny_model import TINY

from cfgopt.verify import cache, comparison, preflight, runner, synthetic, synthetic_meta

CONFIG = """model_name_or_path: tiny
stage: {stage}
do_train: true
finetuning_type: lora
lora_target: all
dataset: not_here
template: llama3
cutoff_len: 256
output_dir: users_output_dir
per_device_train_batch_size: 2
learning_rate: 1.0e-4
"""
ENV = {**os.environ, "DISABLE_VERSION_CHECK": "1", "PYTHONPATH": str(ROOT)}


def _write_case(folder: Path, stage: str, extra: str = "") -> Path:
    (folder / "tiny").mkdir(exist_ok=True)
    (folder / "tiny" / "config.json").write_text(json.dumps(TINY))
    cfg = folder / f"{stage}.yaml"
    cfg.write_text(CONFIG.format(stage=stage) + extra)
    return cfg


@pytest.mark.parametrize(
    ("stage", "dataset", "folder"),
    [
        ("sft", "synthetic_alpaca", "data"),
        ("dpo", "synthetic_pairwise", "data-pairwise"),
        ("rm", "synthetic_pairwise", "data-pairwise"),
        ("kto", "synthetic_kto", "data-kto"),
        ("pt", "synthetic_text", "data-text"),
    ],
)
def test_each_stage_gets_its_own_kind_of_data_in_its_own_folder(
    tmp_path: Path, stage: str, dataset: str, folder: str
) -> None:
    cfg = _write_case(tmp_path, stage)
    assets = runner.plan_assets({"model_name_or_path": "tiny", "stage": stage}, cfg, "synthetic", tmp_path / "c")
    assert assets.dataset == dataset and assets.dataset_dir == tmp_path / "c" / folder
    assert synthetic_meta.kind_named(dataset).description in assets.notes


def test_no_stage_is_sft() -> None:
    assert synthetic_meta.data_kind({}) is synthetic_meta.ALPACA


def test_rm_runs_say_the_value_head_dropout_is_off(tmp_path: Path) -> None:
    cfg = _write_case(tmp_path, "rm")
    assets = runner.plan_assets({"model_name_or_path": "tiny", "stage": "rm"}, cfg, "synthetic", tmp_path / "c")
    assert any("value head's dropout" in note for note in assets.override_notes)


def test_ppo_cannot_be_planned() -> None:
    with pytest.raises(ValueError, match="stage: ppo is not supported"):
        synthetic_meta.data_kind({"stage": "ppo"})


def _rows(tmp_path: Path, kind: synthetic_meta.DataKind) -> tuple[list[dict], dict]:
    name = synthetic.build_dataset(tmp_path / kind.folder, rows=50, kind=kind)
    info = json.loads((tmp_path / kind.folder / "dataset_info.json").read_text())
    rows = json.loads((tmp_path / kind.folder / info[name]["file_name"]).read_text())
    return rows, info[name]


def test_pairwise_rows_have_a_chosen_and_a_rejected_response(tmp_path: Path) -> None:
    rows, info = _rows(tmp_path, synthetic_meta.PAIRWISE)
    assert info["ranking"] is True
    assert info["columns"] == {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"}
    assert len(rows) == 50 and all(row["chosen"] and row["rejected"] and row["instruction"] for row in rows)
    assert any(row["chosen"] != row["rejected"] for row in rows)


def test_kto_rows_carry_a_bool_tag_of_both_values(tmp_path: Path) -> None:
    rows, info = _rows(tmp_path, synthetic_meta.KTO)
    assert info["columns"]["kto_tag"] == "kto_tag" and not info.get("ranking")
    assert {row["kto_tag"] for row in rows} == {True, False}  # a bool: LLaMA-Factory ignores any other type
    assert all(row["output"] for row in rows)


def test_text_rows_are_one_document_each(tmp_path: Path) -> None:
    rows, info = _rows(tmp_path, synthetic_meta.TEXT)
    assert info["columns"] == {"prompt": "text"}
    assert all(set(row) == {"text"} and len(row["text"].split()) >= 3 for row in rows)


def test_sft_rows_are_as_before(tmp_path: Path) -> None:
    """The Alpaca rows are the ones the SFT runs measured before (same seed, same draws): cached data and
    earlier measurements stay comparable."""
    rows, info = _rows(tmp_path, synthetic_meta.ALPACA)
    assert info == {"file_name": "synthetic_alpaca.json"}
    assert set(rows[0]) == {"instruction", "input", "output"}
    assert synthetic.dataset_rows(synthetic_meta.ALPACA, 50) == rows  # deterministic


def test_clear_cache_removes_every_kind_of_data(tmp_path: Path) -> None:
    for kind in synthetic_meta.KINDS:
        synthetic.build_dataset(tmp_path / kind.folder, rows=2, kind=kind)
    (tmp_path / "users-file").write_text("kept")
    count, _ = cache.clear(tmp_path)
    assert count == len(synthetic_meta.KINDS) and [p.name for p in tmp_path.iterdir()] == ["users-file"]


def test_mfu_counts_a_reference_forward() -> None:
    steps = [{"seconds": 1.0, "real_tokens": 1000, "padded_tokens": 1000, "supervised_tokens": 500}] * 4
    metrics = {"steps": steps, "parameters": 10**9, "trainable_parameters": 10**9, "peak_tflops": 1000.0}
    plain = comparison.summarize(metrics)["mfu"]
    with_reference = comparison.summarize({**metrics, "reference_forward": True})["mfu"]
    assert with_reference == pytest.approx(plain * 8 / 6)
    assert synthetic_meta.reference_forward({"stage": "dpo"}) and synthetic_meta.reference_forward({"stage": "kto"})
    assert not synthetic_meta.reference_forward({"stage": "dpo", "pref_loss": "simpo"})
    assert not synthetic_meta.reference_forward({"stage": "rm"})


# Run in the session's LLaMA-Factory child (tests/support/llamafactory_child.py: the worker's placeholder for
# torchaudio, this process's modules as they are), all kinds in one script.
_CONVERT = """
import json, sys
from llamafactory.data.converter import AlpacaDatasetConverter
from llamafactory.data.parser import get_dataset_list
out = {}
for name, folder, rows_file in json.loads(sys.argv[1]):
    (attr,) = get_dataset_list([name], folder)
    converter = AlpacaDatasetConverter(attr, data_args=None)  # read only for media columns, which these lack
    rows = json.load(open(rows_file))[:10]
    out[name] = {"ranking": attr.ranking, "converted": [converter(row) for row in rows]}
print(json.dumps(out))
"""


def _check_converted(kind: synthetic_meta.DataKind, rows: list[dict], converted: list[dict]) -> None:
    for row, out in zip(rows[:10], converted, strict=True):
        assert out["_prompt"][-1]["role"] == "user" and out["_prompt"][-1]["content"]
        contents = [message["content"] for message in out["_response"]]
        if kind is synthetic_meta.PAIRWISE:
            assert contents == [row["chosen"], row["rejected"]]
        elif kind is synthetic_meta.KTO:
            assert contents == ([row["output"], ""] if row["kto_tag"] else ["", row["output"]])
        else:
            assert contents == [] and out["_prompt"][-1]["content"] == row["text"]


@pytest.mark.oracle
def test_llamafactory_reads_each_kind_as_its_stage_needs(tmp_path: Path, llamafactory_child: LlamaFactoryChild) -> None:
    """LLaMA-Factory 0.9.5's own parser and Alpaca converter: a pairwise sample gives two responses (a ranking
    dataset), a KTO sample one response beside an empty one (which side says the tag), a text row a prompt
    and no response."""
    if importlib.util.find_spec("llamafactory") is None:
        pytest.skip("needs llamafactory")
    kinds = [synthetic_meta.PAIRWISE, synthetic_meta.KTO, synthetic_meta.TEXT]
    rows = {kind.dataset: _rows(tmp_path, kind)[0] for kind in kinds}
    where = [
        [kind.dataset, str(tmp_path / kind.folder), str(tmp_path / kind.folder / kind.info["file_name"])]
        for kind in kinds
    ]
    proc = llamafactory_child.run(_CONVERT, json.dumps(where), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    read = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind in kinds:
        assert read[kind.dataset]["ranking"] is (kind is synthetic_meta.PAIRWISE)
        _check_converted(kind, rows[kind.dataset], read[kind.dataset]["converted"])


def _verify(cfg: Path, cache_dir: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = cfg.with_suffix(".json")
    command = [sys.executable, "-m", "cfgopt", "verify", str(cfg), "--steps", "3", "--target", "cpu"]
    command += ["--mode", "synthetic", "--cache-dir", str(cache_dir), "--json", str(report), *extra]
    proc = subprocess.run(command, cwd=cfg.parent, capture_output=True, text=True, timeout=600, env=ENV)
    return proc, json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.oracle
# dpo in the default run (a pairwise batch: both sequences of a sample counted); kto, rm and pt, a real trainer
# run of 11-16 s each on the 2-core machine, with --full: the default run stays under 6 minutes there. By default
# kto's KL inputs are left out of the count on a batch of its collator's keys (test_verify_tokens.py), and
# LLaMA-Factory reads its synthetic rows as KTO rows (above); its trainer runs with --full.
@pytest.mark.parametrize(
    "stage", ["dpo", *(pytest.param(stage, marks=pytest.mark.slow) for stage in ("kto", "rm", "pt"))]
)
def test_cpu_run_of_a_stage_measures_tokens_per_second(tmp_path: Path, verify_cache: Path, stage: str) -> None:
    """The real trainer of each stage (10-20 s each on 2 cores; the first also builds the shared tiny model):
    exit 0, steps measured, tokens/s, a finite loss; pairwise stages count both sequences of a sample."""
    pytest.importorskip("llamafactory")
    proc, data = _verify(_write_case(tmp_path, stage), verify_cache, "--only-original")
    original = data.get("original", {})
    assert proc.returncode == 0 and original.get("error") is None, proc.stderr[-3000:]
    assert original["steps_measured"] >= 2 and original["real_tokens_per_s"] > 0 and original["loss_finite"]
    assert "real tokens/s" in proc.stdout and original["stage"] == stage
    assert not (tmp_path / "users_output_dir").exists()
    if stage == "rm":
        assert "value head dropout off (same loss for any batch split)" in original["notes"]
    first = data["per_step"]["original"][0]  # 2 samples a micro-batch; pairwise: a chosen and a rejected each
    assert first["sequences"] == (4 if stage in ("dpo", "rm") else 2), first


@pytest.mark.oracle
@pytest.mark.slow  # two runs, about 30 s; the rm run above covers the stage by default
def test_rm_runs_compare_step_by_step_across_batch_splits(tmp_path: Path, verify_cache: Path) -> None:
    """With the value head's dropout off, a run of 1 x 2 micro-batches computes the first step's loss as the
    2 x 1 run does (same weights, same samples)."""
    pytest.importorskip("llamafactory")
    cfg = _write_case(tmp_path, "rm")
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(
        cfg.read_text().replace("per_device_train_batch_size: 2", "per_device_train_batch_size: 1")
        + "gradient_accumulation_steps: 2\n"
    )
    proc, data = _verify(cfg, verify_cache, "--fixed", str(fixed))
    first = [data["losses"][label][0]["loss"] for label in ("original", "fixed")]
    assert first[0] == pytest.approx(first[1], rel=1e-4), proc.stderr[-3000:]
    assert "value head's dropout" in proc.stderr


@pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in preflight.PACKAGES),
    reason="verify and tune first ask for their packages",
)
@pytest.mark.parametrize("command", ["verify", "tune"])
def test_ppo_is_refused_with_one_line(tmp_path: Path, command: str) -> None:
    cfg = _write_case(tmp_path, "ppo", "reward_model: saves/rm\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cfgopt", command, str(cfg), "--mode", "synthetic", "--target", "cpu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cfgopt {command}: " in lines[0] and "stage: ppo is not supported" in lines[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "users_output_dir").exists()
