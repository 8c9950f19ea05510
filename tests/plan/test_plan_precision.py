"""No fix writes fp16 for a model whose activations overflow it (Qwen2 and later: LF050 says such a run trains
nothing): not LF008's fix of bf16 on V100 / T4, not LF004's, not the speed plan's precision step. One place
decides which models these are (`model_family.overflows_fp16`), and LF050 asks it too. Nor for BAdam, whose fp16
weights fp16's gradient scaler refuses (`space.BADAM_FP16`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import run_cli

from cfgopt.environment.probe import Platform
from cfgopt.knowledge.model_family import LocalModel, overflows_fp16
from cfgopt.plan import space

CONFIG = """model_name_or_path: {model}
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: {template}
cutoff_len: 2048
output_dir: out
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
{extra}"""
QWEN = {"model": "Qwen/Qwen2.5-7B-Instruct", "template": "qwen"}
LLAMA = {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "template": "llama3"}
PRECISIONS = ["bf16: true\n", "", "fp16: true\nbf16: true\n"]  # LF008's case, PF002's, LF004's


def _write(tmp_path: Path, model: dict[str, str], extra: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(extra=extra, **model))
    return path


def _codes(path: Path, *args: str) -> set[str]:
    _, out, _ = run_cli(["lint", str(path), "--format", "json", *args])
    return {d["code"] for d in json.loads(out)["diagnostics"]}


@pytest.mark.parametrize("target", ["v100", "t4"])
@pytest.mark.parametrize("extra", PRECISIONS)
def test_fix_writes_no_fp16_for_a_model_that_overflows_it_and_converges(tmp_path: Path, target: str, extra: str):
    path = _write(tmp_path, QWEN, extra)
    args = ["--unsafe-fixes", "--target", target, "--gpus", "1", str(path)]
    run_cli(["fix", "--write", *args])
    fixed = path.read_text()
    assert "fp16: true" not in fixed
    assert "LF050" not in _codes(path, "--target", target, "--gpus", "1")  # no fix created LF050's finding
    run_cli(["fix", "--write", *args])
    assert path.read_text() == fixed  # nothing left that a second pass would change


@pytest.mark.parametrize("target", ["v100", "t4"])
def test_a_model_that_trains_in_fp16_still_gets_fp16_there(tmp_path: Path, target: str) -> None:
    path = _write(tmp_path, LLAMA, "bf16: true\n")
    run_cli(["fix", "--write", "--unsafe-fixes", "--target", target, "--gpus", "1", str(path)])
    text = path.read_text()
    assert "fp16: true" in text and "bf16: true" not in text


def test_lf008_keeps_its_warning_and_says_why_there_is_no_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, QWEN, "bf16: true\n")
    _, out, _ = run_cli(["lint", str(path), "--format", "json", "--select", "LF008", "--target", "v100"])
    (found,) = json.loads(out)["diagnostics"]
    assert found["fix"] is None and "overflow fp16 (LF050)" in found["message"]


def test_pf002_is_quiet_on_fp32_where_fp16_overflows_and_bf16_is_emulated(tmp_path: Path) -> None:
    """fp32 is what Qwen's maintainers advise on V100 / T4 (LF050's evidence); on a bf16 GPU PF002 still asks for
    bf16, and a Llama on a T4 still for fp16."""
    qwen = _write(tmp_path, QWEN, "")
    assert "PF002" not in _codes(qwen, "--target", "t4", "--gpus", "1")
    assert "PF002" in _codes(qwen, "--target", "a100", "--gpus", "1")
    llama = _write(tmp_path, LLAMA, "")
    assert "PF002" in _codes(llama, "--target", "t4", "--gpus", "1")


def test_the_precision_step_offers_no_fp16_for_such_a_model() -> None:
    config = {"finetuning_type": "lora"}
    base = space.Knobs(micro=1, ga=8, gc=True, attn="sdpa", packing=False, liger=False, zero="none", precision="fp32")
    no_bf16 = space.SpaceOptions(bf16=False)
    assert "fp16" in space.precision_values(config, base, no_bf16)
    assert space.precision_values(config, base, no_bf16._replace(overflows_fp16=True)) == ["fp32"]
    values = space.knob_values(config, base, Platform(cuda=True), no_bf16._replace(overflows_fp16=True))
    assert "fp16" not in values["precision"]


@pytest.mark.parametrize(
    ("ref", "local", "overflows"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", None, True),
        ("Qwen/QwQ-32B", None, True),
        ("/models/my-finetune", LocalModel(Path("/models/my-finetune"), {"model_type": "qwen3"}), True),
        ("Qwen/Qwen1.5-7B", None, False),  # trained in fp16 as well
        ("meta-llama/Llama-2-7b-hf", None, False),
        (None, None, False),
    ],
)
def test_one_place_names_the_models_that_overflow_fp16(ref, local, overflows: bool) -> None:
    assert overflows_fp16(ref, local) is overflows


# LLaMA-Factory's examples/extras/badam/llama3_full_sft.yaml's method, with eager attention (a change the plan makes)
BADAM = "use_badam: true\nbadam_mode: layer\nbadam_switch_mode: ascending\nflash_attn: disabled\n"


def test_the_plan_writes_no_fp16_for_badam_and_says_why(tmp_path: Path) -> None:
    """BAdam keeps the trained weights in the checkpoint's dtype, and fp16's GradScaler refuses fp16 gradients
    (`space.BADAM_FP16`): on a T4 the plan leaves an fp32 BAdam job's precision as written and says why; on a bf16
    GPU it still writes bf16 (autocast, no scaler)."""
    path = _write(tmp_path, LLAMA, BADAM)
    path.write_text(path.read_text().replace("finetuning_type: lora\nlora_target: all\n", "finetuning_type: full\n"))
    _, out, _ = run_cli(["lint", str(path), "--format", "json", "--target", "t4", "--gpus", "1"])
    plans = [d["fix"]["description"] for d in json.loads(out)["diagnostics"] if "Speed plan" in str(d["fix"])]
    assert len(plans) == 1 and plans[0].startswith("Speed plan for 1 x t4: attention sdpa (")
    assert "; fp16 mixed precision not planned: BAdam keeps the trained weights in the checkpoint's dtype" in plans[0]
    run_cli(["fix", "--write", "--unsafe-fixes", "--target", "t4", "--gpus", "1", str(path)])
    assert "fp16" not in path.read_text() and "flash_attn: sdpa" in path.read_text()
    run_cli(["fix", "--write", "--unsafe-fixes", "--target", "h100", "--gpus", "1", str(path)])
    assert "bf16: true" in path.read_text()


def test_the_precision_step_offers_no_fp16_for_badam() -> None:
    base = space.Knobs(micro=1, ga=8, gc=True, attn="sdpa", packing=False, liger=False, zero="none", precision="fp32")
    config = {"finetuning_type": "full", "use_badam": True}
    assert space.precision_values(config, base, space.SpaceOptions(bf16=False)) == ["fp32"]
    assert space.precision_values(config, base, space.SpaceOptions(bf16=True)) == ["fp32", "bf16"]
