"""XF006 with a mixture of experts: transformers 5 holds a sparse layer's experts as one fused `gate_up_proj`
(experts x 2 x moe width x hidden: 940M elements in Mixtral-8x7B), larger than the embedding the rule took as the
largest parameter, so `zero.Init`'s NVMe swap buffer overflowed with no finding. transformers 4 held Mixtral's
experts as one linear each: no overflow there, and where the job's transformers is not known, a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_configs import DEEPSEEK_V3, MIXTRAL_8X7B
from rule_cases import ROOT, run_cli

from cfgopt.knowledge.model_shapes import _from_config, largest_parameter

TRAIN = """model_name_or_path: models/Mixtral-8x7B-Instruct-v0.1
stage: sft
do_train: true
finetuning_type: full
deepspeed: ds.json
dataset: alpaca_en_demo
template: mistral
cutoff_len: 2048
output_dir: out
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
bf16: true
"""


def _job(folder: Path, transformers: str | None, config: dict = MIXTRAL_8X7B) -> Path:
    model = folder / "models" / "Mixtral-8x7B-Instruct-v0.1"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(config))
    ds = json.loads((ROOT / "fixtures/rules/XF006/nvme-4-gpus/ds_z3_nvme.json").read_text())
    (folder / "ds.json").write_text(json.dumps(ds))
    if transformers is not None:
        (folder / "requirements.txt").write_text(f"llamafactory==0.9.5\ntransformers=={transformers}\n")
    (folder / "train.yaml").write_text(TRAIN)
    return folder / "train.yaml"


def _xf006(train: Path) -> list[dict]:
    args = ["lint", "--format", "json", "--exit-zero", "--select", "XF006", "--target", "h100", "--gpus", "8"]
    _, out, _ = run_cli([*args, str(train)])
    return [d for d in json.loads(out)["diagnostics"] if d["code"] == "XF006"]


def test_the_largest_parameter_is_the_fused_experts_tensor() -> None:
    mixtral, deepseek = _from_config(MIXTRAL_8X7B, "m"), _from_config(DEEPSEEK_V3, "m")
    assert largest_parameter(mixtral) == (8 * 28672 * 4096, "the experts' fused gate_up_proj (8 x 28672 x 4096)")
    assert largest_parameter(deepseek)[0] == 256 * 2 * 2048 * 7168  # 7.5B elements
    assert largest_parameter(mixtral, experts_fused=False) == (32000 * 4096, "the embedding")


def test_mixtral_under_transformers_5_overflows_the_default_buffer(tmp_path: Path) -> None:
    """939,524,096 elements over 8 GPUs: 117,440,512 per GPU, more than the default 1e8 (the embedding's 16.4M
    was all the rule saw)."""
    (found,) = _xf006(_job(tmp_path, "5.6.0"))
    assert found["severity"] == "error"
    fused = "the experts' fused gate_up_proj (8 x 28672 x 4096) (939,524,096 elements), is 117,440,512 per GPU"
    assert fused in found["message"]
    assert "train on 10 GPUs or more" in found["message"]


def test_mixtral_under_transformers_4_keeps_one_linear_per_expert(tmp_path: Path) -> None:
    assert _xf006(_job(tmp_path, "4.57.1")) == []


def test_an_unstated_transformers_gives_a_warning_that_says_so(tmp_path: Path) -> None:
    (found,) = _xf006(_job(tmp_path, None))
    assert found["severity"] == "warning" and "under transformers 5 (4.x holds each expert" in found["message"]


@pytest.mark.parametrize("transformers", ["4.57.1", None])
def test_a_family_fused_before_transformers_5_is_judged_fused(tmp_path: Path, transformers: str | None) -> None:
    """Qwen3-VL-MoE's experts were fused in transformers 4.57 already: an error whatever the version."""
    text = {**MIXTRAL_8X7B, "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": 14336, "num_experts": 8}
    text = {k: v for k, v in text.items() if k != "num_local_experts"}
    config = {"model_type": "qwen3_vl_moe", "text_config": text, "tie_word_embeddings": False}
    (found,) = _xf006(_job(tmp_path, transformers, config))
    assert found["severity"] == "error" and "fused gate_up_proj" in found["message"]


def test_a_large_enough_buffer_is_silent(tmp_path: Path) -> None:
    train = _job(tmp_path, "5.6.0")
    ds = json.loads((tmp_path / "ds.json").read_text())
    ds["zero_optimization"]["offload_param"]["buffer_size"] = 2e8
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    assert _xf006(train) == []
