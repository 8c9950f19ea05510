"""The speed planner and tune's search space per fine-tuning method and training stage (cfgopt/knowledge/methods.py):
packing only where the stage's data processor packs, Liger only where it fuses the loss, pure bf16 and another
optimizer only for full / freeze, no ZeRO-3 over an 8-bit base, and a PPO plan that spends no memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from rule_cases import ROOT

from cfgopt.environment.probe import probed_environment
from cfgopt.job.settings import Settings
from cfgopt.knowledge import methods
from cfgopt.knowledge.model_shapes import shape_for
from cfgopt.knowledge.targets import TARGETS
from cfgopt.plan import space
from cfgopt.plan.planner import plan_for
from cfgopt.project.loader import load_job
from cfgopt.tune import search

CONFIG = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: {stage}
do_train: true
finetuning_type: {ftype}
dataset: alpaca_en_demo
template: llama3
cutoff_len: 1024
output_dir: out
per_device_train_batch_size: 2
gradient_accumulation_steps: 4
bf16: true
{extra}"""
PLATFORM = space.Platform(cuda=True, liger=True, deepspeed=True, bitsandbytes=True)
OPTIONS = space.SpaceOptions(gpus=4, allow_packing=True)


def values_for(stage: str, ftype: str = "lora", **extra) -> dict[str, list]:
    config = {"stage": stage, "finetuning_type": ftype, "bf16": True, **extra}
    base = space.baseline_knobs(config, None)
    return space.knob_values(config, base, PLATFORM, OPTIONS)


def _plan(tmp_path: Path, stage: str, ftype: str = "lora", extra: str = ""):
    path = tmp_path / f"{stage}_{ftype}.yaml"
    path.write_text(CONFIG.format(stage=stage, ftype=ftype, extra=extra))
    probed = probed_environment(["liger_kernel", "bitsandbytes"])
    settings = Settings(target_name="h200", gpus=1, extend_select=["PF", "MEM"], environment=probed)
    return plan_for(load_job(path, settings))


@pytest.mark.parametrize("stage", ["rm", "dpo", "kto", "ppo"])
def test_stages_without_packing_or_fused_loss_do_not_search_them(stage: str) -> None:
    values = values_for(stage)
    assert values["packing"] == [False] and values["liger"] == [False]


@pytest.mark.parametrize("stage", sorted(methods.PACKING_STAGES))
def test_pt_and_sft_search_packing_and_liger(stage: str) -> None:
    values = values_for(stage)
    assert set(values["packing"]) == {False, True} and set(values["liger"]) == {False, True}


@pytest.mark.parametrize(
    ("ftype", "extra", "full_weight"),
    [
        ("full", {}, True),
        ("freeze", {}, True),
        ("lora", {}, False),
        ("lora", {"quantization_bit": 4}, False),  # QLoRA
        ("lora", {"use_dora": True}, False),  # DoRA
    ],
)
def test_precision_and_optimizer_only_for_full_weight_methods(ftype: str, extra: dict, full_weight: bool) -> None:
    values = values_for("sft", ftype, **extra)
    assert ("pure_bf16" in values["precision"]) is full_weight
    assert (len(values["optim"]) > 1) is full_weight


def test_an_8bit_base_is_never_offered_zero3() -> None:
    assert not any(z.startswith("z3") for z in values_for("sft", quantization_bit=8)["zero"])
    assert "z3" in values_for("sft", quantization_bit=4)["zero"]


def test_the_sft_plan_packs_and_fuses_the_dpo_plan_does_not(tmp_path: Path) -> None:
    sft = _plan(tmp_path, "sft")
    assert sft is not None and sft.best.packing and sft.best.liger
    dpo = _plan(tmp_path, "dpo", "full", "pure_bf16: false\n")
    assert dpo is None or not (dpo.best.packing or dpo.best.liger)


def test_a_full_dpo_plan_counts_its_reference_model(tmp_path: Path) -> None:
    """Its estimate holds the frozen copy: the planned peak is above the same job's SFT plan's."""
    sft, dpo = _plan(tmp_path, "sft", "full"), _plan(tmp_path, "dpo", "full")
    assert sft is not None and dpo is not None and sft.est_gib is not None and dpo.est_gib is not None
    assert dpo.best.precision == sft.best.precision
    if (dpo.best.micro, dpo.best.gc, dpo.best.precision) == (sft.best.micro, sft.best.gc, sft.best.precision):
        assert dpo.est_gib > sft.est_gib


def test_ppo_spends_no_memory_it_cannot_estimate_well(tmp_path: Path) -> None:
    """PPO's estimate is low confidence: the plan moves no knob that spends memory."""
    plan = _plan(tmp_path, "ppo", "lora", "reward_model: saves/rm\n")
    if plan is not None:
        assert plan.est_gib is None and plan.best.gc == plan.base.gc and plan.best.precision == plan.base.precision
        # without an estimate the micro-batch grows to 8,192 tokens at most: prompt + max_new_tokens (1024) each
        assert plan.best.micro * (1024 + 1024) <= 8192


def test_tune_prunes_nothing_on_a_low_confidence_estimate() -> None:
    """A PPO candidate far above the GPU is still run (its estimate is shown); the same SFT one is pruned."""
    fits = search.MemoryFits(shape_for("meta-llama/Meta-Llama-3-8B"), TARGETS["h200"], 1)
    big = {"finetuning_type": "full", "bf16": True, "cutoff_len": 4096, "per_device_train_batch_size": 16}
    ppo_fits, ppo_peak = fits({**big, "stage": "ppo", "reward_model_type": "full"})
    sft_fits, _ = fits({**big, "stage": "sft"})
    assert ppo_fits and ppo_peak is not None and ppo_peak > 141 and not sft_fits


def test_the_dpo_plan_is_the_h200_searchs_winner() -> None:
    """LLaMA-Factory's Qwen3-4B LoRA DPO example on one H200: tune measured 8 x 1 with GC on at 2,581 tokens/s and
    the earlier plan (2 x 4, GC off) at 989 (bench/planner/h200/longer-search). DPO's measured micro-batch
    exponent makes the plan the winner; SFT's would not."""
    from cfgopt.plan.priors import prior_speed

    path = ROOT / "bench" / "planner" / "examples" / "train_lora" / "qwen3_lora_dpo.yaml"
    plan = plan_for(load_job(path, Settings(target_name="h200", gpus=1)))
    assert plan is not None and (plan.best.micro, plan.best.ga, plan.best.gc) == (8, 1, True)
    winner, earlier = plan.best, plan.best._replace(micro=2, ga=4, gc=False)
    assert prior_speed(winner, 1, "dpo") > prior_speed(earlier, 1, "dpo")
    assert prior_speed(winner, 1, "sft") < prior_speed(earlier, 1, "sft")


def test_the_kto_plan_takes_the_micro_batch_the_h200_measured_over_checkpointing_off() -> None:
    """The held-out Llama-3.2-3B LoRA KTO on one H200 (bench/planner/h200/2026-12-05-plans/kto): 8 x 2 with GC off
    ran 2,615 tokens/s, 16 x 1 with GC on 2,888 (SDPA). KTO's measured micro-batch exponent and its GC-off prior
    (SFT's, less the forwards without gradients that checkpointing does not recompute) rank them as measured;
    either alone, with SFT's other, would not."""
    from cfgopt.plan.priors import PRIORS, prior_speed

    path = ROOT / "bench" / "planner" / "heldout" / "llama32_3b_lora_kto.yaml"
    plan = plan_for(load_job(path, Settings(target_name="h200", gpus=1)))
    assert plan is not None and (plan.best.micro, plan.best.ga, plan.best.gc) == (16, 1, True)
    measured, earlier = plan.best._replace(attn="sdpa"), plan.best._replace(micro=8, ga=2, gc=False, attn="sdpa")
    assert prior_speed(measured, 1, "kto") > prior_speed(earlier, 1, "kto")
    assert prior_speed(measured, 1, "sft") < prior_speed(earlier, 1, "sft")
    sft_gc, kto_gc = PRIORS["gc_off"], PRIORS["gc_off_by_stage"]["kto"]
    share = sft_gc - 1  # the recomputed forward, as a share of SFT's step without checkpointing
    assert kto_gc == pytest.approx(1 + share / (1 + 3 * share), abs=0.001)  # + the KL and two reference forwards
    exponent, sft_exponent = PRIORS["micro_exponent_unpacked_by_stage"]["kto"], PRIORS["micro_exponent_unpacked"]
    assert 2**exponent < sft_gc and 2**sft_exponent < kto_gc < 2**exponent


def test_kto_plans_eager_attention_as_measured_and_keeps_a_users_fa2(tmp_path: Path) -> None:
    """Eager beat SDPA in each of four KTO runs (1.10x, 1.12x on an H200; 1.25x, 1.22x on an H100, bench/planner/
    README.md "KTO's attention"): KTO's plan writes `flash_attn: disabled`, ranked at the smallest, 1.10. `fa2`, not
    measured against eager on KTO, is ranked level with it: a user's `fa2` stays where flash-attn is installed,
    and eager is planned over an unstated attention there. SFT keeps its order (SDPA over eager)."""
    from cfgopt.plan.priors import prior_speed

    path = ROOT / "bench" / "planner" / "heldout" / "llama32_3b_lora_kto.yaml"
    plan = plan_for(load_job(path, Settings(target_name="h200", gpus=1)))
    assert plan is not None and plan.best.attn == "disabled"
    eager, sdpa, fa2 = (plan.best._replace(attn=a) for a in ("disabled", "sdpa", "fa2"))
    assert prior_speed(eager, 1, "kto") == pytest.approx(1.10 * prior_speed(sdpa, 1, "kto"))
    assert prior_speed(fa2, 1, "kto") == prior_speed(eager, 1, "kto")
    assert prior_speed(eager, 1, "sft") < prior_speed(sdpa, 1, "sft") < prior_speed(fa2, 1, "sft")
    with_flash = Settings(target_name="h200", gpus=1, environment=probed_environment(["flash_attn"]))
    users_fa2 = tmp_path / "kto_fa2.yaml"
    users_fa2.write_text(path.read_text(encoding="utf-8") + "flash_attn: fa2\n", encoding="utf-8")
    kept, unstated = plan_for(load_job(users_fa2, with_flash)), plan_for(load_job(path, with_flash))
    assert kept is not None and kept.best.attn == "fa2"  # no change where the ranking has no measured reason
    assert unstated is not None and unstated.best.attn == "disabled"


def test_pf004_is_quiet_on_kto_up_to_the_cutoff_measured(tmp_path: Path) -> None:
    """`flash_attn: disabled` on KTO at cutoff 2048 is what the plan writes: no PF004; above the cutoff measured,
    and on SFT, PF004 warns as before."""
    from rule_cases import run_cli

    path = ROOT / "bench" / "planner" / "heldout" / "llama32_3b_lora_kto.yaml"
    base = path.read_text(encoding="utf-8")
    codes = {}
    for name, text in {
        "kto": base + "flash_attn: disabled\n",
        "kto_long": base.replace("cutoff_len: 2048", "cutoff_len: 8192") + "flash_attn: disabled\n",
        "sft": base.replace("stage: kto", "stage: sft") + "flash_attn: disabled\n",
    }.items():
        config = tmp_path / f"{name}.yaml"
        config.write_text(text, encoding="utf-8")
        _, out, _ = run_cli(["lint", "--select", "PF004", "--output-format", "concise", str(config)])
        codes[name] = "PF004" in out
    assert codes == {"kto": False, "kto_long": True, "sft": True}


def test_a_setting_the_plan_weighed_and_kept_is_no_warning() -> None:
    """MEM004 (checkpointing could go) on the DPO example, whose plan weighs checkpointing, keeps it on and takes
    8 x 1: a warning whose fix does not change it would contradict the plan, so it is not reported (issue 32);
    PF007, about the micro-batch the plan changes, carries the plan."""
    from rule_cases import run_cli

    path = ROOT / "bench" / "planner" / "examples" / "train_lora" / "qwen3_lora_dpo.yaml"
    _, out, _ = run_cli(["lint", "--target", "h200", "--gpus", "1", "--output-format", "concise", str(path)])
    assert "MEM004" not in out
    pf007 = next(line for line in out.splitlines() if "PF007" in line)
    assert "PF007" in pf007
