"""What LLaMA-Factory really does with a value outside a field's choices, given in YAML.

`HfArgumentParser.parse_dict` checks no `Literal` and converts no `Enum` of LLaMA-Factory's dataclasses: the
string reaches the code that reads the field. HF's own Enum fields (`optim`, `lr_scheduler_type`, the
strategies, `hub_strategy`) are converted by `TrainingArguments.__post_init__` and fail at once. For every
other field with choices the outcome was read in the consuming code of LLaMA-Factory 0.9.5 / transformers
5.6.0 (file:line in `evidence`); `tests/rules/test_choice_audit.py` holds one test per field. On the command line
argparse rejects every value outside the choices at once, whatever the field.

`fails`: the real run stops (an error), when `used` says the field is read at all; otherwise the run goes on
(a warning: what it does instead is in `outcome`). `same_as`: the choice the code treats the value as, when
that is certain (a safe fix).
"""

from __future__ import annotations

from collections.abc import Callable

from cfgopt.rules.base import Context
from cfgopt.rules.support.llamafactory import as_list, distributed, on, value_of
from cfgopt.text.record import Record


class Outside(Record):
    outcome: str  # what happens, a clause that follows "LLaMA-Factory <version> "
    evidence: str
    fails: bool = False
    used: Callable[[Context], bool] | None = None  # None: always read
    same_as: str | None = None

    def stops(self, ctx: Context) -> bool:
        return self.fails and (self.used is None or self.used(ctx))


def _stage(name: str) -> Callable[[Context], bool]:
    return lambda ctx: value_of(ctx, "stage") == name


def _flag(key: str) -> Callable[[Context], bool]:
    return lambda ctx: on(ctx, key)


def _several_datasets(ctx: Context) -> bool:
    return len(as_list(value_of(ctx, "dataset"))) > 1 or len(as_list(value_of(ctx, "eval_dataset"))) > 1


def _not_training(ctx: Context) -> bool:
    return not on(ctx, "do_train")


_HF_ENUM = "transformers 5.6.0 training_args.py `__post_init__`: `{enum}(value)` raises ValueError"
_UNCHECKED = "passes it unchecked to the {package} package"

OUTSIDE: dict[str, Outside] = {
    # ---- the run stops
    "stage": Outside(
        "passes the parser, then `run_exp` stops with `Unknown task` after start-up",
        'llamafactory 0.9.5 train/tuner.py `_training_function`: `raise ValueError(f"Unknown task: ...")`',
        fails=True,
    ),
    "finetuning_type": Outside(
        "stops at start-up with `AssertionError: Invalid fine-tuning method`",
        "llamafactory 0.9.5 hparams/finetuning_args.py L576",
        fails=True,
    ),
    "flash_attn": Outside(
        "passes the parser, then model load fails with `NotImplementedError: Unknown attention type` "
        "(after the dataset is tokenised: 16 s into a small run on an H200, hours on a real dataset)",
        "llamafactory 0.9.5 model/model_utils/attention.py L86",
        fails=True,
    ),
    "pref_loss": Outside(
        "passes the parser, then the first DPO step stops with `Unknown loss type`",
        "llamafactory 0.9.5 train/dpo/trainer.py L195-201 (and trl's `dpo_loss` for the reference-model path)",
        fails=True,
        used=_stage("dpo"),
    ),
    "mix_strategy": Outside(
        "stops when it merges the datasets: `ValueError: Unknown mixing strategy`",
        "llamafactory 0.9.5 data/data_utils.py L58-82 (`merge_dataset`, read only with several datasets)",
        fails=True,
        used=_several_datasets,
    ),
    "badam_mode": Outside(
        "stops when it builds the optimizer (`UnboundLocalError`: neither the `layer` nor the `ratio` branch runs)",
        "llamafactory 0.9.5 train/trainer_utils.py L432-470 (`_create_badam_optimizer`)",
        fails=True,
        used=_flag("use_badam"),
    ),
    "infer_dtype": Outside(
        "stops at model load for inference and export: `getattr(torch, value)` is not a dtype",
        "llamafactory 0.9.5 model/patcher.py L322-323 (read only when the model is not trainable)",
        fails=True,
        used=_not_training,
    ),
    "lang": Outside(
        "stops when `llamafactory-cli eval` starts: `Template X does not exist.`",
        "llamafactory 0.9.5 eval/template.py L60-63 (`get_eval_template`)",
        fails=True,
    ),
    "log_level": Outside(
        "stops when the Trainer is built: `KeyError` in `TrainingArguments.get_process_log_level`",
        "transformers 5.6.0 training_args.py L2033, called by trainer.py L414",
        fails=True,
    ),
    "log_level_replica": Outside(
        "stops when the Trainer is built: `KeyError` in `TrainingArguments.get_process_log_level`",
        "transformers 5.6.0 training_args.py L2034, called by trainer.py L414",
        fails=True,
    ),
    "ddp_backend": Outside(
        "stops when the process group starts (torch.distributed has no such backend)",
        "transformers 5.6.0 training_args.py L1834-1846: `backend` goes to accelerate's `PartialState`",
        fails=True,
        used=lambda ctx: distributed(ctx) is not False,
    ),
    "rope_scaling": Outside(
        "stops when the model is built: the rotary embedding has no such rope type (`KeyError`)",
        "llamafactory 0.9.5 model/model_utils/rope.py L68 (`rope_type` = the value); transformers 5.6.0 "
        "models/llama/modeling_llama.py L86 (`ROPE_INIT_FUNCTIONS[self.rope_type]`)",
        fails=True,
    ),
    "download_mode": Outside(
        "stops when `llamafactory-cli eval` loads the benchmark: `DownloadMode(value)` raises ValueError",
        "llamafactory 0.9.5 eval/evaluator.py (`load_dataset(download_mode=...)`), read only by eval",
        fails=True,
    ),
    # ---- the run goes on
    "export_device": Outside(
        'treats every value but `cpu` as `auto` (`device_map="auto"`): the export runs on the GPUs',
        "llamafactory 0.9.5 hparams/parser.py L561-567",
        same_as="auto",
    ),
    "quantization_method": Outside(
        "matches no quantization branch and has no else: the model loads unquantized, without a word, "
        "so it needs the memory of a 16-bit model",
        "llamafactory 0.9.5 model/model_utils/quantization.py `configure_quantization` (no else branch)",
    ),
    "init_special_tokens": Outside(
        "falls back to `noise_init` with a logged warning",
        "llamafactory 0.9.5 model/model_utils/embedding.py L134-147",
        same_as="noise_init",
    ),
    "quantization_device_map": Outside(
        "treats every value but `auto` as not set",
        "llamafactory 0.9.5 hparams/parser.py L374, model/model_utils/quantization.py L186",
    ),
    "mixture_of_depths": Outside(
        "neither loads nor converts a mixture-of-depths model: the option does nothing",
        'llamafactory 0.9.5 model/loader.py L157 and L176 (`== "load"` / `== "convert"`, no else)',
    ),
    "reward_model_type": Outside(
        "takes the branch for a full reward model in some places and not in others (PPO only)",
        "llamafactory 0.9.5 train/trainer_utils.py L155-170, train/ppo/trainer.py L179",
    ),
    "train_sampling_strategy": Outside(
        "uses the random sampler, as for `random`",
        "transformers 5.6.0 trainer.py L1014-1036 (`_get_train_sampler`: the else branch)",
        same_as="random",
    ),
    "badam_switch_mode": Outside(_UNCHECKED.format(package="BAdam"), "train/trainer_utils.py L442"),
    "badam_mask_mode": Outside(_UNCHECKED.format(package="BAdam"), "train/trainer_utils.py L460"),
    "galore_proj_type": Outside(_UNCHECKED.format(package="GaLore"), "train/trainer_utils.py L221"),
    "apollo_proj": Outside(_UNCHECKED.format(package="APOLLO"), "train/trainer_utils.py L307"),
    "apollo_proj_type": Outside(_UNCHECKED.format(package="APOLLO"), "train/trainer_utils.py L308"),
    "apollo_scale_type": Outside(_UNCHECKED.format(package="APOLLO"), "train/trainer_utils.py L311"),
    "quantization_type": Outside(_UNCHECKED.format(package="bitsandbytes"), "model_utils/quantization.py L177"),
    "sglang_lora_backend": Outside(_UNCHECKED.format(package="SGLang"), "chat/sglang_engine.py L101"),
    "swanlab_mode": Outside(_UNCHECKED.format(package="SwanLab"), "train/trainer_utils.py L886"),
    # LLaMA-Factory 0.9.4 (transformers 4.57.1) only
    "placement_strategy": Outside(_UNCHECKED.format(package="Ray"), "0.9.4 hparams/training_args.py, Ray runs only"),
    "ray_storage_filesystem": Outside(
        _UNCHECKED.format(package="Ray"), "0.9.4 hparams/training_args.py, Ray runs only"
    ),
    "half_precision_backend": Outside(
        "uses no apex for any value but `apex` (transformers 4.57 compares with `auto` and `apex` only)",
        'transformers 4.57.1 trainer.py (`args.half_precision_backend == "apex"`)',
    ),
    "fp16_backend": Outside(
        "uses no apex for any value but `apex` (a deprecated alias of `half_precision_backend`)",
        "transformers 4.57.1 training_args.py (`fp16_backend` copied to `half_precision_backend`)",
    ),
    "infer_backend": Outside(
        "stops: a training run refuses every backend but `huggingface` at start-up, and a chat or API engine "
        "raises `NotImplementedError: Unknown backend`",
        "llamafactory 0.9.5 hparams/parser.py L406 (training), chat/chat_model.py L50-75 (inference)",
        fails=True,
    ),
}

# HF's Enum fields: converted in TrainingArguments.__post_init__, so a bad value stops the run at once.
HF_ENUMS = {
    "optim": "OptimizerNames",
    "lr_scheduler_type": "SchedulerType",
    "eval_strategy": "IntervalStrategy",
    "evaluation_strategy": "IntervalStrategy",  # its name up to transformers 4.45 (LLaMA-Factory 0.9.0)
    "save_strategy": "SaveStrategy",
    "logging_strategy": "IntervalStrategy",
    "hub_strategy": "HubStrategy",
}
for _field, _enum in HF_ENUMS.items():
    OUTSIDE[_field] = Outside(
        f"stops at once: TrainingArguments raise `is not a valid {_enum}`", _HF_ENUM.format(enum=_enum), fails=True
    )


def outside(key: str) -> Outside:
    """The outcome for `key`; a field not audited yet is assumed to stop the run where it is used."""
    return OUTSIDE.get(key) or Outside(
        "fails where the value is used", "not audited: LLaMA-Factory reads the value as given", fails=True
    )
