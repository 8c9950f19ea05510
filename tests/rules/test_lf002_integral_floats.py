"""LF002 on an integral float in an int field (`max_steps: 1e4`, `lora_rank: 8.0`): an error where the code that
uses the value needs a real int and the judged job gets there (cfgopt/rules/support/integer_fields.py; each
failure raised with the real library by tests/oracle/test_integral_floats.py), a warning elsewhere. And a list in
a field LLaMA-Factory splits on commas is no wrong type."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.job.settings import Settings
from cfgopt.lint.engine import lint_paths
from cfgopt.rules.support.integer_fields import INTEGER_USES

BASE = {
    "model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct",
    "stage": "sft",
    "do_train": "true",
    "finetuning_type": "lora",
    "dataset": "alpaca_en_demo",
    "template": "llama3",
    "output_dir": "out",
}


def _lf002(tmp_path: Path, **values: str) -> list[tuple[str, str, str]]:
    """(key, severity, message) of each LF002 finding on a config of BASE updated with `values`."""
    path = tmp_path / "train.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in {**BASE, **values}.items()), encoding="utf-8")
    result = lint_paths([path], Settings(target_name="mi300x", gpus=1, select=["LF002"]))
    return [(d.key, str(d.severity), d.message) for d in result.diagnostics if d.code == "LF002"]


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"per_device_train_batch_size": "4.0"}, "DataLoader stops on it at train start"),
        ({"gradient_accumulation_steps": "8.0"}, "Trainer's loop"),
        ({"max_steps": "1e4"}, "Trainer's loop"),
        ({"max_samples": "1e5"}, "for any dataset of 100000 rows or more"),
        ({"preprocessing_num_workers": "16.0"}, "map(num_proc=...)"),
        ({"preprocessing_batch_size": "1000.0"}, "map(batch_size=...)"),
        ({"dataloader_num_workers": "2.0"}, "DataLoader"),
        ({"lora_rank": "8.0"}, "LoRA layers at model load"),
        ({"seed": "42.0"}, "set_seed` stops on it at start-up"),
        ({"torch_empty_cache_steps": "2.0"}, "start-up check"),
        ({"data_seed": "7.0"}, "data sampler"),
        ({"cutoff_len": "2048.0", "packing": "true"}, "packing stops on it at the first batch"),
        ({"cutoff_len": "2048.0", "stage": "pt"}, "pre-training tokenisation stops on it at the first batch"),
        ({"cutoff_len": "2048.0"}, "at the first example of 2048 tokens or more"),
        ({"per_device_eval_batch_size": "2.0", "eval_strategy": "steps", "val_size": "0.1"}, "first evaluation"),
        ({"finetuning_type": "freeze", "freeze_trainable_layers": "2.0"}, "trainable layers"),
        ({"finetuning_type": "oft", "oft_block_size": "32.0"}, "OFT layers"),
        ({"pissa_init": "true", "pissa_iter": "16.0"}, "PiSSA"),
    ],
)
def test_an_integral_float_is_an_error_where_the_run_needs_an_int(
    tmp_path: Path, values: dict[str, str], where: str
) -> None:
    key = next(k for k in values if k in INTEGER_USES)
    ((_, severity, message),) = [f for f in _lf002(tmp_path, **values) if f[0] == key]
    assert severity == "error" and where in message, message
    assert "passes on unconverted" in message


@pytest.mark.parametrize(
    "values",
    [
        {"max_steps": "-1.0"},  # epoch-based: the value is never used
        {"dataloader_num_workers": "0.0"},  # the main process loads: no worker count used
        {"per_device_eval_batch_size": "2.0"},  # no evaluation
        {"lora_rank": "8.0", "finetuning_type": "full"},  # no LoRA adapter is built
        {"lora_rank": "8.0", "adapter_name_or_path": "saves/lora"},  # resumed: the adapter's own rank
        {"pissa_iter": "-1.0", "pissa_init": "true"},  # plain `pissa` reads no iteration count
        {"freeze_trainable_layers": "2.0"},  # LoRA, not freeze
        {"lora_rank": "8.0", "do_train": "false", "do_predict": "true", "eval_dataset": "alpaca_en_demo"},
        {"save_total_limit": "2.0"},  # compared only (transformers trainer_utils.py rotate_checkpoints)
        {"lora_alpha": "16.0"},  # `lora_alpha / r`: float arithmetic
    ],
)
def test_an_integral_float_stays_a_warning_where_it_is_not_used_as_an_int(
    tmp_path: Path, values: dict[str, str]
) -> None:
    key = next(k for k, v in values.items() if v.endswith(".0"))
    ((_, severity, message),) = [f for f in _lf002(tmp_path, **values) if f[0] == key]
    assert severity == "warning" and message.endswith(f"is the float {float(values[key])!r}"), message


def test_the_fix_writes_the_integer(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in {**BASE, "max_steps": "1e4"}.items()), encoding="utf-8")
    result = lint_paths([path], Settings(target_name="mi300x", gpus=1, select=["LF002"]))
    (diag,) = result.diagnostics
    assert diag.fix is not None and diag.fix.applicability == "safe" and diag.fix.description == "Write `10000`"


@pytest.mark.parametrize(
    "values",
    [
        {"lora_target": "[q_proj, v_proj]"},
        {"lora_target": "[all]"},
        {"dataset": "[alpaca_en_demo, identity]"},
        {"additional_target": "[embed_tokens]"},
        {"finetuning_type": "freeze", "freeze_trainable_modules": "[mlp, self_attn]"},
        {"eval_dataset": "[alpaca_en_demo]", "do_eval": "true"},
    ],
)
def test_a_list_in_a_comma_split_field_is_no_wrong_type(tmp_path: Path, values: dict[str, str]) -> None:
    """`split_arg` returns a list unchanged (finetuning_args.py L561-573, data_args.py L148-154)."""
    assert _lf002(tmp_path, **values) == []


def test_a_list_in_a_number_field_crashes_where_it_is_used_not_at_start_up(tmp_path: Path) -> None:
    """`num_train_epochs: [3]` passes get_train_args; `math.ceil` in the Trainer's loop raises at train start."""
    ((_, severity, message),) = _lf002(tmp_path, num_train_epochs="[3]")
    assert severity == "error" and "the run crashes where it is first used (TypeError)" in message
    assert "start-up" not in message


def test_a_list_in_a_text_field_is_not_said_to_count_as_true(tmp_path: Path) -> None:
    ((_, severity, message),) = _lf002(tmp_path, run_name="[a, b]")
    assert severity == "warning" and "counts as true" not in message
