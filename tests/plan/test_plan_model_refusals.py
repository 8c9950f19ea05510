"""What a release or a model refuses of neat packing and attention, judged alike by the rules and the speed plan:
LLaMA-Factory 0.9.4 stops neat packing at start-up with transformers 4.53 or newer (LF054), Gemma 2 runs eager
where `fa2` has no flash-attn and SDPA drops its soft-capping (the plan never writes `sdpa` for it), and gpt-oss
never runs `flash_attention_2`, so LF019's collator checks never reach it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

from cfgopt.environment import Environment
from cfgopt.job.settings import Settings
from cfgopt.knowledge import methods
from cfgopt.knowledge.model_family import soft_capped_attention
from cfgopt.knowledge.versions import VersionRange
from cfgopt.plan.expected_speed import plan_speed, runtime_of
from cfgopt.plan.planner import plan_for
from cfgopt.plan.speed_plan import StoppedJob
from cfgopt.plan.wording import description
from cfgopt.project.loader import load_job
from cfgopt.text.requirements.versions import stays_below

FA2_LORA = ROOT / "fixtures" / "rules" / "LF006" / "fa3" / "good_fa2.yaml"  # fa2, the default micro-batch of 8
GEMMA2 = "google/gemma-2-9b-it"


def _job(tmp_path: Path, extra: str = "", model: str | None = None, **settings):
    path = tmp_path / "train.yaml"
    text = FA2_LORA.read_text() + extra
    path.write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", model) if model else text)
    return load_job(path, Settings(target_name="h200", gpus=1, **settings))


def _node(llamafactory: str, transformers: str | None = None, flash_attn: bool = False) -> Environment:
    packages = {"llamafactory": "==" + llamafactory, "liger_kernel": "", "bitsandbytes": ""}
    if transformers is not None:
        packages["transformers"] = transformers
    if flash_attn:
        packages["flash_attn"] = "==2.8.3"
    return Environment(packages, "node.txt")


def _lint(tmp_path: Path, code: str, extra: str, *options: str, model: str | None = None) -> str:
    path = tmp_path / "train.yaml"
    text = FA2_LORA.read_text() + extra
    path.write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", model) if model else text)
    _, out, _ = run_cli(["lint", "--select", code, "--target", "h200", *options, str(path)])
    return out


# --------------------------------------------------------------------------- LF054: 0.9.4 and transformers >= 4.53


def test_the_transformers_verdict_reads_the_specifier() -> None:
    """Refused for certain where every version admitted is 4.53 or newer, passed where every one is older (an
    upper bound that can be told: `<`, `<=`, `~=`, `==x.*`), unknown otherwise; 0.9.3 and 0.9.5 never refuse."""
    assert methods.transformers_refuses_neat("==4.57.1", "0.9.4") is True
    assert methods.transformers_refuses_neat(">=4.53", "0.9.4") is True
    assert methods.transformers_refuses_neat("==4.52.4", "0.9.4") is False
    assert methods.transformers_refuses_neat("~=4.52.0", "0.9.4") is False
    assert methods.transformers_refuses_neat("", "0.9.4") is None
    assert methods.transformers_refuses_neat(">=4.51,<=4.57.1", "0.9.4") is None
    assert methods.transformers_refuses_neat("==4.57.1", "0.9.3") is False
    assert methods.transformers_refuses_neat("==5.6.0", "0.9.5") is False
    assert stays_below("<4.53", (4, 53)) and stays_below("==4.52.*", (4, 53)) and not stays_below("<=4.53.0", (4, 53))
    assert not stays_below("~=4.52", (4, 53)) and not stays_below("@ url", (4, 53))


@pytest.mark.parametrize(
    ("options", "severity"),
    [
        (("--llamafactory-version", "0.9.4", "--config", 'environment={ transformers = "4.57.1" }'), "error"),
        (("--llamafactory-version", "0.9.4"), "warning"),  # the assumed environment states no transformers
        (("--llamafactory-version", ">=0.9.3", "--config", 'environment={ transformers = "4.57.1" }'), "warning"),
        (("--llamafactory-version", "0.9.4", "--config", 'environment={ transformers = "4.52.4" }'), None),
        # of the range only 0.9.5 installs with transformers 5 (0.9.4 declares <=4.57.1)
        (("--llamafactory-version", ">=0.9.3", "--config", 'environment={ transformers = "5.6.0" }'), None),
        (("--llamafactory-version", "0.9.3"), None),
        (("--llamafactory-version", "0.9.5"), None),
    ],
)
def test_lf054_fires_where_0_9_4_meets_a_newer_transformers(
    tmp_path: Path, options: tuple[str, ...], severity: str | None
) -> None:
    out = _lint(tmp_path, "LF054", "neat_packing: true\n", *options)
    if severity is None:
        assert "LF054" not in out
    else:
        assert f"{severity} LF054" in out
        assert "`ValueError: Neat packing is incompatible with transformers>=4.53.0.`" in out


def test_lf054_leaves_other_stages_to_lf010(tmp_path: Path) -> None:
    """0.9.4 refuses neat packing outside SFT before it looks at transformers (LF010 says so)."""
    assert "LF054" in _lint(tmp_path, "LF054", "neat_packing: true\n", "--llamafactory-version", "0.9.4")
    path = tmp_path / "train.yaml"
    path.write_text(path.read_text().replace("stage: sft", "stage: pt"))
    _, out, _ = run_cli(["lint", "--select", "LF054", "--llamafactory-version", "0.9.4", str(path)])
    assert "LF054" not in out


@pytest.mark.parametrize("transformers", ["==4.57.1", None])
def test_the_plan_turns_no_neat_packing_on_where_0_9_4_refuses_it(tmp_path: Path, transformers: str | None) -> None:
    """Judged for 0.9.4 with transformers 4.57.1 (or none stated: a fresh install takes 4.57.1), the plan leaves
    packing off and says why; with transformers 4.52.4 it packs neatly as for any release."""
    plan = plan_for(_job(tmp_path, environment=_node("0.9.4", transformers), llamafactory_version="0.9.4"))
    assert plan is not None and not plan.best.packing and "neat_packing" not in plan.changes
    stated = "transformers==4.57.1 in node.txt" if transformers else "node.txt states no transformers version"
    why = (
        "packing not planned: LLaMA-Factory 0.9.4 stops neat packing at start-up with transformers 4.53 or newer "
        f"({stated}; LF054)"
    )
    assert why in plan.notes
    older = plan_for(_job(tmp_path, environment=_node("0.9.4", "==4.52.4"), llamafactory_version="0.9.4"))
    assert older is not None and older.changes.get("neat_packing") is True


def test_a_range_that_allows_0_9_4_gets_no_neat_packing_either(tmp_path: Path) -> None:
    """The plan is written for every release the project allows: 0.9.4 among them refuses neat packing with
    transformers 4.57.1; with transformers 5.6.0 only 0.9.5 installs, and the plan packs neatly."""
    allows = VersionRange("llamafactory", ">=0.9.3", "requirements.txt")
    plan = plan_for(_job(tmp_path, environment=_node("0.9.5", "==4.57.1"), llamafactory_range=allows))
    assert plan is not None and not plan.best.packing
    newer = plan_for(_job(tmp_path, environment=_node("0.9.5", "==5.6.0"), llamafactory_range=allows))
    assert newer is not None and newer.changes.get("neat_packing") is True


def test_a_users_neat_packing_that_0_9_4_refuses_gets_no_plan(tmp_path: Path) -> None:
    """The user's own neat packing, refused for certain: the job does not start, so no speed-up is offered."""
    job = _job(tmp_path, "neat_packing: true\n", environment=_node("0.9.4", "==4.57.1"), llamafactory_version="0.9.4")
    plan = plan_for(job)
    assert isinstance(plan, StoppedJob) and not plan.changed
    assert plan.why.startswith("LLaMA-Factory 0.9.4 stops neat packing at start-up") and "LF054" in plan.why
    unknown = _job(tmp_path, "neat_packing: true\n", environment=_node("0.9.4"), llamafactory_version="0.9.4")
    assert not isinstance(plan_for(unknown), StoppedJob)  # not known to stop: LF054 warns


# --------------------------------------------------------------------------- Gemma 2: eager, never SDPA


def test_gemma2_is_told_by_its_name_or_its_config() -> None:
    assert soft_capped_attention(GEMMA2) and soft_capped_attention("gemma2-2b")
    assert not soft_capped_attention("google/gemma-2b") and not soft_capped_attention("google/gemma-3-4b-it")


@pytest.mark.parametrize("extra", ["", "neat_packing: true\n", "flash_attn: disabled\n"])
def test_the_plan_never_writes_sdpa_for_gemma2(tmp_path: Path, extra: str) -> None:
    """`fa2` without flash-attn runs Gemma 2 with eager attention, which keeps its soft-capping; SDPA drops it. The
    plan writes no `sdpa` (the user's `fa2`, neat packing or `disabled`) and says why."""
    plan = plan_for(_job(tmp_path, extra, model=GEMMA2))
    assert plan is not None and plan.best.attn != "sdpa" and plan.changes.get("flash_attn") != "sdpa"
    assert any(n.startswith("attention sdpa not planned: Gemma 2 soft-caps its attention logits") for n in plan.notes)


def test_gemma2_neat_packing_at_several_rows_writes_eager(tmp_path: Path) -> None:
    """Neat packing at several rows per micro-batch with `fa2` would stop once flash-attn is installed (LF019,
    0.9.5): for Gemma 2 the plan writes what runs without flash-attn, `flash_attn: disabled` (eager), not SDPA."""
    plan = plan_for(_job(tmp_path, model=GEMMA2))
    assert plan is not None and plan.best.packing and plan.best.micro > 1
    assert plan.changes.get("flash_attn") == "disabled"
    words = "`flash_attn: disabled` written: eager attention, what `fa2` runs here for Gemma 2"
    assert words in description(plan)


def test_gemma2_fa2_without_flash_attn_is_ranked_and_estimated_as_eager(tmp_path: Path) -> None:
    job = _job(tmp_path, model=GEMMA2)
    run = runtime_of(job)
    assert run.fa2_fallback == "disabled" and job.fa2_fallback == "disabled"
    plan = plan_for(job)
    assert plan is not None
    stage = methods.stage_of(job.values())
    as_fa2, as_eager = plan.best._replace(attn="fa2"), plan.best._replace(attn="disabled")
    assert plan_speed(as_fa2, plan.base, 1, stage, None, run) == plan_speed(as_eager, plan.base, 1, stage, None, run)
    fa2, eager = job.estimate(1, flash_attn="fa2"), job.estimate(1, flash_attn="disabled")
    assert fa2 is not None and eager is not None and fa2.required_gib == eager.required_gib


def _auto(tmp_path: Path, model: str = GEMMA2, target: str = "h200", **settings):
    """The LoRA config with `flash_attn: auto` (also LLaMA-Factory's default) and packing left off."""
    path = tmp_path / "train.yaml"
    text = FA2_LORA.read_text().replace("flash_attn: fa2", "flash_attn: auto\npacking: false")
    path.write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", model))
    return load_job(path, Settings(target_name=target, gpus=1, **settings))


def test_gemma2_auto_is_ranked_as_what_runs(tmp_path: Path) -> None:
    """LLaMA-Factory turns `auto` on Gemma 2 into fa2 (eager without flash-attn; model/model_utils/attention.py
    L46-53): the plan's baseline is fa2, ranked as eager here, and it writes no `flash_attn` to keep what runs. Other
    models' `auto` is SDPA (transformers' choice)."""
    job = _auto(tmp_path)
    plan = plan_for(job)
    assert plan is not None and plan.base.attn == "fa2" and "flash_attn" not in plan.changes
    run, stage = runtime_of(job), methods.stage_of(job.values())
    as_eager = plan.base._replace(attn="disabled")
    assert plan_speed(plan.base, plan.base, 1, stage, None, run) == plan_speed(as_eager, plan.base, 1, stage, None, run)
    assert "`flash_attn: auto` runs eager attention here for Gemma 2" in description(plan)
    assert job.estimate(1).required_gib == job.estimate(1, flash_attn="disabled").required_gib
    assert plan_for(_auto(tmp_path, model="meta-llama/Meta-Llama-3-8B-Instruct")).base.attn == "sdpa"


def test_gemma2_auto_with_flash_attn_runs_fa2_or_stops(tmp_path: Path) -> None:
    """With flash-attn, `auto` on Gemma 2 is fa2: on an H200 no gain is claimed for writing it, and on a T4 it stops
    the job as `fa2` does (LF049), so the plan writes eager attention."""
    node = _node("0.9.5", flash_attn=True)
    plan = plan_for(_auto(tmp_path, environment=node))
    assert plan is not None and plan.best.attn == "fa2" and "flash_attn" not in plan.changes
    t4 = plan_for(_auto(tmp_path, model="google/gemma-2-2b-it", target="t4", environment=node))
    assert t4 is not None and t4.changes.get("flash_attn") == "disabled"
    assert "`flash_attn: disabled` written: `auto` stops this job (t4 is older than Ampere" in description(t4)


def test_lf019_and_lf049_judge_gemma2_auto_as_fa2(tmp_path: Path) -> None:
    """`auto` on Gemma 2 is fa2 where flash-attn is installed: neat packing at several rows stops at the first batch
    (LF019), and on a T4 the first forward pass stops (LF049, with the fix the plan writes); quiet where flash-attn
    is missing (eager runs) and for other models (SDPA)."""
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nflash-attn==2.8.3\n")
    auto = "flash_attn: auto\nneat_packing: true\nper_device_train_batch_size: 4\n"
    path = tmp_path / "train.yaml"
    path.write_text(
        FA2_LORA.read_text().replace("flash_attn: fa2\n", auto).replace("meta-llama/Meta-Llama-3-8B-Instruct", GEMMA2)
    )
    lint = ["lint", "--select", "LF019,LF049", "--format", "json", str(path)]
    _, out, _ = run_cli([*lint, "--target", "h200", "--environment", str(node)])
    (lf019,) = json.loads(out)["diagnostics"]
    assert lf019["code"] == "LF019" and "with `flash_attn: auto` (fa2 for Gemma 2)" in lf019["message"]
    _, out, _ = run_cli([*lint, "--target", "t4", "--environment", str(node)])
    assert {d["code"] for d in json.loads(out)["diagnostics"]} == {"LF019", "LF049"}
    _, out, _ = run_cli([*lint, "--target", "t4"])
    assert [d["code"] for d in json.loads(out)["diagnostics"]] == ["LF019"]  # the warning for the day it is installed
    path.write_text(FA2_LORA.read_text().replace("flash_attn: fa2\n", auto))
    _, out, _ = run_cli([*lint, "--target", "t4", "--environment", str(node)])
    assert json.loads(out)["diagnostics"] == []


def test_pf004_is_quiet_on_gemma2_without_flash_attn(tmp_path: Path) -> None:
    """Eager is what LLaMA-Factory runs Gemma 2 with where flash-attn is missing: PF004's SDPA is no advice there."""
    long = "flash_attn: disabled\ncutoff_len: 4096\n"
    assert "PF004" not in _lint(tmp_path, "PF004", long, model=GEMMA2)
    assert "PF004" in _lint(tmp_path, "PF004", long)
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nflash-attn==2.8.3\n")
    with_fa = _lint(tmp_path, "PF004", long, "--environment", str(node), model=GEMMA2)
    assert "slower than fa2 (which keeps Gemma 2's soft-capping; SDPA drops it)" in with_fa


def test_lf019_says_gemma2_falls_back_to_eager(tmp_path: Path) -> None:
    out = _lint(tmp_path, "LF019", "neat_packing: true\nper_device_train_batch_size: 4\n", model=GEMMA2)
    assert "where `fa2` falls back to eager attention and the run does not stop" in out


# --------------------------------------------------------------------------- gpt-oss: the FA3 kernel, always


def test_gpt_oss_never_meets_the_collators_fa2_checks() -> None:
    """LLaMA-Factory gives gpt-oss the hub's FlashAttention-3 kernel whatever `flash_attn` says, so the collator's
    `attn_implementation == "flash_attention_2"` tests (the one-row assertion, the gemma4/gpt_oss refusal) never
    hold for it; gemma4 is still refused."""
    assert not methods.neat_fa2_fails("openai/gpt-oss-20b", 4) and not methods.neat_fa2_fails("gpt_oss_20b", 1)
    assert methods.neat_fa2_fails("google/gemma-4-12b-it", 1) and methods.neat_fa2_fails("meta-llama/x", 2)


def test_lf019_is_quiet_on_gpt_oss(tmp_path: Path) -> None:
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nflash-attn==2.8.3\n")
    extra = "neat_packing: true\nper_device_train_batch_size: 4\n"
    assert "LF019" not in _lint(tmp_path, "LF019", extra, "--environment", str(node), model="openai/gpt-oss-20b")
    gemma4 = _lint(tmp_path, "LF019", extra, "--environment", str(node), model="google/gemma-4-12b-it")
    assert "`neat_packing` with `fa2` on a gemma4 model" in gemma4 and "gpt-oss model" not in gemma4


def test_the_micro_batch_advice_is_not_held_by_lf019_on_gpt_oss(tmp_path: Path) -> None:
    """PF007 stays silent for neat packing with fa2 only where the one-row assertion can fire: not on gpt-oss."""
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nflash-attn==2.8.3\n")
    extra = "neat_packing: true\ncutoff_len: 1024\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 8\n"
    out = _lint(tmp_path, "PF007", extra, "--environment", str(node), model="openai/gpt-oss-20b")
    assert "PF007" in out
