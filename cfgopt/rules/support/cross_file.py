"""What the HF Trainer compares between TrainingArguments and the DeepSpeed JSON (transformers 5.6.0
integrations/deepspeed.py `HfTrainerDeepSpeedConfig.trainer_config_process`): explicit DeepSpeed values
must equal the training config's, "auto" is filled from it, absent keys are not checked."""

from __future__ import annotations

from cfgopt.job import job
from cfgopt.knowledge import schema
from cfgopt.text.source import Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def lf_value(consumer: Source, key: str, lf: schema.LlamaFactorySchema) -> Any:
    """A TrainingArguments value as the trainer sees it: the config's, else the dataclass default (`job.lf_value`)."""
    return job.lf_value(consumer.data, key, lf, job.group_of(consumer))


# The WebUI precision widget (`compute_type`) says what the user meant even though LLaMA-Factory rejects
# the key (LF001 reports it and its safe fix writes exactly this): judge the DeepSpeed JSON by that intent,
# so one mistake is reported once, not again as a precision mismatch.
_COMPUTE_TYPE_INTENT = {"bf16": "bf16", "pure_bf16": "bf16", "fp16": "fp16"}


def lf_precision(consumer: Source, flag: str, lf: schema.LlamaFactorySchema) -> bool:
    """Whether `fp16` / `bf16` (or its *_full_eval twin) will be on for this consumer."""
    data = consumer.data if isinstance(consumer.data, dict) else {}
    if flag not in data and _COMPUTE_TYPE_INTENT.get(str(data.get("compute_type"))) == flag:
        return True
    return bool(lf_value(consumer, flag, lf) or lf_value(consumer, f"{flag}_full_eval", lf))


def consumer_entry(consumer: Source, key: str):
    """The top-level entry of `key` in a LLaMA-Factory config (None when it is absent)."""
    return consumer.root.get(key) if consumer.root is not None and consumer.root.is_mapping else None
