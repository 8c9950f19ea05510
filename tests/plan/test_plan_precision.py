"""No fix writes fp16 for a model whose activations overflow it (Qwen2 and later: LF050 says such a run trains
nothing): not LF008's fix of bf16 on V100 / T4, not LF004's, not the speed plan's precision step. One place
decides which models these are (`model_family.overflows_fp16`), and LF050 asks it too. Nor for BAdam, whose fp16
weights fp16's gradient scaler refuses (`space.BADAM_FP16`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

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


PRECISION_CODES = {"LF001", "LF004", "LF008", "LF050", "PF001", "PF002"}


@pytest.mark.parametrize(("target", "gpus"), [("t4", "8"), ("t4", "1"), ("v100", "8"), ("cpu", "1")])
def test_the_seeds_precision_fixes_are_planned_together(tmp_path: Path, target: str, gpus: str) -> None:
    """The seed's `compute_type: bf16` (LF001's WebUI mapping) and LF008's fp16 on V100 / T4 land in one run: a
    second run changes nothing, and no precision finding appears that was not there (on a CPU no `bf16: true` is
    written, which would stop there: LF008's error)."""
    work = tmp_path / "seed"
    shutil.copytree(ROOT / "fixtures" / "seed", work)
    options = ["--target", target, "--gpus", gpus]

    def loud() -> set[tuple[str, str]]:
        _, out, _ = run_cli(["lint", str(work), "--format", "json", "--exit-zero", *options])
        found = json.loads(out)["diagnostics"]
        return {(d["file"], d["code"]) for d in found if d["severity"] in ("error", "warning")}

    before = loud()
    run_cli(["fix", "--write", "--unsafe-fixes", "--exit-zero", *options, str(work)])
    first = {p.name: p.read_text() for p in work.iterdir()}
    created = {(f, c) for f, c in loud() - before if c in PRECISION_CODES}
    run_cli(["fix", "--write", "--unsafe-fixes", "--exit-zero", *options, str(work)])
    assert {p.name: p.read_text() for p in work.iterdir()} == first and created == set()
    assert ("fp16: true" in first["llama3_lora_sft.yaml"]) is (target != "cpu")


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


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            "",
            "keeps the frozen weights in the checkpoint's bf16, emulated by torch there (slow: no tensor cores) and "
            "trains only the LoRA adapter in fp32",
        ),
        ("finetuning_type: freeze\n", "trains only the trained layers in fp32"),
        ("finetuning_type: full\n", "upcasts every weight from the checkpoint's bf16 to fp32 (a full fine-tune trains"),
        ("finetuning_type: full\nuse_badam: true\n", "the trained ones too, in the checkpoint's bf16"),
    ],
)
def test_lf050_on_v100_says_what_llamafactory_does_without_a_flag(tmp_path: Path, extra: str, words: str) -> None:
    """Without `fp16` LLaMA-Factory loads the weights in the checkpoint's dtype (bf16) and upcasts only what trains
    to fp32 (model/loader.py L155, model/adapter.py L313-325): fp32 training for a full fine-tune only."""
    path = _write(tmp_path, QWEN, "fp16: true\n")
    path.write_text(path.read_text().replace("finetuning_type: lora\n", extra or "finetuning_type: lora\n"))
    _, out, _ = run_cli(["lint", str(path), "--format", "json", "--select", "LF050", "--target", "v100"])
    (found,) = json.loads(out)["diagnostics"]
    assert "on v100 drop `fp16`: with no precision flag LLaMA-Factory " in found["message"]
    assert words in found["message"] and found["fix"] is None


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
