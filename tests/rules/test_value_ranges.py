"""LF056's bounds are the real code's tests: each is run against the library that refuses the value (PEFT's LoRA
layer, torch's optimizers and BatchSampler, `datasets`' split), and the rule fires only where the run reads the key."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rule_cases import TRAIN, run_cli

from cfgopt.rules.lf056_value_out_of_range import BOUNDS, TORCH_OPTIMIZERS


def _refused_by(call) -> bool:
    try:
        call()
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("rank", [0, -1, 1, 8])
def test_lora_rank_bound_is_peft_s(rank: int) -> None:
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )

    def build() -> None:
        peft.get_peft_model(transformers.LlamaForCausalLM(config), peft.LoraConfig(r=rank, target_modules=["q_proj"]))

    assert _refused_by(build) == BOUNDS["lora_rank"].refused(rank)


@pytest.mark.parametrize("dropout", [1.5, 1.0, 0.05, 0.0, -0.1])
def test_lora_dropout_bound_is_peft_s(dropout: float) -> None:
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    lora = peft.LoraConfig(r=8, lora_dropout=dropout, target_modules=["q_proj"])

    def build() -> None:
        peft.get_peft_model(transformers.LlamaForCausalLM(config), lora)

    assert _refused_by(build) == BOUNDS["lora_dropout"].refused(dropout)


@pytest.mark.parametrize("name", sorted(TORCH_OPTIMIZERS))
@pytest.mark.parametrize("rate", [-1e-4, 0.0, 2e-5, math.nan])
def test_learning_rate_bound_is_torch_s(name: str, rate: float) -> None:
    torch = pytest.importorskip("torch")
    classes = {
        "adamw_torch": torch.optim.AdamW,
        "adamw_torch_fused": torch.optim.AdamW,
        "sgd": torch.optim.SGD,
        "adagrad": torch.optim.Adagrad,
        "rmsprop": torch.optim.RMSprop,
    }
    params = [torch.nn.Parameter(torch.zeros(2))]
    refused = _refused_by(lambda: classes[name](params, lr=rate))
    if math.isnan(rate):  # AdamW, Adagrad and RMSprop refuse it, SGD does not: never an error, at most a miss
        assert not BOUNDS["learning_rate"].refused(rate)
    else:
        assert refused == BOUNDS["learning_rate"].refused(rate)


@pytest.mark.parametrize("size", [0, -1, 1, 4])
def test_batch_size_bound_is_the_sampler_s(size: int) -> None:
    torch = pytest.importorskip("torch")
    sampler = torch.utils.data.SequentialSampler(range(8))
    refused = _refused_by(lambda: torch.utils.data.BatchSampler(sampler, batch_size=size, drop_last=False))
    assert refused == BOUNDS["per_device_train_batch_size"].refused(size)


@pytest.mark.parametrize("val_size", [1.0, 1, 0.1, 0.5])
def test_val_size_bound_is_the_split_s(val_size: float) -> None:
    """LLaMA-Factory's `int(val_size) if val_size > 1 else val_size`, then `datasets`' split."""
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"a": list(range(10))})
    passed = int(val_size) if val_size > 1 else val_size
    refused = _refused_by(lambda: data.train_test_split(test_size=passed, seed=42))
    assert refused == BOUNDS["val_size"].refused(val_size)


def lf054(tmp_path: Path, extra: str) -> list[dict]:
    path = tmp_path / "cfg.yaml"
    path.write_text(TRAIN + extra)
    _, out, err = run_cli(["lint", "--format", "json", "--no-config", "--select", "LF056", str(path)])
    assert out.strip(), err
    return json.loads(out)["diagnostics"]


@pytest.mark.parametrize(
    "extra",
    [
        "lora_rank: 0\nadapter_name_or_path: saves/adapter\n",  # resumed: the rank is the adapter's
        "lora_rank: 0\ndo_train: false\ndo_predict: true\n",  # no adapter is created
        "lora_rank: 0\nfinetuning_type: full\n",
        "learning_rate: -1.0e-4\noptim: adafactor\n",
        "learning_rate: -1.0e-4\nuse_galore: true\n",
        "gradient_accumulation_steps: 0\nstreaming: true\nmax_steps: 100\n",
        "val_size: 1.0\nstreaming: true\nmax_steps: 100\n",  # streaming takes int(val_size) rows
        "val_size: 1\n",
        "lora_dropout: -0.1\n",
    ],
)
def test_quiet_where_the_run_does_not_read_it_so(tmp_path: Path, extra: str) -> None:
    assert lf054(tmp_path, extra) == []


def test_a_deepspeed_optimizer_block_takes_the_rate(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(
        json.dumps({"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})
    )
    assert lf054(tmp_path, "learning_rate: -1.0e-4\ndeepspeed: ds.json\n") == []
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto"}))
    (diag,) = lf054(tmp_path, "learning_rate: -1.0e-4\ndeepspeed: ds.json\n")
    assert diag["key"] == "learning_rate" and "Invalid learning rate: -0.0001" in diag["message"]
