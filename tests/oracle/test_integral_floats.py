"""Every field LF002 calls an error for an integral float (cfgopt/rules/support/integer_fields.py) fails in the
real libraries: each probe runs the consumer LLaMA-Factory 0.9.5 hands the value to (on the CPU, a tiny Llama)
and, where the call is LLaMA-Factory's own, first checks that its source still says so. A field added to the
table without a probe here fails `test_every_error_field_has_a_probe`."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cfgopt.rules.support.integer_fields import INTEGER_USES

pytest.importorskip("llamafactory")
pytest.importorskip("peft")

import torch
from datasets import Dataset

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _in_source(obj: object, *lines: str) -> None:
    """The call this probe copies is still the one LLaMA-Factory makes."""
    text = inspect.getsource(obj)
    assert all(line in text for line in lines), (obj, lines)


def _lf_file(relative: str) -> Path:
    """A file of the installed LLaMA-Factory, read without importing `llamafactory.data` (whose multimodal
    plugin needs torchaudio, which this environment lacks)."""
    spec = importlib.util.find_spec("llamafactory")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / relative


def _in_file(relative: str, *lines: str) -> None:
    text = _lf_file(relative).read_text(encoding="utf-8")
    assert all(line in text for line in lines), (relative, lines)


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    return LlamaForCausalLM(config)


def _train(tmp: Path, **args: object) -> None:
    """Two steps of the HF Trainer (what LLaMA-Factory trains with) with these TrainingArguments."""
    from transformers import Trainer, TrainingArguments

    data = Dataset.from_dict({"input_ids": [[1, 2, 3, 4]] * 16, "labels": [[1, 2, 3, 4]] * 16})
    base = {"output_dir": str(tmp), "max_steps": 2, "report_to": "none", "save_strategy": "no", "use_cpu": True}
    Trainer(model=_tiny_llama(), args=TrainingArguments(**{**base, **args}), train_dataset=data).train()


def _rows(n: int = 4) -> Dataset:
    return Dataset.from_dict({"a": list(range(n))})


def _seed(tmp: Path) -> None:
    import transformers
    from llamafactory.hparams import parser

    _in_source(parser, "transformers.set_seed(training_args.seed)")
    transformers.set_seed(42.0)


def _empty_cache(tmp: Path) -> None:
    from transformers import TrainingArguments

    TrainingArguments(output_dir=str(tmp), torch_empty_cache_steps=2.0)


def _max_samples(tmp: Path) -> None:
    _in_file(
        "data/loader.py", "max_samples = min(data_args.max_samples, len(dataset))", "dataset.select(range(max_samples))"
    )
    dataset, max_samples = _rows(4), 4.0  # a dataset of at least max_samples rows: min() keeps the float
    dataset.select(range(min(max_samples, len(dataset))))


def _num_proc(tmp: Path) -> None:
    _in_file("data/loader.py", "num_proc=data_args.preprocessing_num_workers")
    _rows().map(lambda x: x, num_proc=2.0)


def _map_batch(tmp: Path) -> None:
    _in_file("data/loader.py", "batch_size=data_args.preprocessing_batch_size")
    _rows().map(lambda x: x, batched=True, batch_size=2.0)


def _cutoff(tmp: Path) -> None:
    _in_file("data/processor/supervised.py", "pad_length = self.data_args.cutoff_len - len(packed_input_ids) + 1")
    # processor_utils imports nothing at run time: load it alone, as the processors call it
    spec = importlib.util.spec_from_file_location("processor_utils", _lf_file("data/processor/processor_utils.py"))
    assert spec is not None and spec.loader is not None
    processor_utils = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = processor_utils  # its dataclasses look their module up
    try:
        spec.loader.exec_module(processor_utils)
    finally:
        del sys.modules[spec.name]
    source_len, target_len = processor_utils.infer_seqlen(10, 10, 2048.0)
    assert (type(source_len), type(target_len)) == (int, int)  # a short example passes
    source_len, _ = processor_utils.infer_seqlen(3000, 10, 2048.0)
    list(range(3000))[:source_len]  # a long one is cut with a float


def _loader(**kwargs: object) -> Callable[[Path], None]:
    def probe(tmp: Path) -> None:
        list(torch.utils.data.DataLoader(list(range(8)), **{"batch_size": 2, **kwargs}))

    return probe


def _trainer(**args: object) -> Callable[[Path], None]:
    return lambda tmp: _train(tmp, **args)


def _lora(tmp: Path) -> None:
    from llamafactory.model import adapter
    from peft import LoraConfig, get_peft_model

    _in_source(adapter, '"r": finetuning_args.lora_rank')
    get_peft_model(_tiny_llama(), LoraConfig(r=8.0, target_modules=["q_proj"]))


def _pissa(tmp: Path) -> None:
    from llamafactory.model import adapter
    from peft import LoraConfig, get_peft_model

    _in_source(adapter, 'f"pissa_niter_{finetuning_args.pissa_iter}"')
    get_peft_model(_tiny_llama(), LoraConfig(r=8, target_modules=["q_proj"], init_lora_weights="pissa_niter_16.0"))


def _oft(**kwargs: object) -> Callable[[Path], None]:
    def probe(tmp: Path) -> None:
        from llamafactory.model import adapter
        from peft import OFTConfig, get_peft_model

        _in_source(adapter, '"r": finetuning_args.oft_rank', '"oft_block_size": finetuning_args.oft_block_size')
        get_peft_model(_tiny_llama(), OFTConfig(target_modules=["q_proj"], **kwargs))

    return probe


def _freeze(tmp: Path) -> None:
    from llamafactory.hparams import FinetuningArguments
    from llamafactory.model.adapter import _setup_freeze_tuning

    args = FinetuningArguments(finetuning_type="freeze", freeze_trainable_layers=1.0)
    _setup_freeze_tuning(_tiny_llama(), args, is_trainable=True, cast_trainable_params_to_fp32=False)


_NOT_AN_INT = "'float' object cannot be interpreted as an integer"
_BATCH = "batch_size should be a positive integer value"

# field -> (the probe, what the real library says)
PROBES: dict[str, tuple[Callable[[Path], None], str]] = {
    "seed": (_seed, "Cannot cast scalar from dtype('float64')"),
    "torch_empty_cache_steps": (_empty_cache, "must be an integer bigger than 0"),
    "max_samples": (_max_samples, _NOT_AN_INT),
    "preprocessing_num_workers": (_num_proc, _NOT_AN_INT),
    "preprocessing_batch_size": (_map_batch, _NOT_AN_INT),
    "cutoff_len": (_cutoff, "slice indices must be integers"),
    "per_device_train_batch_size": (_loader(batch_size=4.0), _BATCH),
    "per_device_eval_batch_size": (_loader(batch_size=2.0), _BATCH),
    "gradient_accumulation_steps": (_trainer(gradient_accumulation_steps=2.0), _NOT_AN_INT),
    "max_steps": (_trainer(max_steps=2.0), _NOT_AN_INT),
    "dataloader_num_workers": (_loader(num_workers=1.0), _NOT_AN_INT),
    "dataloader_prefetch_factor": (_loader(num_workers=1, prefetch_factor=2.0), _NOT_AN_INT),
    "data_seed": (_trainer(data_seed=42.0), "manual_seed expected a long"),
    "lora_rank": (_lora, "must be tuple of ints"),
    "pissa_iter": (_pissa, "invalid literal for int() with base 10: '16.0'"),
    "oft_rank": (_oft(r=2.0, oft_block_size=0), "empty()"),
    "oft_block_size": (_oft(r=0, oft_block_size=8.0), "tuple of ints"),
    "freeze_trainable_layers": (_freeze, _NOT_AN_INT),
}


def test_every_error_field_has_a_probe() -> None:
    assert set(PROBES) == set(INTEGER_USES)


@pytest.mark.parametrize("field", sorted(PROBES))
def test_the_real_consumer_fails_on_an_integral_float(tmp_path: Path, field: str) -> None:
    probe, said = PROBES[field]
    with pytest.raises((TypeError, ValueError, RuntimeError)) as raised:
        probe(tmp_path)
    assert said in str(raised.value), raised.value
