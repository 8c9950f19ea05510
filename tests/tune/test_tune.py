"""`cfgopt tune`: the search on CPU with a fake runner that stands in for timing only (pruning, ranking, budget,
OOM neighbours, cache resume, global batch kept, the winner as span edits), and a CPU smoke run of the real
runner on a tiny model (oracle group: needs llamafactory)."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from rule_cases import ROOT
from tiny_model import TINY

from cfgopt.plan import space
from cfgopt.text.document import Document
from cfgopt.tune import command, report, search
from cfgopt.tune.candidates import make_candidates
from cfgopt.tune.options import KNOBS, add_arguments
from cfgopt.tune.session import RealSession, measurement_from

CONFIG = """# a LoRA SFT config; this comment must survive the fix
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: saves/x   # trailing comment
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
learning_rate: 1.0e-4
bf16: true
flash_attn: sdpa
{extra}"""

DS_Z3 = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}
CUDA = space.Platform(cuda=True, device="FAKE GPU", gpu_count=8, flash_attn=False, liger=True, deepspeed=True)


# ---------------------------------------------------------------- a fake machine: timing and memory only

ZERO_SPEED = {"none": 1.0, "z2": 0.9, "z2_offload": 0.4, "z3": 0.6, "z3_offload": 0.25}


def true_speed(k: space.Knobs) -> float:
    """Not the prior on purpose: eager as fast as sdpa, Liger +10%, packing 2.5x."""
    s = 1000.0 * k.micro**0.15
    s *= 1.3 if not k.gc else 1.0
    s *= 2.5 if k.packing else 1.0
    s *= 1.1 if k.liger else 1.0
    return s * ZERO_SPEED.get(k.zero, 0.5)


def true_peak(k: space.Knobs) -> float:
    per = (2.0 if k.gc else 9.0) * (1.5 if k.packing else 1.0) * (0.6 if k.liger else 1.0)
    return 16.0 + k.micro * per * (0.5 if k.zero.startswith("z3") else 1.0)


class FakeRunner:
    def __init__(self, capacity: float = 100.0, wall: float = 60.0) -> None:
        self.capacity, self.wall, self.calls = capacity, wall, []

    def __call__(self, c: search.Candidate) -> search.Measurement:
        self.calls.append(c.knobs)
        peak = true_peak(c.knobs)
        if peak > self.capacity:
            return search.Measurement(
                error="OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", wall_s=20
            )
        return search.Measurement(tokens_per_s=true_speed(c.knobs), peak_gib=peak, wall_s=self.wall, device="FAKE")


def fake_fits(limit: float):
    def fits(resolved: dict) -> tuple[bool, float]:
        k = resolved["_knobs"]
        est = true_peak(k) * 1.05
        return est <= limit, est

    return fits


def make(config: dict, platform=CUDA, gpus=1, allow_packing=False, knobs=KNOBS, user_ds=None, work=None):
    base, knobs_list = space.build_space(
        config, user_ds, platform, space.SpaceOptions(gpus=gpus, allow_packing=allow_packing, knobs=knobs)
    )
    cands = make_candidates(
        config, user_ds, base, knobs_list, work or Path("/nonexistent"), lambda r: json.dumps(r, sort_keys=True)
    )
    for c in cands:
        c.resolved["_knobs"] = c.knobs  # lets fake_fits read the knobs back
    return base, cands


def cfg(**over) -> dict:
    base = {
        "model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct",
        "stage": "sft",
        "finetuning_type": "lora",
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 4,
        "flash_attn": "sdpa",
        "bf16": True,
        "cutoff_len": 2048,
    }
    base.update(over)
    return base


# ---------------------------------------------------------------- the space


def test_global_batch_is_kept_and_micro_batches_are_divisors() -> None:
    base, cands = make(cfg(gradient_accumulation_steps=3), allow_packing=True)
    assert base == space.Knobs(4, 3, True, "sdpa", False, False, "none")
    assert {c.knobs.micro for c in cands} == {1, 2, 3, 4, 6, 12}
    for c in cands:
        assert c.knobs.micro * c.knobs.ga == 12
        got = c.config.get("per_device_train_batch_size", 4) * c.config.get("gradient_accumulation_steps", 3)
        assert got == 12
    assert cands[0].baseline and cands[0].config == cfg(gradient_accumulation_steps=3)
    assert len({c.knobs for c in cands}) == len(cands)


def test_knobs_follow_the_platform_and_the_options() -> None:
    _, cands = make(cfg())
    seen = {k: {getattr(c.knobs, k) for c in cands} for k in ("gc", "attn", "packing", "liger", "zero")}
    assert seen == {
        "gc": {True, False},
        "attn": {"sdpa", "disabled"},  # fa2 only where flash_attn imports
        "packing": {False},  # opt-in
        "liger": {False, True},
        "zero": {"none"},  # one GPU: no DeepSpeed
    }
    _, cands = make(cfg(), platform=space.Platform(), allow_packing=True)  # CPU: no Liger, no fa2
    assert {c.knobs.liger for c in cands} == {False} and {c.knobs.packing for c in cands} == {False, True}
    _, cands = make(cfg(stage="dpo"), allow_packing=True)
    assert {c.knobs.packing for c in cands} == {False}  # packing is for SFT only
    fa = space.Platform(cuda=True, flash_attn=True, liger=True, deepspeed=True)
    _, cands = make(cfg(flash_attn="auto"), platform=fa, knobs=("attn",))
    assert [c.knobs.attn for c in cands] == ["sdpa", "disabled", "fa2"]  # auto counts as sdpa
    assert "flash_attn" not in cands[0].config or cands[0].config["flash_attn"] == "auto"


GEMMA2 = "google/gemma-2-9b-it"
CUDA_FA2 = space.Platform(cuda=True, device="FAKE GPU", gpu_count=8, flash_attn=True, liger=True, deepspeed=True)


@pytest.mark.parametrize("platform", [CUDA, CUDA_FA2])
def test_gemma2_is_searched_as_the_plan_plans_it(platform: space.Platform) -> None:
    """Gemma 2 soft-caps its attention, which SDPA drops: tune's space offers no SDPA (the plan's rule,
    `space.refusal`), and `flash_attn: auto` is its baseline as fa2, which LLaMA-Factory turns it into (eager
    without flash-attn)."""
    options = space.SpaceOptions(knobs=("attn", "gc"), soft_capped=True)
    base, knobs = space.build_space(cfg(model_name_or_path=GEMMA2, flash_attn="auto"), None, platform, options)
    assert base.attn == "fa2" and {k.attn for k in knobs} == ({"fa2", "disabled"})
    _, knobs = space.build_space(cfg(model_name_or_path=GEMMA2), None, platform, options)
    assert {k.attn for k in knobs} >= {"sdpa", "disabled"}  # the user's own sdpa stays the baseline


def test_tune_builds_its_options_from_the_job(tmp_path: Path) -> None:
    """`cfgopt tune` on a Gemma 2 config (flash_attn unset): no candidate runs SDPA, and none rewrites the baseline's
    `auto` to `fa2` (the same run)."""
    path = tmp_path / "cfg.yaml"
    path.write_text(
        CONFIG.format(extra="").replace("meta-llama/Meta-Llama-3-8B-Instruct", GEMMA2).replace("flash_attn: sdpa\n", "")
    )
    session = FakeSession(platform=CUDA_FA2)
    code = command.run(_args(path, "--knobs", "attn", "--json", str(tmp_path / "r.json")), session)
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert code == 0 and rows[0]["knobs"]["attn"] == "fa2"
    assert {r["knobs"]["attn"] for r in rows} == {"fa2", "disabled"}


def test_zero_variants_on_several_gpus_write_deepspeed_json(tmp_path: Path) -> None:
    base, cands = make(cfg(deepspeed="ds.json"), gpus=4, user_ds=DS_Z3, knobs=("zero", "micro"), work=tmp_path)
    assert base.zero == "z3"
    by = {(c.knobs.zero, c.knobs.micro): c for c in cands}
    assert {z for z, _ in by} == set(space.ZERO_VALUES)
    assert "deepspeed" not in by[("none", 4)].config  # DDP: the key is dropped
    assert by[("z3", 4)].config["deepspeed"] == "ds.json"  # unchanged knob: the user's file as it is
    pinned = by[("z3", 8)]  # the user pinned the micro batch in the JSON: a copy with "auto"
    assert json.loads(Path(pinned.config["deepspeed"]).read_text())["train_micro_batch_size_per_gpu"] == "auto"
    z2 = json.loads(Path(by[("z2_offload", 4)].config["deepspeed"]).read_text())
    assert z2["zero_optimization"]["stage"] == 2 and z2["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert by[("z3_offload", 4)].resolved["deepspeed"]["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert space.zero_of({"zero_optimization": {"stage": "2", "offload_optimizer": {"device": "cpu"}}}) == "z2_offload"
    optim_only = by[("z3_optim_offload", 4)].resolved["deepspeed"]["zero_optimization"]
    assert optim_only["offload_optimizer"]["device"] == "cpu" and "offload_param" not in optim_only
    assert by[("z1", 4)].resolved["deepspeed"]["zero_optimization"]["stage"] == 1
    for zero in space.ZERO_VALUES[1:]:  # each template reads back as its own variant
        assert space.zero_of(space.deepspeed_template(zero)) == zero


# ---------------------------------------------------------------- the search


def test_memory_pruning_happens_before_any_run() -> None:
    _, cands = make(cfg(), allow_packing=True)
    runner = FakeRunner()
    result = search.search(cands, runner, fake_fits(80.0), budget_s=1e9, patience=0)
    pruned = [r for r in result.rows if r.status == search.PRUNED_MEMORY]
    assert pruned and all(r.candidate.est_peak_gib > 80.0 for r in pruned)
    assert not {r.candidate.knobs for r in pruned} & set(runner.calls)
    assert "does not fit" in pruned[0].reason
    # with everything that fits run, nothing ran out of memory and the winner is the true best that fits
    assert not any(r.status == search.OOM for r in result.rows)
    fitting = [c.knobs for c in cands if true_peak(c.knobs) * 1.05 <= 80.0]
    assert result.winner.candidate.knobs == max(fitting, key=true_speed)


def test_baseline_first_then_by_prior() -> None:
    _, cands = make(cfg(), allow_packing=True)
    runner = FakeRunner(capacity=1e9)
    search.search(cands, runner, budget_s=1e9, patience=0, learn=0)  # no learning: the prior order exactly
    assert runner.calls[0] == cands[0].knobs == runner.calls[-1]  # beaten: measured again at the end
    priors = [search.prior_speed(k) for k in runner.calls[1:-1]]
    assert priors == sorted(priors, reverse=True)
    top = runner.calls[1]
    assert top.packing and top.liger and not top.gc and top.micro == 16 and top.attn == "sdpa"


def test_a_prior_factor_reorders_the_candidates() -> None:
    """The planner's data term (where the runs train on the job's own data) ranks tune's candidates too: on data
    whose samples fill their micro-batches, unpacked candidates move up."""
    _, cands = make(cfg(), allow_packing=True)
    runner = FakeRunner(capacity=1e9)

    def unpacked_first(k) -> float:
        return 1.0 if k.packing else 100.0

    search.search(cands, runner, budget_s=1e9, patience=0, learn=0, prior_factor=unpacked_first)
    assert not runner.calls[1].packing
    priors = [search.prior_speed(k) * unpacked_first(k) for k in runner.calls[1:-1]]
    assert priors == sorted(priors, reverse=True)


def test_measurements_correct_the_prior_ranking() -> None:
    def slow_liger(
        c: search.Candidate,
    ) -> search.Measurement:  # this machine: Liger makes things slower, not 1.2x faster
        speed = 1000 * search.prior_speed(c.knobs) * (0.6 / 1.196 if c.knobs.liger else 1.0)
        return search.Measurement(tokens_per_s=speed, peak_gib=1.0, wall_s=1.0)

    orders = {}
    for learn in (0.0, 1.0):
        _, cands = make(cfg(), knobs=("micro", "liger", "gc"))
        calls: list[space.Knobs] = []
        search.search(
            cands, lambda c, calls=calls: (calls.append(c.knobs), slow_liger(c))[1], budget_s=1e9, learn=learn
        )
        orders[learn] = calls
    assert [k.liger for k in orders[0.0][1:4]] == [True, True, False]  # the prior keeps trying Liger
    assert [k.liger for k in orders[1.0][1:4]] == [True, False, False]  # one slow Liger run demotes the rest
    best = space.Knobs(16, 1, False, "sdpa", False, False, "none")
    assert orders[1.0].index(best) < orders[0.0].index(best)
    fitted = search.Corrections()
    c = search.Candidate(0, best, {}, {}, "k", prior=search.prior_speed(best))
    fitted.observe(c, 1000.0)
    assert fitted.predict(c) == pytest.approx(math.log(c.prior))  # one point: all in the free offset


def test_prior_uses_the_measured_h200_ratios() -> None:
    k = space.Knobs(4, 4, True, "sdpa", False, False, "none")
    assert search.prior_speed(space.with_micro(k, 16)) / search.prior_speed(k) == pytest.approx(1.32, abs=0.01)  # V5/V4
    assert search.prior_speed(space.Knobs(4, 4, False, "sdpa", True, True, "none")) / search.prior_speed(
        space.Knobs(4, 4, True, "sdpa", True, True, "none")
    ) == pytest.approx(1.37)  # V10/V7
    assert search.prior_speed(space.Knobs(4, 4, True, "sdpa", False, False, "z3")) < 0.25 * search.prior_speed(
        k
    )  # V2/V4


def test_budget_stops_the_search_and_is_accounted() -> None:
    _, cands = make(cfg())
    runner = FakeRunner(capacity=1e9, wall=100.0)
    result = search.search(cands, runner, budget_s=350.0, patience=0)
    # baseline + 2: after 300 s a 100 s run would pass 350 s; then the beaten baseline again, past the budget
    assert len(runner.calls) == 4 and runner.calls[-1] == cands[0].knobs
    assert result.spent_s == pytest.approx(400.0) and result.stopped == "budget"
    skipped = [r for r in result.rows if r.status == search.NOT_RUN_BUDGET]
    assert len(skipped) == len(cands) - 3
    # the baseline is measured even with no budget at all
    runner = FakeRunner(capacity=1e9)
    result = search.search(cands, runner, budget_s=0, patience=0)
    assert runner.calls == [cands[0].knobs] and result.winner is result.baseline


def test_oom_prunes_its_neighbours() -> None:
    _, cands = make(cfg(), knobs=("micro", "gc", "liger"))
    runner = FakeRunner(capacity=50.0)
    result = search.search(cands, runner, budget_s=1e9, patience=0)
    rows = {(r.candidate.knobs.micro, r.candidate.knobs.gc, r.candidate.knobs.liger): r for r in result.rows}
    # Liger on ranks first; (8, GC off, Liger on) runs out of memory, so the same without Liger (which needs
    # more) and every larger micro batch with GC off are never run
    assert rows[(8, False, True)].status == search.OOM and rows[(16, False, True)].status == search.OOM
    for key in ((8, False, False), (16, False, False)):
        assert rows[key].status == search.PRUNED_OOM and "ran out of memory" in rows[key].reason
    assert not {r.candidate.knobs for r in result.rows if r.status == search.PRUNED_OOM} & set(runner.calls)
    assert rows[(4, False, True)].status == search.MEASURED  # a smaller micro batch is still tried
    assert rows[(16, True, True)].status == search.MEASURED  # GC on is not a neighbour of GC off
    oom = rows[(8, False, True)].candidate.knobs
    assert search.hungrier_or_equal(space.Knobs(16, 1, False, "sdpa", False, False, "none"), oom)
    assert not search.hungrier_or_equal(space.Knobs(16, 1, True, "sdpa", False, False, "none"), oom)
    assert not search.hungrier_or_equal(space.Knobs(16, 1, False, "disabled", False, True, "none"), oom)
    # the winner is the fastest that ran
    assert result.winner.candidate.knobs == max(
        (r.candidate.knobs for r in result.rows if r.status == search.MEASURED), key=true_speed
    )


def test_patience_and_min_gain() -> None:
    _, cands = make(cfg(), knobs=("attn", "micro"))
    runner = FakeRunner(capacity=1e9)
    result = search.search(cands, runner, budget_s=1e9, patience=2)
    assert result.stopped == "patience" and len(runner.calls) < len(cands)
    assert any(r.status == search.NOT_RUN_PATIENCE for r in result.rows)

    def almost_flat(c: search.Candidate) -> search.Measurement:  # everything within 1% of the baseline
        return search.Measurement(tokens_per_s=1000.0 + c.index, peak_gib=10.0, wall_s=1.0)

    result = search.search(cands, almost_flat, budget_s=1e9, patience=0)
    assert result.winner is result.baseline  # not 3% faster: keep the config as it is


def test_cache_resumes_a_search(tmp_path: Path) -> None:
    _, cands = make(cfg(), allow_packing=True)
    cache_file = tmp_path / "cache.json"
    first = FakeRunner(capacity=1e9, wall=100.0)
    r1 = search.search(cands, first, budget_s=450.0, cache=search.ResultCache(cache_file), patience=0)
    assert len(first.calls) == 5 and r1.stopped == "budget"  # the fifth: the beaten baseline measured again
    # run again as it was (e.g. after an interruption): every decision replays from the cache, nothing runs
    again = FakeRunner(capacity=1e9, wall=100.0)
    r2 = search.search(cands, again, budget_s=450.0, cache=search.ResultCache(cache_file), patience=0)
    assert again.calls == [] and [r.status for r in r2.rows] == [r.status for r in r1.rows]
    assert r2.winner.candidate.key == r1.winner.candidate.key and r2.spent_s == 0
    # a larger budget goes on from there
    second = FakeRunner(capacity=1e9, wall=100.0)
    r3 = search.search(cands, second, budget_s=850.0, cache=search.ResultCache(cache_file), patience=0)
    assert len(second.calls) == 4 and not set(second.calls) & set(first.calls)  # new candidates only
    cached = [r for r in r3.rows if r.cached]
    assert len(cached) == 4 and all(r.measurement.wall_s == 100.0 for r in cached)
    assert r3.search_s == pytest.approx(800.0) and r3.spent_s == pytest.approx(400.0)
    data = json.loads(cache_file.read_text())
    assert data["version"] == 1 and len(data["entries"]) == 8
    # a corrupt cache is ignored, not fatal
    cache_file.write_text("{not json")
    assert search.ResultCache(cache_file).entries == {}


class ColdFirstRun(FakeRunner):
    """A machine whose first run pays one-time costs: it measures `cold` of its true speed."""

    def __init__(self, cold: float = 0.75, second: search.Measurement | None = None) -> None:
        super().__init__(capacity=1e9)
        self.cold, self.second = cold, second

    def __call__(self, c: search.Candidate) -> search.Measurement:
        m = super().__call__(c)
        if len(self.calls) == 1:
            m.tokens_per_s = (m.tokens_per_s or 0.0) * self.cold
        elif self.second is not None and c.knobs == self.calls[0]:
            return self.second
        return m


def test_a_beaten_baseline_measured_first_is_measured_again(tmp_path: Path) -> None:
    """The H200's Qwen2.5-7B search: the first run (cold caches) 0.78x of the same settings run later. Measured
    again, the baseline holds its own, and the verdict is "nothing to change"."""
    _, cands = make(cfg(), knobs=("attn",))  # sdpa vs disabled (eager): the same speed on the fake machine
    cache = search.ResultCache(tmp_path / "cache.json")
    runner = ColdFirstRun()
    result = search.search(cands, runner, budget_s=1e9, patience=0, cache=cache)
    assert runner.calls == [cands[0].knobs, cands[1].knobs, cands[0].knobs]
    assert result.winner is result.baseline
    first = true_speed(cands[0].knobs) * 0.75
    assert result.baseline.tokens_per_s == pytest.approx(true_speed(cands[0].knobs))
    assert result.baseline.reason == f"measured again after the search (first run {first:,.0f} tokens/s)"
    assert result.spent_s == pytest.approx(180.0)
    # the cache keeps the second figure: run again, nothing runs and nothing is measured a third time
    again = FakeRunner(capacity=1e9)
    replay = search.search(cands, again, budget_s=1e9, patience=0, cache=search.ResultCache(tmp_path / "cache.json"))
    assert again.calls == [] and replay.baseline.tokens_per_s == pytest.approx(true_speed(cands[0].knobs))


def test_a_second_baseline_run_that_fails_leaves_the_first_figure() -> None:
    _, cands = make(cfg(), knobs=("attn",))
    runner = ColdFirstRun(cold=0.5, second=search.Measurement(error="RuntimeError: NCCL timeout", wall_s=5.0))
    result = search.search(cands, runner, budget_s=1e9, patience=0)
    assert len(runner.calls) == 3 and result.winner is not result.baseline
    assert result.baseline.tokens_per_s == pytest.approx(true_speed(cands[0].knobs) * 0.5)


def test_a_baseline_that_wins_is_not_measured_again() -> None:
    _, cands = make(cfg(), knobs=("attn",))
    runner = FakeRunner(capacity=1e9)
    result = search.search(cands, runner, budget_s=1e9, patience=0)
    assert runner.calls == [cands[0].knobs, cands[1].knobs] and result.winner is result.baseline


def test_too_few_steps_for_the_warmup_is_said(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(extra=""))
    command.run(_args(path, "--steps", "2", "--warmup", "1", "--knobs", "attn"), FakeSession())
    err = capsys.readouterr().err
    assert "--steps 2 leaves 0 of the 1 warm-up step(s) untimed" in err and "--steps 3 or more" in err
    command.run(_args(path, "--steps", "3", "--warmup", "1", "--knobs", "attn"), FakeSession())
    assert "warm-up" not in capsys.readouterr().err


def test_memory_fits_adapts_to_the_memory_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.knowledge.model_shapes import shape_for
    from cfgopt.knowledge.targets import TARGETS

    shape, target = shape_for("meta-llama/Meta-Llama-3-8B"), TARGETS["h200"]
    monkeypatch.setitem(sys.modules, "cfgopt.memory.estimate", None)  # as if the module did not exist
    fits = search.MemoryFits(shape, target, 1)
    assert fits.note == "no memory model: nothing pruned" and fits({"x": 1}) == (True, None)
    seen = {}

    def estimate(config, shape_, target_, gpus, deepspeed):
        seen.update(config=config, gpus=gpus, deepspeed=deepspeed)
        return types.SimpleNamespace(peak_gib=20.0 * config["per_device_train_batch_size"])

    monkeypatch.setitem(sys.modules, "cfgopt.memory.estimate", types.SimpleNamespace(estimate=estimate))
    fits = search.MemoryFits(shape, target, 2, margin=0.10)
    assert fits({"per_device_train_batch_size": 6}) == (True, 120.0)  # 120 <= 0.9 * 141
    assert fits({"per_device_train_batch_size": 7, "deepspeed": {"a": 1}}) == (False, 140.0)
    assert seen["gpus"] == 2 and seen["deepspeed"] == {"a": 1}
    # the model raised: run it, do not prune (the config is filled with the version's defaults first)
    assert fits({"per_device_train_batch_size": None}) == (True, None) and fits.failures == 1
    assert search.MemoryFits(None, target, 1).note.startswith("model shape unknown")
    assert "no memory size" in search.MemoryFits(shape, TARGETS["cpu"], 1).note


def test_a_machine_with_less_memory_than_the_target_bounds_what_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tune for an h200 on an 80 GB H100 (what the device lent on 2026-12-05): a candidate that fits 141 GiB and not
    the H100 is not run there to run out of memory; a machine with more memory than the target, or unknown (no
    CUDA), leaves the target's limit."""
    from cfgopt.environment import Platform
    from cfgopt.knowledge.model_shapes import shape_for
    from cfgopt.knowledge.targets import TARGETS

    def estimate(config, shape_, target_, gpus, deepspeed):
        return types.SimpleNamespace(peak_gib=float(config["per_device_train_batch_size"]))

    monkeypatch.setitem(sys.modules, "cfgopt.memory.estimate", types.SimpleNamespace(estimate=estimate))
    shape, h200 = shape_for("meta-llama/Meta-Llama-3-8B"), TARGETS["h200"]
    h100 = Platform(cuda=True, device="NVIDIA H100 80GB HBM3", gpu_count=1, memory_gib=79.2)
    fits = search.MemoryFits(shape, h200, 1, machine=h100)
    assert fits({"per_device_train_batch_size": 71}) == (True, 71.0)
    assert fits({"per_device_train_batch_size": 100}) == (False, 100.0)  # fits 127 GiB, not 71 here
    assert fits.note.startswith("memory model: pruned above 71 GiB (90% of 79 GiB on this machine's NVIDIA H100")
    assert "141 GiB of h200" in fits.note
    for machine in (Platform(cuda=True, memory_gib=192.0), Platform(), None):
        fits = search.MemoryFits(shape, h200, 1, machine=machine)
        assert fits.limit_gib == pytest.approx(0.9 * 141) and fits.note.endswith("(90% of 141 GiB on h200)")


def test_the_real_memory_model_prunes_what_the_h200_could_not_hold() -> None:
    pytest.importorskip("cfgopt.memory.estimate")
    from cfgopt.knowledge.model_shapes import shape_for
    from cfgopt.knowledge.targets import TARGETS

    fits = search.MemoryFits(shape_for("meta-llama/Meta-Llama-3-8B-Instruct"), TARGETS["h200"], 1)
    assert fits.note.startswith("memory model: pruned above 127 GiB")
    v11 = {**cfg(per_device_train_batch_size=8, gradient_accumulation_steps=2), "packing": True}
    v11.update(disable_gradient_checkpointing=True, enable_liger_kernel=True)
    ok, est = fits(v11)  # measured 101.3 GiB allocated, 105.7 reserved (bench/h200/measurements.md)
    assert ok and 100 < est < 127
    ok, est = fits({**v11, "per_device_train_batch_size": 16, "gradient_accumulation_steps": 1})
    assert not ok and est > 141


def test_measurement_from_a_verify_run() -> None:
    steps = [
        {"seconds": 10.0 if i < 3 else 1.0, "real_tokens": 1000, "padded_tokens": 1024, "max_allocated_gib": 5.0 + i}
        for i in range(8)
    ]
    run = types.SimpleNamespace(metrics={"steps": steps}, error=None, log_tail="", wall_s=42.0)
    m = measurement_from(run, warmup=3)
    assert m.tokens_per_s == pytest.approx(1000.0) and m.peak_gib == 12.0 and m.steps_measured == 5
    crash = types.SimpleNamespace(
        metrics={}, error="exited with code 1", log_tail="torch.OutOfMemoryError: CUDA out of memory", wall_s=9.0
    )
    m = measurement_from(crash, warmup=3)
    assert m.oom and m.tokens_per_s is None and search.status_of(m) == search.OOM


def test_tune_refuses_a_count_verify_refuses() -> None:
    """tune ranks by verify's own figure: a step that counts more real tokens than it ran (the neat-packing mask
    summed, issue 41) is no candidate's speed but a failed measurement, whatever the search would make of it."""
    steps = [{"seconds": 1.0, "real_tokens": 8_066_171, "padded_tokens": 4096, "max_allocated_gib": 5.0}] * 6
    run = types.SimpleNamespace(metrics={"steps": steps}, error=None, log_tail="", wall_s=9.0)
    m = measurement_from(run, warmup=1)
    assert m.tokens_per_s is None and m.error.startswith("cannot measure: step")


# ---------------------------------------------------------------- the command, with a fake machine


class FakeSession:
    def __init__(self, capacity=100.0, platform=CUDA, limit=None) -> None:
        self.runner = FakeRunner(capacity=capacity)
        self._platform, self.limit = platform, limit

    def platform(self):
        return self._platform

    def prepare(self):
        pass

    def asset_id(self):
        return "fake"

    def measure(self, c):
        return self.runner(c)

    def fits(self):
        if self.limit is None:
            return search.no_memory_model

        def fits(resolved):
            est = true_peak(space.baseline_knobs(resolved, resolved.get("deepspeed"))) * 1.05
            return est <= self.limit, est

        return fits


def _args(path: Path, *extra: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args([str(path), "--quiet", *extra])


def test_command_prints_a_diff_and_writes_span_edits(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "cfg.yaml"
    original = CONFIG.format(extra="")
    path.write_text(original)
    code = command.run(_args(path, "--allow-packing", "--json", str(tmp_path / "r.json")), FakeSession(limit=95.0))
    out = capsys.readouterr().out
    assert code == 0 and path.read_text() == original  # a diff only
    assert "+packing: true" in out and "+enable_liger_kernel: true" in out and "-per_device_train_batch_size" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rows"][0]["baseline"] and report["winner"]["status"] == "measured"
    assert report["memory"] == "memory check given by the caller"
    assert {r["status"] for r in report["rows"]} >= {"measured", "pruned: memory"}
    assert (tmp_path / "cfg.yaml.cfgopt-tune.json").exists()  # the default cache beside the config
    win = report["winner"]["knobs"]
    assert win["micro"] * win["ga"] == 16

    code = command.run(_args(path, "--allow-packing", "--write"), FakeSession(limit=95.0))
    assert code == 0
    text = path.read_text()
    assert "# a LoRA SFT config; this comment must survive the fix" in text and "saves/x   # trailing comment" in text
    from cfgopt.loaders.yaml_loader import load_yaml

    data = load_yaml(Document.read(path)).data
    assert data["per_device_train_batch_size"] == win["micro"] and data["gradient_accumulation_steps"] == win["ga"]
    assert data["packing"] is True and data["enable_liger_kernel"] is True
    assert data["disable_gradient_checkpointing"] is (not win["gc"])
    untouched = [line for line in original.splitlines() if not line.startswith(("per_device", "gradient_acc"))]
    assert all(line in text.splitlines() for line in untouched)


def test_command_multi_gpu_writes_deepspeed_json_beside_the_users(tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "z3.json").write_text(json.dumps({**DS_Z3, "train_micro_batch_size_per_gpu": "auto"}))
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(extra="deepspeed: ds/z3.json\n"))
    slow_ddp = FakeSession(capacity=1e9)
    real = slow_ddp.runner.__call__

    def prefer_z2(c):  # on this fake machine DDP crashes, so ZeRO-2 wins
        if c.knobs.zero == "none":
            return search.Measurement(error="RuntimeError: NCCL error", wall_s=5.0)
        return real(c)

    slow_ddp.measure = prefer_z2
    code = command.run(_args(path, "--gpus", "4", "--knobs", "zero", "--write"), slow_ddp)
    assert code == 0
    written = tmp_path / "ds" / "cfg.tune-z2.json"
    assert json.loads(written.read_text())["zero_optimization"]["stage"] == 2
    assert "deepspeed: ds/cfg.tune-z2.json\n" in path.read_text()


def test_command_drops_deepspeed_on_one_gpu(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "z3.json").write_text(json.dumps(DS_Z3))
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(extra="deepspeed: z3.json\n"))
    code = command.run(_args(path, "--knobs", "zero", "--cache", str(tmp_path / "c.json")), FakeSession())
    out = capsys.readouterr().out
    assert code == 0 and "-deepspeed: z3.json" in out and "winner" in out
    assert (tmp_path / "c.json").exists()


def test_the_winner_is_written_as_the_planner_writes_its_plan(tmp_path: Path) -> None:
    """One writer (cfgopt.plan.knob_edits) for tune's winner and the speed plan's fix: a precision switch renamed where
    it stands (its comment kept), new keys at the end, the same text from both for the same knobs."""
    from cfgopt.job.settings import Settings
    from cfgopt.lint.fixer import apply_edits
    from cfgopt.plan.planner import plan_edits
    from cfgopt.plan.speed_plan import SpeedPlan
    from cfgopt.project.loader import load_job
    from cfgopt.tune.winner import plan_fix

    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(extra="").replace("bf16: true", "fp16: true  # the old GPU's"))
    job = load_job(path, Settings(gpus=1))
    base = space.baseline_knobs(job.data, None)
    best = base._replace(precision="bf16", gc=False)
    winner = make_candidates(job.data, None, base, [base, best], tmp_path, lambda _resolved: "key")[1]
    fix = plan_fix(path, job.source.document, job.source, winner, base, None, None)
    assert fix.problems == [] and fix.changes == {"disable_gradient_checkpointing": True, "bf16": True, "fp16": False}
    assert "\nbf16: true  # the old GPU's\n" in fix.yaml_after and "fp16" not in fix.yaml_after
    assert fix.yaml_after.endswith("disable_gradient_checkpointing: true\n")
    plan = SpeedPlan(job.hardware(1), base, best, 1.0)
    plan.changes = space.changed_keys(best, base)
    made = plan_edits(job.source, plan)
    assert made is not None and apply_edits(job.source.document.text, made) == fix.yaml_after


def test_tune_says_why_the_plan_left_settings_out(tmp_path: Path) -> None:
    """The plan tune starts from comes with its reasons, in the planner's words (cfgopt.plan.reasons)."""
    from cfgopt.environment.probe import probed_environment
    from cfgopt.job.settings import Settings
    from cfgopt.project.loader import load_job
    from cfgopt.tune.candidates import planned_start

    # a folder of its own: in bench/planner the JSON has other readers, and the plan keeps its ZeRO-3 for them
    bench = ROOT / "bench" / "planner"
    config = tmp_path / "qwen3_full_sft.yaml"
    config.write_bytes((bench / "examples" / "train_full" / "qwen3_full_sft.yaml").read_bytes())
    (tmp_path / "examples" / "deepspeed").mkdir(parents=True)
    json_path = "examples/deepspeed/ds_z3_config.json"
    (tmp_path / json_path).write_bytes((bench / json_path).read_bytes())
    probed = probed_environment(["liger_kernel", "bitsandbytes"])  # flash-attn not importable
    job = load_job(config, Settings(target_name="h200", gpus=8, environment=probed, extend_select=["PF", "MEM"]))
    said: list[str] = []
    assert planned_start(job, KNOBS, said.append) is not None
    assert any(line.startswith("pure bf16 not planned: it trains worse") for line in said)
    assert "attention fa2 not planned: flash-attn is not in this machine, probed (verify/tune run on the node)" in said


def test_tune_is_registered_and_light() -> None:
    code = (
        "import sys; from cfgopt.cli import build_parser; a = build_parser().parse_args(['tune', 'x.yaml']); "
        "heavy = ('torch', 'transformers', 'llamafactory', 'deepspeed', 'cfgopt.tune.search'); "
        "bad = [m for m in heavy if m in sys.modules]; print(bad, a.budget, a.steps); raise SystemExit(bool(bad))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and "30.0 10" in proc.stdout, proc.stdout + proc.stderr


# ---------------------------------------------------------------- the real runner on a tiny model (CPU)

TINY_CONFIG = """model_name_or_path: tiny
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
cutoff_len: 256
output_dir: {out}
per_device_train_batch_size: 2
gradient_accumulation_steps: 2
learning_rate: 1.0e-4
flash_attn: sdpa
"""


@pytest.mark.oracle
@pytest.mark.slow  # about 70 s; by default tests/verify/test_verify.py's smoke run covers the real runner on a CPU
def test_cpu_smoke_tune_through_the_real_runner(tmp_path: Path) -> None:
    pytest.importorskip("llamafactory")
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(TINY))
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(TINY_CONFIG.format(out=tmp_path / "users_output_dir"))
    cmd = [
        sys.executable,
        "-m",
        "cfgopt",
        "tune",
        str(cfg_path),
        "--knobs",
        "micro",  # 1x4, 2x2 (the baseline), 4x1: three candidates
        "--steps",
        "3",
        "--target",
        "cpu",
        "--mode",
        "synthetic",  # no GPU in CI: a CPU run of a tiny model
        "--patience",
        "0",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
        str(tmp_path / "report.json"),
    ]
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert (tmp_path / "report.json").exists(), proc.stderr[-3000:]
    data = json.loads((tmp_path / "report.json").read_text())
    rows = data["rows"]
    assert len(rows) == 3 and [r["status"] for r in rows] == ["measured"] * 3, proc.stderr[-3000:]
    assert rows[0]["baseline"] and rows[0]["knobs"]["micro"] == 2
    assert {r["knobs"]["micro"] * r["knobs"]["ga"] for r in rows} == {4}
    assert all(r["tokens_per_s"] > 0 and r["wall_s"] > 0 for r in rows)
    assert rows[1]["knobs"]["micro"] == 4  # larger micro batch first by the prior
    assert data["memory"].startswith(("no memory model", "target cpu has no memory size"))
    assert data["winner"] is not None and proc.returncode == 0
    assert not (tmp_path / "users_output_dir").exists()
    # resumed: every result comes from the cache, nothing runs again
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    again = json.loads((tmp_path / "report.json").read_text())
    assert all(r["cached"] for r in again["rows"]) and again["spent_s"] == 0, proc.stderr[-2000:]
    assert again["winner"]["key"] == data["winner"]["key"]


def test_ties_go_to_fewer_changes() -> None:
    _, cands = make(cfg(), knobs=("attn", "micro"))

    def flat_micro(c: search.Candidate) -> search.Measurement:  # 16x1 is 20% faster; eager and sdpa the same
        return search.Measurement(tokens_per_s=1200.0 if c.knobs.micro == 16 else 1000.0, peak_gib=1.0, wall_s=1.0)

    result = search.search(cands, flat_micro, budget_s=1e9, patience=0)
    assert result.winner.candidate.knobs == space.Knobs(16, 1, True, "sdpa", False, False, "none")


def _load_bench(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_tune_{name}", ROOT / "bench" / "tune" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_compare_scores_the_pick_with_the_grids_own_run() -> None:
    compare, grid = _load_bench("compare"), _load_bench("grid")

    def row(i, tps, wall, status="measured", base=False):
        return {"index": i, "label": f"c{i}", "knobs": {"i": i}, "key": f"k{i}", "baseline": base,
                "status": status, "tokens_per_s": tps, "wall_s": wall}  # fmt: skip

    rows = [row(0, 1000.0, 60, base=True), row(1, 5000.0, 60), row(2, 4900.0, 60), row(3, None, 20, "oom")]
    rows += [row(i, 2000.0, 60) for i in range(4, 12)]
    g = {"config": "x.yaml", "gpus": 1, "steps": 10, "warmup": 3, "rows": rows}
    t = {"steps": 10, "warmup": 3, "gpu_seconds": 180.0, "winner": {**row(2, 5100.0, 60)}, "rows": rows[:3]}
    t["rows"] = [{**r, "run_order": i} for i, r in enumerate(t["rows"])]
    out = compare.compare(g, t)
    assert out["pick_in_grid_tokens_per_s"] == 4900.0 and out["speed_ratio"] == pytest.approx(0.98)
    assert out["grid_gpu_seconds"] == 60 * 11 + 20 and out["gpu_time_fraction"] == pytest.approx(180 / 680)
    assert out["passes"] and "PASS" in compare.render(out)
    t["gpu_seconds"] = 300.0
    assert not compare.compare(g, t)["passes"]  # more than a third of the grid's GPU time
    g["rows"][2]["key"] = "other"  # matched by knobs when the keys differ
    assert compare.compare(g, t)["pick_in_grid_tokens_per_s"] == 4900.0
    g.update(command="grid.py x.yaml", started="now", device="FAKE", gpu_seconds=0, memory="none")
    md = grid.render_md(g)
    assert "| 1 | c1 | measured | 5,000 | 5.00x |" in md and "oom" in md


def test_real_session_on_a_cpu_runs_fp32_and_says_where_the_cache_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the tune smoke run (--full) covers end to end, without the trainer: on a CPU the runs are planned
    in fp32 (said once), the stand-ins are built in --cache-dir, and the cache's place and size are said."""
    from cfgopt.verify import preflight, runner

    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(TINY))
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(TINY_CONFIG.format(out=tmp_path / "o") + "bf16: true\n")
    built: list[runner.Assets] = []
    monkeypatch.setattr(preflight, "cpu_only", lambda: True)
    monkeypatch.setattr(runner, "prepare_assets", lambda assets, *_a: built.append(assets) or {})
    said: list[str] = []
    config = {"model_name_or_path": "tiny", "dataset": "d", "template": "llama3", "bf16": True}
    session = RealSession(
        cfg_path, config, tmp_path, 3, 1, 1, 60.0, mode="synthetic", cache_dir=tmp_path / "cache", say=said.append
    )
    session.prepare()
    assert built and built[0].overrides == {"bf16": False}
    assert built[0].model_dir.parent == tmp_path / "cache"
    assert any("bf16: false for every run (fp32" in line for line in said)
    assert any(line.startswith(f"synthetic models and data are cached in {tmp_path / 'cache'}") for line in said)


def test_the_search_ranks_by_the_stages_prior() -> None:
    """DPO's micro-batch exponent (0.69, measured) ranks tune's candidates as it ranks the planner's."""
    _, cands = make(cfg(stage="dpo"), knobs=("micro",))
    search.search(cands, FakeRunner(capacity=1e9), budget_s=0, patience=0)
    c = next(c for c in cands if c.knobs.micro == 16)
    assert c.prior == pytest.approx(search.prior_speed(c.knobs, 1, "dpo"))
    assert c.prior > 2 * search.prior_speed(c.knobs, 1, "sft")


def test_tune_help_names_the_optimizer_values() -> None:
    """Issue 32: `tune --help` names the optimizers the space may switch to, stochastic rounding included."""
    import contextlib
    import io

    from cfgopt.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["tune", "--help"])
    text = " ".join(out.getvalue().split())
    assert "adamw_bnb_8bit" in text and "adamw_torch_8bit_sr" in text and "bf16_stochastic_round=True" in text


def test_stochastic_rounding_is_one_knob_value_with_pure_bf16() -> None:
    """torchao's 8-bit AdamW with bf16 stochastic rounding: written as `optim` + `optim_args`, read back as the same
    knob value, offered where the platform has torchao, and only with pure bf16 (whose numerics refusal it lifts)."""
    base = space.Knobs(2, 1, True, "sdpa", True, True, "none", "bf16", "default")
    rounded = base._replace(precision="pure_bf16", optim=space.SR_OPTIM)
    keys = space.changed_keys(rounded, base)
    assert keys["optim"] == "adamw_torch_8bit" and keys["optim_args"] == "bf16_stochastic_round=True"
    assert keys["pure_bf16"] is True and keys["bf16"] is False
    assert space.optim_of(keys) == space.SR_OPTIM
    assert space.refusal(rounded, base) is None
    assert space.refusal(base._replace(optim=space.SR_OPTIM), base)[1] == "optim"  # not without pure bf16
    full = {"finetuning_type": "full", "stage": "sft"}
    assert space.SR_OPTIM in space.optim_values(full, base, space.Platform(cuda=True, torchao=True))
    assert space.SR_OPTIM not in space.optim_values(full, base, space.Platform(cuda=True))


def test_a_search_that_measured_only_the_config_says_nothing_was_compared(capsys: pytest.CaptureFixture) -> None:
    """The H200's 2-minute tune of a 7B LoRA (bench/planner/README.md): the config's own run took 79 s and nothing
    else fit the budget. "The fastest measured" would read as a verdict on the config: the words say that nothing
    was compared, why, and how to run more."""
    _, cands = make(cfg(), knobs=("attn", "gc"))
    runner = FakeRunner(capacity=1e9, wall=60.0)
    result = search.search(cands, runner, budget_s=90.0, patience=0)
    assert len(runner.calls) == 1 and result.winner is result.baseline
    assert report.verdict(result, "", 1) == 0
    out = capsys.readouterr().out
    assert "fastest measured" not in out
    assert "only the config as it is was measured, nothing compared with it" in out
    assert "not run: budget; --budget MINUTES runs more): nothing changed" in out
