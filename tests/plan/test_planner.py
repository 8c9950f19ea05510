"""The job model (cfgopt/job/job.py) and the speed planner (cfgopt/plan/planner.py): one answer per question about a
job, and the speed fixes chosen together, for the hardware the job is judged for (#13)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli, summary_of

from cfgopt.environment.probe import probed_environment
from cfgopt.job import job as job_module
from cfgopt.job.settings import Settings
from cfgopt.knowledge import schema
from cfgopt.memory import estimate as memory
from cfgopt.plan import reasons, space
from cfgopt.plan.planner import plan_for
from cfgopt.plan.speed_knobs import OWNERS, PLANNED_CODES
from cfgopt.plan.wording import description
from cfgopt.project.loader import JobError, load_job
from cfgopt.tune import search

SEED_LIKE = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: q_proj,v_proj
dataset: alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: out
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
bf16: true
{extra}"""
QWEN3_FULL = ROOT / "bench" / "planner" / "examples" / "train_full" / "qwen3_full_sft.yaml"


# Speed and memory advice is opt-in in the default selection (issue 14); the planner plans what is selected.
ADVICE = ["PF", "MEM"]


def _job(tmp_path: Path, extra: str = "", **settings):
    path = tmp_path / "cfg.yaml"
    path.write_text(SEED_LIKE.format(extra=extra))
    settings.setdefault("extend_select", ADVICE)
    return load_job(path, Settings(target_name=settings.pop("target", "h200"), **settings))


# ---------------------------------------------------------------- the job model


def test_values_are_the_selected_versions_defaults(tmp_path: Path) -> None:
    job = _job(tmp_path, llamafactory_version="0.9.4")
    default = schema.llamafactory("0.9.4").group("train")["per_device_train_batch_size"].default
    assert job.value("per_device_train_batch_size") == 4 and job.value("learning_rate") is not None
    assert job.values()["max_grad_norm"] == schema.llamafactory("0.9.4").fields["max_grad_norm"].default
    assert job.values(per_device_train_batch_size=None)["per_device_train_batch_size"] == default
    assert job.lf_label == "LLaMA-Factory 0.9.4" and not job.packing


def test_hardware_says_what_is_assumed(tmp_path: Path) -> None:
    assert _job(tmp_path, gpus=2).hardware(1).describe() == "2 x h200"
    assert _job(tmp_path).hardware(1).describe() == "1 x h200 (GPU count assumed)"


def test_deepspeed_filled_as_the_trainer_fills_it(tmp_path: Path) -> None:
    (tmp_path / "z3.json").write_text(
        json.dumps({"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {}})
    )
    job = _job(tmp_path, "deepspeed: z3.json\n", gpus=2)
    filled = job.deepspeed_filled()
    assert filled["train_micro_batch_size_per_gpu"] == 4 and filled["bf16"] == {"enabled": True}


def test_one_line_errors_for_a_job_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"deepspeed: missing\.json not found"):
        _job(tmp_path, "deepspeed: missing.json\n")
    (tmp_path / "bad.yaml").write_text("a: [\n")
    with pytest.raises(JobError, match="not a LLaMA-Factory YAML config"):
        load_job(tmp_path / "bad.yaml", Settings())


def test_no_default_is_kept_outside_the_job() -> None:
    import cfgopt.rules.support.deepspeed as ds
    import cfgopt.rules.support.llamafactory as lf

    assert not hasattr(memory, "DEFAULTS") and not hasattr(lf, "LF") and not hasattr(ds, "DS")
    from cfgopt.knowledge import packing
    from cfgopt.memory import batch

    # one definition, both read it: the memory model in its micro-batch, the job (imported where it asks: start-up)
    assert batch.packing_on is packing.packing_on
    assert "from cfgopt.knowledge.packing import packing_on" in Path(job_module.__file__).read_text(encoding="utf-8")


# ---------------------------------------------------------------- the plan


def test_checkpointing_off_beats_a_bigger_micro_batch(tmp_path: Path) -> None:
    """#13's measurement: packed 8B LoRA on one H200, 8 x 2 with checkpointing off (17,035 tokens/s) beat 16 x 1
    with it on (12,082); growing the micro-batch first left no memory for checkpointing off."""
    job = _job(tmp_path, "packing: true\nenable_liger_kernel: true\n", gpus=1)
    plan = plan_for(job)
    assert plan is not None and (plan.best.micro, plan.best.ga, plan.best.gc) == (8, 2, False)
    assert "8 x 2" in description(plan) and "expected 1.4x" in description(plan)


def test_the_plan_is_tunes_top_prediction(tmp_path: Path) -> None:
    """The same candidates, memory limit and priors as `cfgopt tune`: its first-ranked fitting candidate."""
    job = _job(tmp_path, gpus=1)
    plan = plan_for(job)
    platform = space.Platform(cuda=True, liger=True, deepspeed=True)
    options = space.SpaceOptions(gpus=1, allow_packing=True)
    written = {**job.values(), "optim": job.data.get("optim")}  # tune's baseline: the optimizer as written
    base, knobs = space.build_space(written, None, platform, options)
    from cfgopt.job.job import lf_values

    fits = search.MemoryFits(job.shape, job.settings.target, 1, fill=lambda c: lf_values(c, job.lf))
    ranked = []
    for k in knobs:
        ok, peak = fits(space.candidate_config(job.data, k, base, None, None))
        if ok:
            ranked.append((-search.prior_speed(k, 1), peak, len(k.changes(base)), k))
    assert plan is not None and plan.best == min(ranked, key=lambda r: r[:3])[3]


def test_a_missing_package_leaves_its_knob_out(tmp_path: Path) -> None:
    """The assumed environment has LLaMA-Factory's liger-kernel extra, and the plan says it assumed it; one
    probed without it (verify, tune) gets no Liger and says why; one probed with it needs no word."""
    assumed = plan_for(_job(tmp_path, "packing: true\n", gpus=1))
    assert assumed is not None and assumed.best.liger
    assert "uses liger-kernel (assumed: LLaMA-Factory 0.9.5" in description(assumed)
    absent = plan_for(_job(tmp_path, "packing: true\n", gpus=1, environment=probed_environment([])))
    assert absent is not None and not absent.best.liger
    assert "with liger-kernel (not in this machine, probed" in description(absent)
    present = plan_for(_job(tmp_path, "packing: true\n", gpus=1, environment=probed_environment(["liger_kernel"])))
    assert present is not None and present.best.liger and "uses" not in description(present)


def test_one_gpu_drops_zero3_where_it_fits() -> None:
    """LLaMA-Factory's own Qwen3-4B full fine-tune (ZeRO-3), fixed for one H200: no DeepSpeed."""
    job = load_job(QWEN3_FULL, Settings(target_name="h200", gpus=1, extend_select=ADVICE))
    plan = plan_for(job)
    assert plan is not None and plan.drop_deepspeed and plan.est_gib is not None and plan.est_gib < 141 * 0.9
    on_eight = plan_for(load_job(QWEN3_FULL, Settings(target_name="h200", gpus=8, extend_select=ADVICE)))
    assert on_eight is None or not on_eight.drop_deepspeed  # several GPUs: ZeRO-2 first (MEM003), by hand


def test_one_fix_per_job_and_messages_name_its_shape(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(SEED_LIKE.format(extra="packing: true\n"))
    _, out, _ = run_cli(
        ["lint", str(path), "--target", "h200", "--gpus", "1", "--extend-select", "PF,MEM", "--format", "json"]
    )
    diags = json.loads(out)["diagnostics"]
    planned = [d for d in diags if d["code"] in PLANNED_CODES]
    with_fix = [d for d in planned if d.get("fix")]
    assert len(planned) >= 2 and len(with_fix) == 1
    assert with_fix[0]["fix"]["description"].startswith("Speed plan for 1 x h200: 8 x 2")
    assert all("16 x 1" not in d["message"] for d in diags)  # no message proposes a shape the fix does not write


def test_fix_writes_the_plan_and_converges(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(SEED_LIKE.format(extra=""))
    _, _, err = run_cli(
        ["fix", "--unsafe-fixes", "--write", str(path), "--target", "h200", "--gpus", "1", "--extend-select", "PF,MEM"]
    )
    text = path.read_text()
    assert "per_device_train_batch_size: 8\n" in text and "disable_gradient_checkpointing: true" in text
    assert "neat_packing: true" in text and "enable_liger_kernel: true" in text
    assert "; judged for 1 x h200 (--target, --gpus); environment: assumed: LLaMA-Factory 0.9.5" in summary_of(err)
    run_cli(
        ["fix", "--unsafe-fixes", "--write", str(path), "--target", "h200", "--gpus", "1", "--extend-select", "PF,MEM"]
    )
    assert path.read_text() == text


def test_summary_line_names_the_hardware_and_what_is_assumed(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    path = tmp_path / "cfg.yaml"
    path.write_text(SEED_LIKE.format(extra=""))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def lint(*args: str) -> str:
        cmd = [sys.executable, "-m", "cfgopt", "lint", str(path), *args]
        return summary_of(
            subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120).stderr
        )

    assert "; no target stated: 14 hardware checks skipped (--target NAME or target = in pyproject.toml)" in lint(
        "--isolated"
    )
    assert "; judged for mi300x (--target); GPU count not stated: advice assumes 1," in lint("--target", "mi300x")
    assert "; judged for 4 x h100 (--target, --gpus)" in lint("--target", "h100", "--gpus", "4")


# ---------------------------------------------------------------- why not: every rejected candidate keeps its reason

LLAMA3_FULL_FP16 = ROOT / "bench" / "planner" / "examples" / "train_full" / "llama3_full_sft_fp16.yaml"


def test_a_refused_setting_is_named_and_quoted() -> None:
    """Eight GPUs, full fine-tuning, the stage not planned: ZeRO-3 is kept, so pure bf16 (LLaMA-Factory refuses it
    with ZeRO-3), Liger (fails under ZeRO-3) and another optimizer are not planned; the description quotes the
    fastest of them."""
    job = load_job(QWEN3_FULL, Settings(target_name="h200", gpus=8, extend_select=ADVICE))
    plan = plan_for(job, tuple(k for k in OWNERS if k != "zero"))
    assert plan is not None and plan.best.zero == "z3"
    assert "pure bf16 not planned: refused with ZeRO-3 (LLaMA-Factory)" in plan.notes
    assert "Liger kernels not planned: they fail in backward under ZeRO-3 (LF027)" in plan.notes
    assert any(n.startswith("Adafactor not planned: another optimizer only without DeepSpeed") for n in plan.notes)
    assert "; pure bf16 not planned: refused with ZeRO-3 (LLaMA-Factory)" in description(plan)
    refused = plan.best._replace(precision="pure_bf16")
    why = "refused with ZeRO-3 (LLaMA-Factory)"
    assert plan.rejected[refused] == reasons.Rejection(reasons.REFUSED, "precision", why)


def test_memory_rejections_say_what_tune_says() -> None:
    """One H200, Llama-3-8B full fine-tuning: keeping ZeRO-3 does not fit; the note gives the estimate in tune's
    words (`pruned: memory` rows: "estimated peak ... GiB does not fit")."""
    settings = Settings(
        target_name="h200", gpus=1, extend_select=ADVICE, environment=probed_environment(["bitsandbytes"])
    )
    plan = plan_for(load_job(LLAMA3_FULL_FP16, settings))
    assert plan is not None and plan.drop_deepspeed
    memory_rejected = {k: r for k, r in plan.rejected.items() if r.kind == reasons.MEMORY}
    assert memory_rejected and all(r.why.startswith("estimated peak ") for r in memory_rejected.values())
    why = next(r.why for k, r in memory_rejected.items() if k.zero == "z3")
    assert why.endswith(" GiB does not fit") and why == reasons.does_not_fit(float(why.split()[2]))
    assert any(n.startswith("ZeRO-3 not planned: estimated peak ") for n in plan.notes)
    assert search.PRUNED_MEMORY.endswith(f": {reasons.MEMORY}")  # tune's status for a memory-pruned row
    # the one faster setting left out is pure bf16, for its numerics: the description says why
    assert plan.quoted.startswith("pure bf16 not planned: it trains worse")


def test_a_package_not_in_the_environment_is_the_reason(tmp_path: Path) -> None:
    """Llama-3-8B full fine-tuning on one H200: only 8-bit AdamW fits (pure bf16 and Adafactor train worse,
    bench/verify/results.md). In an environment without bitsandbytes no plan fits, and the output says what it
    would bring; MEM001 names the optimizer and that its package is missing; with it, the plan takes it."""
    from cfgopt.environment import Environment

    path = tmp_path / "full.yaml"
    path.write_text(SEED_LIKE.format(extra="").replace("finetuning_type: lora", "finetuning_type: full"))
    lacking = Environment({"llamafactory": "==0.9.5"}, "requirements.txt")
    plan = plan_for(load_job(path, Settings(target_name="h200", gpus=1, extend_select=ADVICE, environment=lacking)))
    assert plan is not None and not plan.changed and plan.with_packages is not None
    assert "bitsandbytes" in plan.with_packages.packages and plan.with_packages.plan.best.optim == "adamw_bnb_8bit"
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\n")
    _, out, _ = run_cli(["lint", str(path), "--target", "h200", "--gpus", "1", "--environment", str(node)])
    assert "optim: adamw_bnb_8bit without DeepSpeed (~" in out and "needs bitsandbytes, which" in out
    assert "no speed plan fits the job's environment" in out
    probed = probed_environment(["bitsandbytes"])
    installed = Settings(target_name="h200", gpus=1, extend_select=ADVICE, environment=probed)
    known = plan_for(load_job(path, installed))
    assert known is not None and known.best.optim == "adamw_bnb_8bit" and known.best.precision == "bf16"
    assert "pure bf16 not planned: it trains worse" in description(known)


def test_pure_bf16_and_adafactor_are_refused_for_their_numerics(tmp_path: Path) -> None:
    """Measured on the H200 (bench/verify/results.md): pure bf16 and Adafactor train worse than AdamW over fp32
    master weights, so neither planner nor tune proposes them; a user's own pure_bf16 is kept."""
    base = space.Knobs(2, 1, True, "sdpa", True, True, "none", "bf16", "default")
    assert space.refusal(base._replace(precision="pure_bf16"), base)[:2] == (reasons.NUMERICS, "precision")
    assert space.refusal(base._replace(optim="adafactor"), base)[:2] == (reasons.NUMERICS, "optim")
    assert space.refusal(base._replace(optim="adamw_bnb_8bit"), base) is None
    own = base._replace(precision="pure_bf16")
    assert space.refusal(own, own) is None


def test_without_an_estimate_the_reason_is_the_estimate(tmp_path: Path) -> None:
    (tmp_path / "z3.json").write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    plan = plan_for(_job(tmp_path, "deepspeed: z3.json\n", target=None))
    assert plan is not None and plan.est_gib is None
    why = "dropping DeepSpeed not planned: no memory estimate of this job to spend memory on (no target stated)"
    assert why in plan.notes and why in description(plan)
    kept = "micro-batch, packing and gradient checkpointing as written: no memory estimate to spend memory on"
    assert f"{kept} (no target stated)" in description(plan)


def test_a_configs_own_pure_bf16_is_kept_without_an_estimate(tmp_path: Path) -> None:
    """Fuzzing found it: with no target (no estimate), pure_bf16 was dropped from the candidates even where it
    was the config's own setting, so the plan switched a LoRA config back to bf16 autocast."""
    job = _job(tmp_path, "pure_bf16: true\n", target=None)
    plan = plan_for(job)
    assert plan is None or plan.best.precision == "pure_bf16"


def test_when_nothing_fits_mem001_says_what_would_with_its_estimate(tmp_path: Path) -> None:
    """Issue 23: a 70B full fine-tune on one H200 has no plan; MEM001 names offload (with the host memory it
    needs) and the GPU count at which ZeRO-3 fits, each with its estimate."""
    cfg = tmp_path / "big.yaml"
    cfg.write_text(
        "model_name_or_path: meta-llama/Meta-Llama-3-70B-Instruct\nstage: sft\ndo_train: true\n"
        "finetuning_type: full\ndataset: alpaca_en_demo\ntemplate: llama3\ncutoff_len: 4096\noutput_dir: out\n"
        "bf16: true\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 8\n"
    )
    _, out, _ = run_cli(["lint", "--format", "json", "--target", "h200", "--gpus", "1", str(cfg)])
    (msg,) = [d["message"] for d in json.loads(out)["diagnostics"] if d["code"] == "MEM001"]
    assert re.search(r"ZeRO-3 with CPU offload \(~\d+ GiB per GPU, \d+ GiB in host memory; slower\)", msg), msg
    assert re.search(r"\d+ GPUs with ZeRO-3 \(~\d+ GiB each\)", msg), msg


def test_mem001_offers_the_optimizers_offload_before_the_parameters(tmp_path: Path) -> None:
    """An 8B full fine-tune whose parameters fit on the GPU: ZeRO-3 with only the optimizer on the CPU is named
    (less crosses PCIe each step than with the parameters offloaded too); the 70B one above needs both."""
    cfg = tmp_path / "eight.yaml"
    cfg.write_text(
        "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\n"
        "finetuning_type: full\ndataset: alpaca_en_demo\ntemplate: llama3\ncutoff_len: 2048\noutput_dir: out\n"
        "fp16: true\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 2\n"
        "deepspeed: ds.json\n"
    )
    (tmp_path / "ds.json").write_text(json.dumps(space_template("z3")))
    node = tmp_path / "node.txt"  # an environment without bitsandbytes: no plan fits, so MEM001 says what would
    node.write_text("llamafactory==0.9.5\n")
    _, out, _ = run_cli(
        ["lint", "--format", "json", "--target", "h200", "--gpus", "1", str(cfg), "--environment", str(node)]
    )
    (msg,) = [d["message"] for d in json.loads(out)["diagnostics"] if d["code"] == "MEM001"]
    assert re.search(r"ZeRO-3 with the optimizer offloaded to the CPU \(~\d+ GiB per GPU, \d+ GiB in host", msg), msg
    assert "ZeRO-3 with CPU offload" not in msg


def space_template(zero: str) -> dict:
    from cfgopt.plan.space import deepspeed_template

    return deepspeed_template(zero) or {}


def test_the_planner_bench_names_each_rows_method_and_keeps_the_plan_near_tunes_winner() -> None:
    """bench/planner/results.json, the H200 and H100 evidence of the speed plan: every row names its
    `finetuning_type` and `stage`; every row still current (not `superseded`) has the fix output at 90% or more of
    tune's winner; full fine-tuning (three configs or more), DPO and KTO are among them."""
    rows = json.loads((ROOT / "bench" / "planner" / "results.json").read_text())
    assert all(r.get("finetuning_type") and r.get("stage") for r in rows)
    current = [r for r in rows if not r.get("superseded")]
    assert all(r["fix_vs_tune"] >= 0.9 for r in current), [r["config"] for r in current if r["fix_vs_tune"] < 0.9]
    assert len({r["path"] for r in current if r["finetuning_type"] == "full"}) >= 3
    assert any(r["stage"] == "dpo" for r in current) and any(r["stage"] == "kto" for r in current)


def test_the_batch_shape_stays_where_the_deepspeed_file_was_not_read(tmp_path: Path) -> None:
    """Issue 34: a `deepspeed:` JSON in a hidden folder is not read, and it may state the batch; the plan must not
    rewrite the YAML's batch against it (two XF002 mismatches, the Trainer stops)."""
    hidden = tmp_path / ".configs"
    hidden.mkdir()
    (hidden / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}))
    cfg = tmp_path / "cfg.yaml"
    # short samples: without an estimate the plan's aim (8k tokens per micro-batch) would raise the micro-batch
    cfg.write_text(
        SEED_LIKE.format(extra="deepspeed: .configs/ds.json\n").replace("cutoff_len: 2048", "cutoff_len: 512")
    )
    before = cfg.read_text()
    _, out, err = run_cli(["fix", "--unsafe-fixes", str(cfg), "--target", "h200", "--gpus", "1"])
    assert "per_device_train_batch_size" not in out, out + err
    assert cfg.read_text() == before


def test_jobs_with_the_same_planning_inputs_share_one_plan(tmp_path: Path) -> None:
    """Issue 33: the lines of a sweep differ in where they write; planned once, not once per line. A value the
    plan reads (the cutoff) still makes a plan of its own."""
    from cfgopt.plan import planner

    def job(name: str, old: str, new: str):
        path = tmp_path / name
        path.write_text(SEED_LIKE.format(extra="").replace(old, new))
        return load_job(path, Settings(target_name="h200", gpus=1, extend_select=ADVICE))

    one = plan_for(job("a.yaml", "output_dir: out", "output_dir: out/run1"))
    other = plan_for(job("b.yaml", "output_dir: out", "output_dir: out/run2"))
    assert one is not None and one is other
    longer = plan_for(job("c.yaml", "cutoff_len: 2048", "cutoff_len: 4096"))
    assert longer is not None and longer is not one
    assert len(planner._PLANS) <= planner._PLANS_MAX


def test_a_rule_whose_fix_the_plan_replaces_declares_it_and_its_page_says_so() -> None:
    """`Rule.fix_replaced_by_plan` is what the engine's plan step reads (cfgopt/lint/plans.py): the rules that declare
    it are the rules of the knobs the plan sets (`speed_knobs.OWNERS`), and each one's page (`cfgopt rule CODE`,
    docs/rules/<CODE>.md) says the plan replaces its fix; no other rule's page does."""
    from cfgopt.rules import rule_classes
    from cfgopt.rules.base import PLANNED_FIX
    from cfgopt.rules.pages import render_page

    declared = {cls.code for cls in rule_classes() if cls.fix_replaced_by_plan}
    assert declared == PLANNED_CODES
    for cls in rule_classes():
        page = render_page(cls.docs(), "markdown")
        assert (PLANNED_FIX in page) == (cls.code in declared), cls.code


def test_a_plans_words_are_filled_once_as_if_at_once() -> None:
    """The planner defers a plan's words (`SpeedPlan.explain_later`: a lint whose plan changes nothing never reads
    them): the first read or write of any of them fills them all, once; a later write stands."""
    from cfgopt.plan.speed_plan import SpeedPlan

    k = space.Knobs(1, 1, False, "sdpa", False, False, "none", "bf16", "default")
    calls = []

    def fill(p: SpeedPlan) -> None:
        calls.append(p)
        p.notes, p.quoted, p.remarks = ["left out"], "quoted", ["remark"]

    read = SpeedPlan(None, k, k, 1.0)
    read.explain_later(fill)
    assert read.quoted == "quoted" and read.notes == ["left out"] and read.remarks == ["remark"] and len(calls) == 1
    written = SpeedPlan(None, k, k, 1.0)
    written.explain_later(fill)
    written.notes = ["mine"]
    assert written.notes == ["mine"] and written.quoted == "quoted" and len(calls) == 2
    assert SpeedPlan(None, k, k, 1.0).notes == []  # nothing deferred: the words as made
