#!/usr/bin/env python3
"""Measure LLaMA-Factory 0.9.5's peak GPU memory for many variants per model, amortising start-up.

    python bench/memory/harness.py lanes --out DIR [--tiny] [--only FAMILY,...]
    python bench/memory/harness.py family NAME --out DIR [--tiny]

`family` builds one random-init model with the family's real config.json (real `model_type`, so Qwen3 has its
q/k norms, Qwen2.5 its q/k/v biases, Gemma 2 its four norms and soft-capping), the synthetic tokenizer and
dataset of `cfgopt verify` once, then calls LLaMA-Factory's own entry point,
`llamafactory.train.tuner.run_exp(args, callbacks=[...])`, once per variant in the same process, with
`max_steps` 2. The peak is `torch.cuda.max_memory_allocated` after resetting the peak at `on_train_begin`
(as `cfgopt verify` does), so it holds everything the trainer allocates: bf16 weights, LLaMA-Factory's fp32 copy
of trainable parameters, the optimizer (its default `adamw_torch_fused`, created lazily at the first step and
alive in step 2), activations, the fp32 logits of the loss. Between variants: Liger's module-level monkey
patches are undone, transformers' DeepSpeed config and accelerate's state are reset, the CUDA cache is emptied.
DeepSpeed variants run last, after setting the single-process torchrun environment (RANK=0, WORLD_SIZE=1),
because LLaMA-Factory refuses DeepSpeed without a distributed launch.

`lanes` runs the lanes of `LANES` concurrently on one GPU (each lane: its families one after another, one
process each). `max_memory_allocated` counts one process's tensors only, so concurrent lanes do not disturb the
figures; lane a runs its `big` variants first while lanes b and c build their models (they wait for it,
at most --wait-max seconds), so the GPU has room for them.
Each variant appends one JSON line to DIR/<family>.jsonl. `--tiny` shrinks every shape for a CPU dry run
(no DeepSpeed, no Liger there). DeepSpeed does not initialise a second time in one process once LLaMA-Factory
has destroyed the process group, so DeepSpeed variants after the first are run one per process:
`CFGOPT_MEMORY_VARIANT=<name>` keeps one variant, `CFGOPT_MEMORY_DS_ONLY=1` the DeepSpeed ones
(device_call_ds.sh), `CFGOPT_MEMORY_NO_DS=1` the others. `--plan knobs` measures the memory-for-speed knobs of
issue 23 instead (KNOBS_PLAN; device_call_knobs.sh), `CFGOPT_MEMORY_DEADLINE` (epoch seconds) skips variants
that could not finish before it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

GIB = 2**30
STEPS = 2
MIN_VARIANT_S = 8  # a variant starts only if this much is left before CFGOPT_MEMORY_DEADLINE
MAX_SAMPLES = 800

# Real config.json values of each model on the Hugging Face Hub (the fields that change shapes).
FAMILIES: dict[str, dict[str, Any]] = {
    "qwen3-4b": {
        "hub": "Qwen/Qwen3-4B",
        "config": dict(
            model_type="qwen3",
            hidden_size=2560,
            intermediate_size=9728,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
            tie_word_embeddings=True,
            rope_theta=1000000.0,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
        ),
    },
    "qwen3-1.7b": {
        "hub": "Qwen/Qwen3-1.7B",
        "config": dict(
            model_type="qwen3",
            hidden_size=2048,
            intermediate_size=6144,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
            tie_word_embeddings=True,
            rope_theta=1000000.0,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
        ),
    },
    "qwen2.5-1.5b": {
        "hub": "Qwen/Qwen2.5-1.5B",
        "config": dict(
            model_type="qwen2",
            hidden_size=1536,
            intermediate_size=8960,
            num_hidden_layers=28,
            num_attention_heads=12,
            num_key_value_heads=2,
            vocab_size=151936,
            tie_word_embeddings=True,
            rope_theta=1000000.0,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
        ),
    },
    "llama-3.2-1b": {
        "hub": "meta-llama/Llama-3.2-1B",
        "config": dict(
            model_type="llama",
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            vocab_size=128256,
            tie_word_embeddings=True,
            rope_theta=500000.0,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
        ),
    },
    "gemma-2-2b": {
        "hub": "google/gemma-2-2b",
        "config": dict(
            model_type="gemma2",
            hidden_size=2304,
            intermediate_size=9216,
            num_hidden_layers=26,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
            vocab_size=256000,
            tie_word_embeddings=True,
            final_logit_softcapping=30.0,
            attn_logit_softcapping=50.0,
            query_pre_attn_scalar=256,
            sliding_window=4096,
            hidden_activation="gelu_pytorch_tanh",
            max_position_embeddings=8192,
            rms_norm_eps=1e-6,
        ),
    },
    "mistral-7b": {
        "hub": "mistralai/Mistral-7B-v0.3",
        "config": dict(
            model_type="mistral",
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=32768,
            tie_word_embeddings=False,
            rope_theta=1000000.0,
            max_position_embeddings=32768,
            sliding_window=None,
            rms_norm_eps=1e-5,
        ),
    },
}
COMMON_IDS = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1}


def V(name: str, **args: Any) -> dict[str, Any]:
    """A variant: LLaMA-Factory keys that differ from BASE, plus `ds` ("z2"/"z3") and `big`."""
    return {"name": name, **args}


# What every variant shares (LLaMA-Factory keys); the variant's keys override.
BASE: dict[str, Any] = {
    "stage": "sft",
    "finetuning_type": "lora",
    "lora_target": "all",
    "cutoff_len": 2048,
    "packing": True,
    "flash_attn": "sdpa",
    "bf16": True,
    "learning_rate": 1.0e-5,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 1,
}
GC_OFF = {"disable_gradient_checkpointing": True}
LIGER = {"enable_liger_kernel": True}
FULL = {"finetuning_type": "full"}
UNPACKED = {"packing": False}


# Small/medium models: every switch, peaks kept under ~30 GiB so three lanes share the GPU.
def _grid_small(big_batch: int) -> list[dict[str, Any]]:
    b = big_batch
    return [
        V("lora_gc", per_device_train_batch_size=b),
        V("lora_gc_liger", per_device_train_batch_size=b, **LIGER),
        V("lora_nogc", per_device_train_batch_size=1, **GC_OFF),
        V("lora_nogc_liger", per_device_train_batch_size=2, **GC_OFF, **LIGER),
        V("lora_gc_eager", per_device_train_batch_size=2, flash_attn="disabled"),
        V("lora_qv_nogc", per_device_train_batch_size=1, lora_target="q_proj,v_proj", **GC_OFF),
        V("lora_gc_unpacked", per_device_train_batch_size=8, **UNPACKED),
        V("full_gc", per_device_train_batch_size=2, **FULL),
        V("full_nogc_liger", per_device_train_batch_size=1, **FULL, **GC_OFF, **LIGER),
        V("full_z2_gc", per_device_train_batch_size=2, ds="z2", **FULL),
        V("full_z3_gc", per_device_train_batch_size=2, ds="z3", **FULL),
        V("full_z3_nogc_liger", per_device_train_batch_size=1, ds="z3", **FULL, **GC_OFF, **LIGER),
    ]


PLAN: dict[str, list[dict[str, Any]]] = {
    # The points (LLaMA-Factory's examples/train_lora/qwen3_lora_sft.yaml after `cfgopt fix`: LoRA on
    # all linears, packing, cutoff 2048; and examples/train_full/qwen3_full_sft.yaml: full, ZeRO-3, 1 x 2).
    "qwen3-4b": [
        V("lora_gc_liger_8x1", per_device_train_batch_size=8, **LIGER),
        V("lora_gc_8x1", per_device_train_batch_size=8),
        V("lora_nogc_liger_4x2", per_device_train_batch_size=4, gradient_accumulation_steps=2, **GC_OFF, **LIGER),
        V("lora_nogc_4x2", per_device_train_batch_size=4, gradient_accumulation_steps=2, **GC_OFF, big=True),
        V("lora_nogc_liger_8x1", per_device_train_batch_size=8, **GC_OFF, **LIGER, big=True),
        V(
            "lora_nogc_eager_liger_2x4",
            per_device_train_batch_size=2,
            gradient_accumulation_steps=4,
            flash_attn="disabled",
            **GC_OFF,
            **LIGER,
            big=True,
        ),
        V("lora_qv_nogc_2x1", per_device_train_batch_size=2, lora_target="q_proj,v_proj", **GC_OFF),
        V("lora_gc_unpacked_8x1", per_device_train_batch_size=8, **UNPACKED),
        V(
            "full_z3_gc_unpacked_1x2",
            per_device_train_batch_size=1,
            gradient_accumulation_steps=2,
            ds="z3",
            **FULL,
            **UNPACKED,
            big=True,
        ),
        V("full_z3_gc_4x1", per_device_train_batch_size=4, ds="z3", **FULL, big=True),
        V("full_z2_gc_2x1", per_device_train_batch_size=2, ds="z2", **FULL, big=True),
        # Gradient accumulation with ZeRO-2 (does the engine hold more between micro-batches? docs/memory.md)
        V("full_z2_gc_1x2", per_device_train_batch_size=1, gradient_accumulation_steps=2, ds="z2", **FULL, big=True),
        V(
            "full_z2_nogc_liger_1x2",
            per_device_train_batch_size=1,
            gradient_accumulation_steps=2,
            ds="z2",
            **FULL,
            **GC_OFF,
            **LIGER,
            big=True,
        ),
        V("lora_z2_gc_liger_8x1", per_device_train_batch_size=8, ds="z2", **LIGER),
        V("lora_z3_nogc_liger_4x1", per_device_train_batch_size=4, ds="z3", **GC_OFF, **LIGER, big=True),
    ],
    "llama-3.2-1b": _grid_small(8),
    "qwen2.5-1.5b": _grid_small(8),
    "qwen3-1.7b": [
        v
        for v in _grid_small(4)
        if v["name"]
        in ("lora_gc", "lora_nogc", "lora_nogc_liger", "lora_gc_eager", "full_gc", "full_z2_gc", "full_z3_nogc_liger")
    ],
    "gemma-2-2b": [
        V("lora_gc", per_device_train_batch_size=2),
        V("lora_gc_liger", per_device_train_batch_size=4, **LIGER),
        V("lora_nogc", per_device_train_batch_size=1, **GC_OFF),
        V("lora_nogc_liger", per_device_train_batch_size=1, **GC_OFF, **LIGER),
        V("lora_gc_auto_eager", per_device_train_batch_size=2, flash_attn="auto"),
        V("lora_gc_unpacked", per_device_train_batch_size=8, **UNPACKED),
        V("full_gc_liger", per_device_train_batch_size=1, **FULL, **LIGER),
        V("full_z3_gc", per_device_train_batch_size=1, ds="z3", **FULL),
        V("full_z2_gc_liger", per_device_train_batch_size=1, ds="z2", **FULL, **LIGER),
    ],
    "mistral-7b": [
        V("lora_gc", per_device_train_batch_size=2),
        V("lora_gc_liger", per_device_train_batch_size=4, **LIGER),
        V("lora_nogc_liger", per_device_train_batch_size=1, **GC_OFF, **LIGER),
        V("lora_qv_nogc", per_device_train_batch_size=1, lora_target="q_proj,v_proj", **GC_OFF),
        V("lora_z3_gc", per_device_train_batch_size=2, ds="z3"),
    ],
}
# Lanes run concurrently; families within a lane one after another. Lane "a" holds the big variants.
LANES = {"a": ["qwen3-4b", "mistral-7b"], "b": ["llama-3.2-1b", "gemma-2-2b"], "c": ["qwen2.5-1.5b", "qwen3-1.7b"]}
SLOWEST_FAMILY_S = {"qwen3-4b": 330}  # a lane's first family may not take the whole budget

# The memory-for-speed knobs (issue 23; bench/memory/device_call_knobs.sh): pure bf16, 8-bit, paged and factored
# optimizers, freeze, DPO (LoRA: the reference is the policy with its adapters off; full: a second frozen model)
# and ZeRO offload. In the order they are worth measuring: a deadline drops the tail. Full runs of Mistral-7B keep
# to a micro-batch of 1, its full DPO to pure bf16 (fp32 policy + Adam + a bf16 reference would not fit).
PAIRS = {"stage": "dpo", "dataset": "synthetic_pairs", "packing": False}
BNB = ("adamw_bnb_8bit", "paged_adamw_8bit")  # the optimizers bitsandbytes provides


def _knobs(full_batch: int, full_dpo: dict[str, Any]) -> list[dict[str, Any]]:
    b = full_batch
    return [
        V("full_pure_bf16_gc", per_device_train_batch_size=b, pure_bf16=True, **FULL),
        V("full_adamw_bnb_8bit_gc", per_device_train_batch_size=b, optim="adamw_bnb_8bit", **FULL),
        V("full_pure_bf16_nogc", per_device_train_batch_size=1, pure_bf16=True, **FULL, **GC_OFF),
        V("full_paged_adamw_8bit_gc", per_device_train_batch_size=b, optim="paged_adamw_8bit", **FULL),
        V("full_adafactor_gc", per_device_train_batch_size=b, optim="adafactor", **FULL),
        V("dpo_lora_gc", per_device_train_batch_size=2, **PAIRS),
        V("dpo_full_gc", per_device_train_batch_size=1, **PAIRS, **FULL, **full_dpo),
        V("freeze_last2_gc", per_device_train_batch_size=2, finetuning_type="freeze", freeze_trainable_layers=2),
        V("freeze_first2_gc", per_device_train_batch_size=2, finetuning_type="freeze", freeze_trainable_layers=-2),
    ]


# ZeRO offload keeps the fp32 master weights, Adam's two moments and the fp32 gradients on the host: 16 bytes a
# parameter, 116 GiB for Mistral-7B, more than the H200 machine's 128 GiB of RAM with everything else, so the
# offload runs use the two small families (one process each: DeepSpeed does not initialise twice in one).
OFFLOAD = [
    V("full_z2_offload_gc", per_device_train_batch_size=2, ds="z2_offload", **FULL),
    V("full_z3_offload_gc", per_device_train_batch_size=2, ds="z3_offload", **FULL),
]
KNOBS_PLAN: dict[str, list[dict[str, Any]]] = {
    "qwen3-1.7b": _knobs(2, {}) + OFFLOAD,
    "mistral-7b": _knobs(1, {"pure_bf16": True}),
    "llama-3.2-1b": list(OFFLOAD),
}
PLANS = {"calib": PLAN, "knobs": KNOBS_PLAN}


TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=33000,
)


# ---------------------------------------------------------------------------------------------------------
# In the family process


class _Batch:
    """The largest micro-batch of the run (input_ids shape), counted in Trainer.training_step."""

    max_tokens = 0
    max_shape: list[int] = []  # noqa: RUF012 - one process, one run at a time
    micro_batches = 0


def _patch_trainer() -> None:
    import transformers

    if getattr(transformers.Trainer, "_cfgopt_patched", False):
        return
    original = transformers.Trainer.training_step

    def training_step(self, model, inputs, *args, **kwargs):
        ids = inputs.get("input_ids")
        if ids is not None:
            _Batch.micro_batches += 1
            if ids.numel() > _Batch.max_tokens:
                _Batch.max_tokens, _Batch.max_shape = int(ids.numel()), list(ids.shape)
        return original(self, model, inputs, *args, **kwargs)

    transformers.Trainer.training_step = training_step
    transformers.Trainer.save_model = lambda self, *a, **k: None
    transformers.Trainer._save_checkpoint = lambda self, *a, **k: None
    transformers.Trainer.save_state = lambda self, *a, **k: None
    transformers.Trainer._cfgopt_patched = True


def _callback(record: dict[str, Any]):
    import torch
    from transformers import TrainerCallback

    cuda = torch.cuda.is_available()

    class Peak(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if cuda:
                torch.cuda.synchronize()
                record["allocated_at_begin_gib"] = torch.cuda.memory_allocated() / GIB
                torch.cuda.reset_peak_memory_stats()
            record["train_begin_s"] = time.perf_counter() - record["_start"]
            if model is not None:
                record["parameters"] = sum(p.numel() for p in model.parameters())
                record["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
                record["trainable_dtypes"] = sorted({str(p.dtype) for p in model.parameters() if p.requires_grad})
                config = getattr(model, "config", None)
                record["attn_implementation"] = getattr(config, "_attn_implementation", None)
                names = {type(m).__name__ for m in model.modules()}
                record["module_classes"] = sorted(n for n in names if "Norm" in n or "MLP" in n or "Liger" in n)
                record["gradient_checkpointing"] = bool(getattr(model, "is_gradient_checkpointing", False))

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
                record.setdefault("step_peaks_gib", []).append(torch.cuda.max_memory_allocated() / GIB)

        def on_train_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
                record["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
                record["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / GIB

    return Peak()


def _snapshot_modeling(model_type: str) -> tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]:
    """Liger patches transformers' modeling module in place (classes, functions, forward methods)."""
    import importlib

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    globals_ = dict(vars(module))
    classes = {
        n: dict(c.__dict__)
        for n, c in globals_.items()
        if isinstance(c, type) and getattr(c, "__module__", "") == module.__name__
    }
    return module, globals_, classes


def _restore_modeling(snapshot: tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]) -> None:
    module, globals_, classes = snapshot
    for key in [k for k in vars(module) if k not in globals_]:
        delattr(module, key)
    for key, value in globals_.items():
        if vars(module).get(key) is not value:
            setattr(module, key, value)
    for name, saved in classes.items():
        cls = globals_[name]
        for attr in [a for a in list(cls.__dict__) if a not in saved]:
            with contextlib.suppress(AttributeError, TypeError):
                delattr(cls, attr)
        for attr, value in saved.items():
            if attr in ("__dict__", "__weakref__") or cls.__dict__.get(attr) is value:
                continue
            with contextlib.suppress(AttributeError, TypeError):
                setattr(cls, attr, value)


def _reset_between_runs() -> None:
    import torch

    try:
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()
    except ImportError:
        pass
    try:
        from accelerate.state import AcceleratorState, PartialState

        AcceleratorState._reset_state(True)
        PartialState._reset_state()
    except (ImportError, AttributeError):
        pass
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _build_assets(family: str, work: Path, tiny: bool, assets: Path | None) -> tuple[Path, Path, dict[str, Any]]:
    from cfgopt.verify import synthetic

    config = dict(FAMILIES[family]["config"], **COMMON_IDS)
    if tiny:
        config.update(TINY)
    device = "cuda" if not tiny else "cpu"
    model_dir, data_dir = work / f"model-{family}", work / "data"
    if not model_dir.exists():
        start = time.perf_counter()
        prebuilt = assets / "tokenizer" if assets else None
        if prebuilt and prebuilt.is_dir():
            shutil.copytree(prebuilt, model_dir)
        else:
            synthetic.build_tokenizer(model_dir)
        # fp32 on the CPU: without bf16 autocast a frozen bf16 layer cannot feed an upcast fp32 one (freeze runs)
        count = synthetic.build_model(model_dir, config, device, "float32" if tiny else "bfloat16")
        print(f"[{family}] built {count:,} parameters in {time.perf_counter() - start:.1f}s", flush=True)
    if not data_dir.exists() and assets and (assets / "data").is_dir():
        data_dir = assets / "data"
    if not data_dir.exists():
        tmp = work / f"data.{os.getpid()}"
        synthetic.build_dataset(tmp, rows=4000)
        _add_pairs(tmp)
        with contextlib.suppress(OSError):
            os.replace(tmp, data_dir)
    if not (data_dir / "synthetic_pairs.json").exists():  # prebuilt assets from before the DPO runs
        _add_pairs(data_dir)
    return model_dir, data_dir, config


def _add_pairs(data_dir: Path) -> None:
    """A pairwise (DPO) dataset from the Alpaca rows: each row's output is chosen, the next row's rejected, so
    the pair's lengths follow the same distribution. Written beside synthetic_alpaca in dataset_info.json."""
    rows = json.loads((data_dir / "synthetic_alpaca.json").read_text())
    following = rows[1:] + rows[:1]
    pairs = [
        {**row, "chosen": row["output"], "rejected": other["output"]}
        for row, other in zip(rows, following, strict=True)
    ]
    for row in pairs:
        del row["output"]
    info = json.loads((data_dir / "dataset_info.json").read_text())
    info["synthetic_pairs"] = {
        "file_name": "synthetic_pairs.json",
        "ranking": True,
        "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"},
    }
    for name, text in (("synthetic_pairs.json", json.dumps(pairs)), ("dataset_info.json", json.dumps(info))):
        tmp = data_dir / f"{name}.{os.getpid()}"  # two lanes may write it at once: each replaces it whole
        tmp.write_text(text)
        os.replace(tmp, data_dir / name)


def _args(variant: dict[str, Any], model_dir: Path, data_dir: Path, out: Path, tiny: bool) -> dict[str, Any]:
    from cfgopt.verify.runner import HARMLESS

    args = dict(BASE)
    args.update({k: v for k, v in variant.items() if k not in ("name", "ds", "big", "dataset")})
    args.update(HARMLESS)
    args.update(
        model_name_or_path=str(model_dir),
        dataset=variant.get("dataset", "synthetic_alpaca"),
        dataset_dir=str(data_dir),
        template="llama3",
        max_samples=MAX_SAMPLES,
        max_steps=STEPS,
        output_dir=str(out / "trainer-output"),
        dataloader_num_workers=0,
        seed=42,
    )
    if variant.get("ds"):
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"ds_{variant['ds']}.json"
        path.write_text(json.dumps(_ds(variant["ds"])))
        args["deepspeed"] = str(path)
    if tiny:
        args.update(cutoff_len=128, bf16=False)
        if args.get("pure_bf16"):  # LLaMA-Factory refuses pure_bf16 without a bf16 GPU
            args["pure_bf16"] = False
    return args


def _ds(zero: str) -> dict[str, Any]:
    """LLaMA-Factory's example DeepSpeed JSON. With optimizer offload accelerate swaps the Trainer's AdamW for
    DeepSpeedCPUAdam, a C++ op built at first use; where it cannot be built (CFGOPT_MEMORY_DS_TORCH_OPTIM=1,
    set by device_call_knobs.sh), the Trainer's own AdamW steps on the host instead; either way the optimizer
    states stay on the host."""
    from cfgopt.plan.space import deepspeed_template

    ds = deepspeed_template(zero)
    if zero.endswith("_offload") and os.environ.get("CFGOPT_MEMORY_DS_TORCH_OPTIM"):
        ds["zero_force_ds_cpu_optimizer"] = False
    return ds


def _skip_reason(variant: dict[str, Any], tiny: bool, deadline: float | None) -> str | None:
    """Why a variant is not run here: DeepSpeed and Liger need a GPU, bitsandbytes may be missing, and a
    variant that cannot finish before the deadline is skipped (MIN_VARIANT_S: a full run's start and 2 steps)."""
    import importlib.util

    if tiny and (variant.get("ds") or variant.get("enable_liger_kernel")):
        return "needs a GPU"
    if variant.get("optim") in BNB and importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed"
    if deadline is not None and time.time() + MIN_VARIANT_S > deadline:
        return "deadline"
    return None


def _wait_for_file(path: Path, limit_s: float) -> None:
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s and not path.exists():
        time.sleep(1)


def run_family(
    family: str,
    out: Path,
    work: Path,
    tiny: bool,
    lane: str | None,
    wait_max: float = 0,
    assets: Path | None = None,
    plan: str = "calib",
) -> None:
    """CFGOPT_MEMORY_DEADLINE (seconds since the epoch): variants that cannot finish by then are skipped."""
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    from cfgopt.verify.worker import _torchaudio_placeholder

    deadline = float(os.environ["CFGOPT_MEMORY_DEADLINE"]) if os.environ.get("CFGOPT_MEMORY_DEADLINE") else None

    _torchaudio_placeholder()
    model_dir, data_dir, config = _build_assets(family, work, tiny, assets)
    _patch_trainer()
    from llamafactory.train.tuner import run_exp

    variants = PLANS[plan][family]
    if os.environ.get("CFGOPT_MEMORY_DS_ONLY"):  # the second device call: the DeepSpeed variants only
        variants = [v for v in variants if v.get("ds")]
    if os.environ.get("CFGOPT_MEMORY_NO_DS"):  # the DeepSpeed ones follow, one process each
        variants = [v for v in variants if not v.get("ds")]
    if os.environ.get("CFGOPT_MEMORY_VARIANT"):  # one variant per process (DeepSpeed cannot run twice in one)
        variants = [v for v in variants if v["name"] == os.environ["CFGOPT_MEMORY_VARIANT"]]
    # DeepSpeed last (its torchrun environment cannot be undone); within each, the big ones first, while the
    # other lanes are still building their models.
    variants = sorted(variants, key=lambda v: (bool(v.get("ds")), not v.get("big")))
    results = out / f"{family}.jsonl"
    # Lanes b and c start their variants once lane a's big non-DeepSpeed ones are done (or after wait_max).
    wait_for = out / "a-big.done" if lane and lane != "a" and wait_max > 0 else None
    for variant in variants:
        skip = _skip_reason(variant, tiny, deadline)
        if skip:
            print(f"[{family}] {variant['name']}: skipped ({skip})", flush=True)
            continue
        if lane == "a" and not variant.get("big"):
            (out / "a-big.done").touch()
        if wait_for and not variant.get("big"):
            _wait_for_file(wait_for, wait_max)
            wait_for = None
        if variant.get("ds"):
            # What `torchrun --nproc_per_node 1` sets; LLaMA-Factory needs a distributed launch for DeepSpeed.
            # A fresh port per run: LLaMA-Factory destroys the process group at the end of each run.
            port = 20000 + (os.getpid() * 31 + len(variant["name"]) * 977 + int(time.time())) % 20000
            os.environ.update(
                RANK="0",
                LOCAL_RANK="0",
                WORLD_SIZE="1",
                LOCAL_WORLD_SIZE="1",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
            )
        args = _args(variant, model_dir, data_dir, work / f"{family}-{variant['name']}", tiny)
        record: dict[str, Any] = {
            "family": family,
            "hub": FAMILIES[family]["hub"],
            "variant": variant["name"],
            "plan": plan,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "model_config": config,
            "args": args,
            "ds": _ds(variant["ds"]) if variant.get("ds") else None,
            "_start": time.perf_counter(),
        }
        _Batch.max_tokens, _Batch.max_shape, _Batch.micro_batches = 0, [], 0
        snapshot = _snapshot_modeling(config["model_type"])
        try:
            run_exp(dict(args), callbacks=[_callback(record)])
        except BaseException as exc:  # noqa: BLE001 - one variant's failure must not stop the others
            record["error"] = f"{type(exc).__name__}: {exc}"[:1500]
            record["traceback"] = traceback.format_exc()[-3000:]
        finally:
            _restore_modeling(snapshot)
            record.update(
                max_tokens=_Batch.max_tokens,
                max_shape=_Batch.max_shape,
                micro_batches=_Batch.micro_batches,
                wall_s=time.perf_counter() - record.pop("_start"),
            )
            with results.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            _reset_between_runs()
        print(
            f"[{family}] {variant['name']}: peak {record.get('peak_allocated_gib', float('nan')):.2f} GiB, "
            f"tokens {record['max_tokens']} {record['max_shape']}, {record['wall_s']:.1f}s"
            + (f" ERROR {record['error'][:300]}" if record.get("error") else ""),
            flush=True,
        )


# ---------------------------------------------------------------------------------------------------------
# The lanes


def run_lanes(out: Path, work: Path, tiny: bool, only: list[str] | None, budget_s: int, extra: str) -> int:
    """Each lane a bash loop; each family gets what is left of the budget (a lane's first family at most
    SLOWEST_FAMILY_S), so the whole command ends in time and every variant done so far is kept."""
    deadline = int(time.time()) + budget_s
    procs = []
    for lane, families in LANES.items():
        families = [f for f in families if not only or f in only]
        steps = []
        for f in families:
            cap = SLOWEST_FAMILY_S.get(f, budget_s)
            steps.append(
                f"left=$(( {deadline} - $(date +%s) )); [ $left -gt {cap} ] && left={cap}; "
                f"[ $left -gt 20 ] && timeout $left {sys.executable} {Path(__file__).resolve()} family {f} "
                f"--out {out} --work {work} --lane {lane}{' --tiny' if tiny else ''} {extra} > {out}/{f}.log 2>&1; "
                f"echo \"[lane {lane}] {f} exit $?\"; grep '^\\[{f}\\]' {out}/{f}.log"
            )
        script = " ; ".join(steps or ["true"]) + f" ; touch {out}/lane-{lane}.done"
        procs.append(subprocess.Popen(["bash", "-c", script]))
    return max(p.wait() for p in procs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("lanes", "family"))
    ap.add_argument("family", nargs="?")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/cfgopt-memory-work"))
    ap.add_argument("--assets", type=Path, help="prebuilt tokenizer/ and data/ (from `prepare`)")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--lane")
    ap.add_argument("--plan", choices=sorted(PLANS), default="calib", help="calib: 2026-12-03's runs; knobs: issue 23")
    ap.add_argument("--only", help="comma-separated families")
    ap.add_argument("--budget", type=int, default=480, help="seconds for all lanes")
    ap.add_argument("--wait-max", type=float, default=90, help="lanes b, c: longest wait for lane a's big runs")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.mode == "family":
        run_family(args.family, args.out, args.work, args.tiny, args.lane, args.wait_max, args.assets, args.plan)
        return 0
    only = args.only.split(",") if args.only else None
    extra = f"--wait-max {args.wait_max}" + (f" --assets {args.assets.resolve()}" if args.assets else "")
    return run_lanes(args.out, args.work, args.tiny, only, args.budget, extra)


if __name__ == "__main__":
    sys.exit(main())
