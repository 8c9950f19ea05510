"""The child process of `cfgopt verify`: `python -m cfgopt.verify.worker prepare|train SPEC.json`.

`prepare` builds the offline assets (tokenizer, random-init weights, dataset). `train` runs LLaMA-Factory's
own entry point, `llamafactory.train.tuner.run_exp(args, callbacks=[...])`, with a callback that measures
each optimizer step, and writes the measurements to SPEC["metrics_path"]. It never saves a checkpoint: the
trainer's save methods are replaced with no-ops (the run is a measurement, not a training job).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from cfgopt.knowledge.targets import target_for_device  # a table only: the worker stays import-light
from cfgopt.text.writer import write_new  # likewise
from cfgopt.verify import flops, synthetic_meta  # likewise
from cfgopt.verify.tokens import count_batch, step_capacity  # tensor methods only

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _write(path: str, data: dict[str, Any]) -> None:
    # a fresh temp name per write (two ranks writing the same fixed `.tmp` name would mix their JSON)
    write_new(Path(path), json.dumps(data, indent=1).encode("utf-8"))


def prepare(spec: dict[str, Any]) -> None:
    """Build what the runs need into the given folders (atomically: a half-built folder is never used)."""
    from cfgopt.verify import synthetic

    device = "cuda" if _cuda() else "cpu"
    out: dict[str, Any] = {}
    if spec.get("model_dir"):
        start = time.perf_counter()

        def build_model(folder: Path) -> int:
            synthetic.build_tokenizer(folder)
            dtype = "bfloat16" if device == "cuda" else "float32"
            return synthetic.build_model(folder, spec["model_config"], device, dtype)

        out["parameters"] = synthetic.build_into(Path(spec["model_dir"]), build_model)
        out["model_build_s"] = time.perf_counter() - start
    if spec.get("dataset_dir"):
        rows = spec.get("rows", 4000)
        kind = synthetic_meta.kind_named(spec.get("dataset", synthetic_meta.ALPACA.dataset))
        synthetic.build_into(
            Path(spec["dataset_dir"]), lambda folder: synthetic.build_dataset(folder, rows=rows, kind=kind)
        )
    _write(spec["metrics_path"], out)


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


class _Counter:
    sequences = 0  # rows of input_ids: two a sample in the pairwise stages (chosen, rejected), one elsewhere
    real = 0
    padded = 0
    supervised = 0


def _patch_trainer() -> None:
    import transformers

    original = transformers.Trainer.training_step

    def training_step(self, model, inputs, *args, **kwargs):
        # from the batch's structure (cfgopt.verify.tokens): a neat-packed batch's mask is 4D under SDPA
        counted = count_batch(inputs)
        _Counter.padded += counted.padded
        _Counter.sequences += counted.sequences
        _Counter.real += counted.real
        _Counter.supervised += counted.supervised
        return original(self, model, inputs, *args, **kwargs)

    transformers.Trainer.training_step = training_step
    # A verification run is a measurement: never write checkpoints or the final model.
    transformers.Trainer.save_model = lambda self, *a, **k: None
    transformers.Trainer._save_checkpoint = lambda self, *a, **k: None
    transformers.Trainer.save_state = lambda self, *a, **k: None


def _skip_value_head_rewrite() -> None:
    """stage: rm. After training, LLaMA-Factory's `run_rm` splits the saved checkpoint into the model and its value
    head (`train.callbacks.fix_valuehead_checkpoint` reads `output_dir/model.safetensors`); a verification run
    saves nothing (`_patch_trainer`), so there is nothing to split, and reading it would fail after the
    measured steps."""
    from llamafactory.train.rm import workflow

    workflow.fix_valuehead_checkpoint = lambda *args, **kwargs: None


def value_head_dropout_off(model: Any) -> bool:
    """Replace the dropout of trl's value head (`ValueHead`, p=0.1 unless the model's config sets
    `summary_dropout_prob`) by the identity; True when there was one. Every run of a comparison then computes
    the same loss from the same weights and samples however its batches are split: dropout masks drawn from
    the random stream would differ between a run with 2 micro-batches and one with 4. (The DPO and KTO
    trainers already turn dropout off: LLaMA-Factory's `CustomDPOTrainer` / `CustomKTOTrainer` take
    `disable_dropout=True`.)"""
    import torch

    found = False
    for module in model.modules():
        if type(module).__name__ == "ValueHead" and isinstance(getattr(module, "dropout", None), torch.nn.Dropout):
            module.dropout = torch.nn.Identity()
            found = True
    return found


def capacity_per_step(config: dict[str, Any], training_args: Any) -> int:
    """The most tokens one step of this process can hold (micro-batch x accumulation x rows x cutoff): a count
    above it is a counting bug, which the summary refuses (comparison.impossible)."""
    rows = 2 if synthetic_meta.stage_of(config) in ("dpo", "rm") else 1  # chosen and rejected rows
    return step_capacity(
        int(training_args.per_device_train_batch_size),
        int(training_args.gradient_accumulation_steps),
        rows,
        int(config.get("cutoff_len") or 2048),  # LLaMA-Factory's default (hparams/data_args.py)
    )


def parameter_counts(model: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The model's parameters, those it trains, and (a mixture of experts) those a token passes through, for the
    MFU (`flops.token_parameters`, from the model's own config)."""
    # ZeRO-3 partitions parameters (numel() is 0 on every rank); `ds_numel` keeps the full size
    total = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
    trainable = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
    counts: dict[str, Any] = {"parameters": total, "trainable_parameters": trainable}
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_dict"):
        counts.update(flops.token_parameters(config.to_dict(), args, total, trainable))
    return counts


def _make_callback(spec: dict[str, Any]):
    import torch
    from transformers import TrainerCallback

    metrics: dict[str, Any] = {"steps": [], "losses": [], "error": None}
    cuda = torch.cuda.is_available()

    class MetricsCallback(TrainerCallback):
        def _sync(self) -> None:
            if cuda:
                torch.cuda.synchronize()

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self._sync()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                metrics["device"] = torch.cuda.get_device_name()
                metrics["platform"] = (
                    "ROCm/HIP " + str(torch.version.hip) if torch.version.hip else ("CUDA " + str(torch.version.cuda))
                )
                target = target_for_device(metrics["device"])  # dense bf16 peak, for the MFU
                metrics["peak_tflops"] = target.peak_bf16_tflops if target else None
            else:
                metrics["device"], metrics["platform"], metrics["peak_tflops"] = "cpu", "CPU", None
            if model is not None:
                if value_head_dropout_off(model):
                    metrics.setdefault("notes", []).append("value head dropout off (same loss for any batch split)")
                config = getattr(model, "config", None)
                metrics["attn_implementation"] = getattr(config, "_attn_implementation", None)
                metrics.update(parameter_counts(model, spec["args"]))
            metrics["capacity_tokens_per_step"] = capacity_per_step(spec["args"], args)
            metrics["train_begin_s"] = time.perf_counter() - START
            self.last = time.perf_counter()
            _Counter.real = _Counter.padded = _Counter.supervised = _Counter.sequences = 0

        def on_step_end(self, args, state, control, **kwargs):
            self._sync()
            now = time.perf_counter()
            step = {
                "step": state.global_step,
                "seconds": now - self.last,
                "sequences": _Counter.sequences,
                "real_tokens": _Counter.real,
                "padded_tokens": _Counter.padded,
                "supervised_tokens": _Counter.supervised,
            }
            if cuda:
                step["allocated_gib"] = torch.cuda.memory_allocated() / 2**30
                step["max_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
            metrics["steps"].append(step)
            print(
                f"cfgopt-verify step {state.global_step}/{state.max_steps} {step['seconds']:.3f}s "
                f"{step['real_tokens']} tokens",
                flush=True,
            )
            _Counter.real = _Counter.padded = _Counter.supervised = _Counter.sequences = 0
            self.last = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            # logging_steps is 1 (runner.HARMLESS): one entry per optimizer step, the loss averaged over the
            # step's micro-batches (and ranks) and the gradient norm before clipping, as the Trainer logs them
            if logs and "loss" in logs:
                entry = {"step": state.global_step, "loss": float(logs["loss"])}
                if logs.get("grad_norm") is not None:
                    entry["grad_norm"] = float(logs["grad_norm"])
                metrics["losses"].append(entry)

        def on_train_end(self, args, state, control, **kwargs):
            self._sync()
            if cuda:
                metrics["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
                metrics["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
            if int(os.environ.get("RANK", "0")) == 0:
                _write(spec["metrics_path"], metrics)

    return MetricsCallback(), metrics


START = time.perf_counter()


def _torchaudio_placeholder() -> str | None:
    """LLaMA-Factory 0.9.5 imports torchaudio unconditionally (data/mm_plugin.py) but uses it only to load
    audio inputs. Where no torchaudio build matches the installed torch (PyPI's newest, 2.11, does not load
    beside the pinned torch 2.13 CPU build), a placeholder module lets text-only training run the real
    trainer; anything that touches audio raises. Reported in the run's metrics."""
    try:
        import torchaudio  # noqa: F401

        return None
    except (ImportError, OSError) as exc:
        import importlib.machinery
        import types

        module = types.ModuleType("torchaudio")
        module.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        module.__version__ = "0+unavailable"  # type: ignore[attr-defined]

        def _unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("torchaudio is not installed: audio inputs cannot be loaded in this run")

        module.load = _unavailable  # type: ignore[attr-defined]
        module.functional = types.SimpleNamespace(resample=_unavailable)  # type: ignore[attr-defined]
        sys.modules["torchaudio"] = module
        return f"torchaudio unavailable ({type(exc).__name__}); text-only run, audio inputs would fail"


def train(spec: dict[str, Any]) -> int:
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    note = _torchaudio_placeholder()
    _patch_trainer()
    callback, metrics = _make_callback(spec)
    if note:
        metrics["notes"] = [note]
    metrics["stage"] = synthetic_meta.stage_of(spec["args"])
    metrics["reference_forward"] = synthetic_meta.reference_forward(spec["args"])  # comparison's MFU
    rank = int(os.environ.get("RANK", "0"))
    try:
        from llamafactory.train.tuner import run_exp

        _skip_value_head_rewrite()
        run_exp(dict(spec["args"]), callbacks=[callback])
    except BaseException as exc:  # noqa: BLE001 - the parent reports the crash and its cause
        metrics["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        metrics["traceback"] = traceback.format_exc()[-4000:]
        metrics["failed_after_s"] = time.perf_counter() - START
        if rank == 0:
            _write(spec["metrics_path"], metrics)
        return 1
    return 0


def main(argv: list[str]) -> int:
    mode, spec_path = argv[0], argv[1]
    spec = json.loads(Path(spec_path).read_text())
    if mode == "prepare":
        prepare(spec)
        return 0
    return train(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
