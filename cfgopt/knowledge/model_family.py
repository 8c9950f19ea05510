"""Which model a config trains, read from `model_name_or_path` without loading anything: the one place that
knows how (LF037's architecture, the Liger family of `Job.liger_patches_model`, the shapes table of
`model_shapes`).

Two sources, the better first:

1. a local model folder's `config.json` (`model_type`, `architectures`), read through the bounded reader
   (`user_files.read_bounded`: a FIFO or a device named `config.json` is not read, a huge file is refused), with
   a relative path tried against the config's folder, then the current folder (as LLaMA-Factory, started from
   either, would resolve it);
2. the name: every path component, nearest first, and the first that names a model family is the model's name
   (`/data/chatglm2-6b/model` is ChatGLM2; `.../models--Qwen--Qwen2.5-7B/snapshots/<hash>` is Qwen2.5-7B); a
   path none of whose components names a family keeps its last component.

`ModelName.source` says which: a name read from a folder *above* the last component (`parent folder`) is a
guess about a checkpoint kept under a model's folder, which a rule that reports an error lowers to a warning.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from cfgopt.text.patterns import lazy
from cfgopt.text.user_files import model_config

# Words that name a model family in a folder or hub name (lower case). Only used to pick which path component
# names the model; each caller then matches its own patterns against that component.
FAMILY_WORDS = lazy(
    r"llama|qwen|qwq|mistral|mixtral|ministral|gemma|phi-?\d|granite|glm|olmo|llava|gpt-?oss|gpt-?2|baichuan|"
    r"internlm|intern-?vl|deepseek|falcon|bloom|starcoder|minicpm|yi-\d|yi-coder|xverse|aquila|orion|cohere|"
    r"command-r|dbrx|jamba|pixtral|idefics|smollm|nemotron|exaone|hunyuan|kimi|ernie|seed-|mamba|stablelm|"
    r"vicuna|zephyr|tinyllama|openchat|solar|codegen|opt-\d|bert|t5-|flan|mpt-"
)

# The families LLaMA-Factory 0.9.5 patches with Liger kernels (model/model_utils/liger_kernel.py L40-85): by
# transformers' model_type where a config.json says it, else by name.
LIGER_MODEL_TYPES = frozenset(
    {
        "gemma", "gemma2", "gemma3", "gemma3_text", "glm", "glm4", "glm4v", "granite", "llama", "llava", "mistral",
        "mixtral", "mllama", "olmo2", "paligemma", "phi3", "qwen2", "qwen2_vl", "qwen2_5_vl", "qwen3", "qwen3_moe",
        "qwen3_next", "qwen3_5", "gpt_oss",
    }
)  # fmt: skip
LIGER_NAMES = lazy(
    r"llama(?!-?4)|qwen(?!-?[0-9]+b|3-?vl)|qwq|mistral|mixtral|gemma|phi-?3|granite|glm-?4|olmo-?2|paligemma|llava|gpt-oss",
    re.IGNORECASE,
)

CONFIG_JSON = "config.json"
SOURCE_CONFIG = "config.json"
SOURCE_NAME = "name"
SOURCE_PARENT = "parent folder"


class ModelName(NamedTuple):
    """What the config says of its model."""

    text: str  # lower case: the path component that names the model (the last one when none does)
    model_type: str  # transformers' model_type from a local config.json ("" when not read)
    architectures: tuple[str, ...]  # from the same config.json
    source: str  # SOURCE_CONFIG, SOURCE_NAME or SOURCE_PARENT: what the facts were read from


def components(ref: str) -> list[str]:
    """The path components of a model reference, nearest first, lower case (`org/name` -> name, org)."""
    parts = [part for part in ref.replace("\\", "/").strip().lower().split("/") if part and part not in (".", "..")]
    return parts[::-1]


def naming_component(ref: str) -> tuple[str, bool]:
    """(the component that names the model, whether it is the last one)."""
    parts = components(ref)
    if not parts:
        return "", True
    for index, part in enumerate(parts):
        if FAMILY_WORDS.search(part):
            return part, index == 0
    return parts[0], True


def local_config(ref: str, folder: Path | None) -> tuple[dict[str, Any], Path] | None:
    """The model folder's config.json (as a dict) and the folder, when `ref` is a local folder holding one that
    reads as JSON; None otherwise (a hub id, a missing folder, a FIFO, a device, a file too large). Read by
    `user_files.model_config`, the one reader of a model's config.json."""
    found = model_config(ref.strip(), folder)
    if found is None or not isinstance(found[1], dict):
        return None
    return found[1], found[0]


def model_name(ref: object, folder: Path | None = None) -> ModelName | None:
    """What `model_name_or_path` says of the model (None when it is not a non-empty string)."""
    if not isinstance(ref, str) or not ref.strip():
        return None
    text, last = naming_component(ref)
    found = local_config(ref, folder)
    if found is not None:
        data, _ = found
        model_type = data.get("model_type")
        architectures = data.get("architectures")
        architectures = tuple(a for a in architectures if isinstance(a, str)) if isinstance(architectures, list) else ()
        return ModelName(text, model_type if isinstance(model_type, str) else "", architectures, SOURCE_CONFIG)
    return ModelName(text, "", (), SOURCE_NAME if last else SOURCE_PARENT)


def family_text(name: ModelName) -> str:
    """The text a family pattern is matched against: the config's model_type where read, else the name."""
    return name.model_type.lower() if name.model_type else name.text


def liger_patches(ref: object, folder: Path | None = None) -> bool:
    """Whether LLaMA-Factory's `enable_liger_kernel` patches this model."""
    name = model_name(ref, folder)
    if name is None:
        return False
    if name.model_type:
        return name.model_type in LIGER_MODEL_TYPES
    return bool(LIGER_NAMES.search(name.text))
