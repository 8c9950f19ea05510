#!/usr/bin/env python3
"""XF004: does a DeepSpeed JSON without `gradient_accumulation_steps` make every micro-batch an optimizer step?

The HF Trainer (what LLaMA-Factory trains with) runs a 2-layer random-init Llama under DeepSpeed ZeRO-2 with
`gradient_accumulation_steps: 4` in the training arguments, twice, same seed and data:
  missing : the DeepSpeed JSON has no `gradient_accumulation_steps` (accelerate writes 1 into it)
  auto    : the DeepSpeed JSON says "auto" (the Trainer fills 4)
  missing_with_batch : as `missing`, plus `"train_batch_size": "auto"` (the Trainer fills 2 x 4 x GPUs)
  batch_only : `"train_batch_size": "auto"` and neither `train_micro_batch_size_per_gpu` nor accumulation
               (DeepSpeed derives its micro batch from the other two: runtime/config.py `_set_batch_related_parameters`)
and records the Trainer's `state.global_step`, the DeepSpeed engine's `global_steps`, `global_samples`,
`micro_steps` and `gradient_accumulation_steps()`, the optimizer steps counted by a hook, the logged losses
and a checksum of the trained weights. If the claim held, `missing` would take 4x the optimizer steps.

Usage (one GPU): torchrun --nproc_per_node 1 bench/xf004/run_xf004.py VARIANT OUT.json
"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch.utils.data import Dataset

MICRO_BATCH, ACCUMULATION, MAX_STEPS, SEQ, VOCAB = 2, 4, 3, 32, 256


class RandomTokens(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(1234)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i].clone()}


def ds_config(variant: str, bf16: bool) -> dict:
    cfg = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_clipping": "auto",
        "zero_optimization": {"stage": 2, "overlap_comm": False, "contiguous_gradients": True},
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
    }
    if variant == "auto":
        cfg["gradient_accumulation_steps"] = "auto"
    elif variant == "missing_with_batch":  # `train_batch_size` present, accumulation missing
        cfg["train_batch_size"] = "auto"
    elif variant == "batch_only":  # no micro batch key for accelerate to fill: DeepSpeed derives it
        del cfg["train_micro_batch_size_per_gpu"]
        cfg["train_batch_size"] = "auto"
    elif variant != "missing":
        raise SystemExit(f"unknown variant {variant!r}")
    if not bf16:
        del cfg["bf16"]
    return cfg


def measurements(variant: str, ds: dict, trainer, optimizer_steps: list[int], losses: list[float]) -> dict:
    """What the run did: the Trainer's and the DeepSpeed engine's step counters, losses, a weight checksum."""
    engine = trainer.model_wrapped
    gpu = torch.cuda.is_available()
    weights = sum(float(p.detach().float().abs().sum()) for p in engine.module.parameters())
    return {
        "variant": variant,
        "ds_config_given": ds,
        "ds_config_used": {k: engine.config.get(k) for k in ("gradient_accumulation_steps", "train_batch_size")},
        "trainer_global_step": trainer.state.global_step,
        "trainer_optimizer_step_callbacks": len(optimizer_steps),
        "engine_global_steps": engine.global_steps,
        "engine_global_samples": engine.global_samples,
        "engine_micro_steps": engine.micro_steps,
        "engine_gradient_accumulation_steps": engine.gradient_accumulation_steps(),
        "engine_train_micro_batch_size_per_gpu": engine.train_micro_batch_size_per_gpu(),
        "engine_train_batch_size": engine.train_batch_size(),
        "accelerator_gradient_accumulation_steps": trainer.accelerator.gradient_accumulation_steps,
        "micro_batches_fed": ACCUMULATION * MAX_STEPS,
        "losses": losses,
        "weights_abs_sum": weights,
        "device": torch.cuda.get_device_name(0) if gpu else "cpu",
        "versions": {m: __import__(m).__version__ for m in ("torch", "transformers", "accelerate", "deepspeed")},
    }


def main(variant: str, out_path: str) -> int:
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments, set_seed

    set_seed(0)
    gpu = torch.cuda.is_available()
    if not gpu:  # CPU dry run only: skip JIT-building DeepSpeed's shared-memory collective (minutes of C++)
        import importlib

        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=SEQ,
    )
    model = LlamaForCausalLM(config)
    ds = ds_config(variant, bf16=gpu)
    args = TrainingArguments(
        output_dir=f"/tmp/xf004-{variant}",
        per_device_train_batch_size=MICRO_BATCH,
        gradient_accumulation_steps=ACCUMULATION,
        max_steps=MAX_STEPS,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        bf16=gpu,
        seed=0,
        deepspeed=ds,
        use_cpu=not gpu,
    )
    optimizer_steps: list[int] = []
    losses: list[float] = []

    class Record(TrainerCallback):
        def on_optimizer_step(self, args, state, control, **kwargs):
            optimizer_steps.append(state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    data = RandomTokens(MICRO_BATCH * ACCUMULATION * MAX_STEPS * 2)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[Record()])
    try:
        trainer.train()
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        result = {"variant": variant, "ds_config_given": ds, "failed": f"{type(exc).__name__}: {exc}"[:600]}
        with open(out_path, "w") as fh:
            json.dump(result, fh, indent=1)
        print(json.dumps(result))
        return 1
    result = measurements(variant, ds, trainer, optimizer_steps, losses)
    if int(os.environ.get("RANK", "0")) == 0:
        with open(out_path, "w") as fh:
            json.dump(result, fh, indent=1)
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
