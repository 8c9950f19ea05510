"""Memory and the plan use the job's data (issue 36). Memory: without packing, the estimate's peak micro-batch
holds the dataset's longest sample cut at `cutoff_len`, not `cutoff_len` itself; packs fill `cutoff_len`; pairwise
data counts chosen and rejected; without local data the output says it assumed `cutoff_len`. The plan: its
expected gain weighs unpacked candidates by the padding measured on the data (cfgopt.plan.data_speed)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from repo_paths import ROOT

from cfgopt.job.settings import Settings
from cfgopt.project.loader import load_job

CASES = ROOT / "fixtures" / "data"


@pytest.fixture(autouse=True)
def _in_case_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CFGOPT_CACHE_DIR", str(tmp_path / "cache"))


def _job(tmp_path: Path, case: str, extra: str = ""):
    folder = tmp_path / case
    shutil.copytree(CASES / case, folder)
    config = folder / "train.yaml"
    config.write_text(config.read_text() + extra)
    return load_job(config, Settings(target_name="h200", gpus=1)), folder


def _longest(case: str) -> int:
    return json.loads((CASES / case / "profile.json").read_text())["longest_after_cut"]


def test_unpacked_estimate_holds_the_longest_sample_not_cutoff_len(tmp_path, monkeypatch):
    job, folder = _job(tmp_path, "short")
    monkeypatch.chdir(folder)
    est = job.estimate(1)
    assert est is not None
    assert est.seq_len == math.ceil(2048 * _longest("short") / 2048)  # 56 tokens, not 2048
    assert est.tokens == 4 * est.seq_len
    assert "the longest sample of short as measured" in job.sequence_basis()


def test_packing_fills_cutoff_len(tmp_path, monkeypatch):
    job, folder = _job(tmp_path, "short", "packing: true\n")
    monkeypatch.chdir(folder)
    est = job.estimate(1)
    assert est is not None and est.seq_len == 2048
    assert job.sequence_basis() == "packs of cutoff_len tokens"
    assert job.estimate(1, packing=False).seq_len == _longest("short")  # a plan's change re-reads the data


def test_pairwise_counts_chosen_and_rejected_at_the_longer_answer(tmp_path, monkeypatch):
    job, folder = _job(tmp_path, "pairwise")
    monkeypatch.chdir(folder)
    est = job.estimate(1)
    assert est is not None
    assert est.seq_len == _longest("pairwise")  # prompt + the longer answer, under cutoff 1024
    assert est.tokens == 2 * 4 * est.seq_len


def test_truncating_cutoff_keeps_cutoff_len(tmp_path, monkeypatch):
    job, folder = _job(tmp_path, "long")
    monkeypatch.chdir(folder)
    assert job.estimate(1).seq_len == 512  # 95% of samples are longer: the peak batch reaches cutoff_len


def test_without_local_data_the_assumption_is_said(tmp_path, monkeypatch):
    job, folder = _job(tmp_path, "short")
    shutil.rmtree(folder / "data")
    monkeypatch.chdir(folder)
    assert job.estimate(1).seq_len == 2048
    assert job.sequence_basis().startswith("every sequence assumed cutoff_len long: data not profiled")


def test_mem001_says_how_sequences_were_sized(tmp_path, monkeypatch, capsys):
    from cfgopt.cli import main

    _, folder = _job(tmp_path, "long")
    config = folder / "train.yaml"
    config.write_text(config.read_text().replace("per_device_train_batch_size: 4", "per_device_train_batch_size: 256"))
    monkeypatch.chdir(folder)
    main(["lint", "--target", "h200", "--gpus", "1", "--select", "MEM001", "--format", "json", str(config)])
    found = [d for d in json.loads(capsys.readouterr().out)["diagnostics"] if d["code"] == "MEM001"]
    assert found and "the longest sample of long as measured" in found[0]["message"]


def _plan(job):
    from cfgopt.plan.planner import plan_for

    return plan_for(job)


def description(plan) -> str:
    from cfgopt.plan.wording import description as words

    return words(plan)


def test_the_plan_expects_more_of_packing_on_short_data_than_on_long(tmp_path, monkeypatch):
    _, folder = _job(tmp_path, "short")
    config = folder / "train.yaml"
    config.write_text(config.read_text().replace("cutoff_len: 2048", "cutoff_len: 512"))  # as the long case
    monkeypatch.chdir(folder)
    short_plan = _plan(load_job(config, Settings(target_name="h200", gpus=1)))
    long, folder = _job(tmp_path, "long")
    monkeypatch.chdir(folder)
    long_plan = _plan(long)
    assert short_plan.best.packing and "padding measured on short" in description(short_plan)
    assert short_plan.gain > 2 * long_plan.gain  # same cutoff and micro-batch: only the lengths differ


def test_without_local_data_the_packing_prior_is_named(tmp_path, monkeypatch):
    job, folder = _job(tmp_path, "short")
    shutil.rmtree(folder / "data")
    monkeypatch.chdir(folder)
    plan = _plan(job)
    assert plan.best.packing
    assert "packing's gain from Alpaca-like data (the job's data not profiled)" in description(plan)


def test_the_simulated_reference_pads_as_the_runs_measured():
    from cfgopt.job.data_lengths import padding
    from cfgopt.plan.data_speed import REFERENCE_CUTOFF, _reference

    # bench/h200/measurements.md V4 (4 x 4) and V5 (16 x 1): real / padded tokens 2852 / 5112 and 2852 / 7444
    for micro, measured in ((4, 1 - 2852 / 5112), (16, 1 - 2852 / 7444)):
        assert abs(padding(_reference(), REFERENCE_CUTOFF, micro).share - measured) < 0.04


def test_tune_prunes_by_the_data_it_trains_on(tmp_path, monkeypatch):
    """tune's memory pruning sizes the DPO pairs by their measured lengths where the runs use the job's data
    (issue 36: candidates pruned at 128-548 GiB that the data allowed)."""
    from cfgopt.job.job import lf_values
    from cfgopt.tune import search

    job, folder = _job(tmp_path, "pairwise")
    monkeypatch.chdir(folder)
    config = dict(job.data)

    def fits(**data):
        return search.MemoryFits(job.shape, job.settings.target, 1, fill=lambda c: lf_values(c, job.lf), **data)

    _, assumed = fits()(config)
    _, measured = fits(data_fill=job.data_fill)(config)
    assert measured < assumed
    assert measured == pytest.approx(job.estimate(1).peak_gib)


def test_tune_ranks_by_the_data_only_where_its_runs_train_on_it(tmp_path, monkeypatch):
    from cfgopt.plan import space
    from cfgopt.tune.command import _data_factor

    job, folder = _job(tmp_path, "short")
    monkeypatch.chdir(folder)

    class OwnData:
        def trains_on_job_data(self) -> bool:
            return True

    assert _data_factor(job, object()) is None  # synthetic stand-ins: the priors' own lengths
    factor = _data_factor(job, OwnData())
    base = space.baseline_knobs(job.values(), None)
    assert factor(base) < 0.5  # 38-token samples: an unpacked 4-sample micro-batch is mostly idle GPU
    assert factor(base._replace(packing=True)) == 1.0  # packs of 2048, as the reference's
