"""Which model a config trains, read from `model_name_or_path` without loading anything: the one place that
knows how (LF037's architecture, the Liger family of `Job.liger_patches_model`, the fp16 overflow of
`Job.overflows_fp16`, the shapes table of `model_shapes`).

Pure facts: no file is read here. Two sources, the better first:

1. a local model folder's `config.json` (`model_type`, `architectures`), read by the job's loader
   (`cfgopt/loaders/model_config.py`, once per job: `Job.local_model`) and handed in as a `LocalModel`;
2. the name: every path component, nearest first, and the first that names a model family is the model's name
   (`/data/chatglm2-6b/model` is ChatGLM2; `.../models--Qwen--Qwen2.5-7B/snapshots/<hash>` is Qwen2.5-7B); a
   path none of whose components names a family keeps its last component.

`ModelName.source` says which: a name read from a folder *above* the last component (`parent folder`) is a
guess about a checkpoint kept under a model's folder, which a rule that reports an error lowers to a warning.
"""

from __future__ import annotations

import re
from pathlib import Path

from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Words that name a model family in a folder or hub name (lower case). Only used to pick which path component
# names the model; each caller then matches its own patterns against that component. Plain words are looked up
# with `in` (no pattern to compile for the usual names); those with a number after them are a small pattern.
FAMILY_WORDS = (
    "llama", "qwen", "qwq", "mistral", "mixtral", "ministral", "gemma", "granite", "glm", "olmo", "llava", "gptoss",
    "gpt-oss", "gpt2", "gpt-2", "baichuan", "internlm", "internvl", "intern-vl", "deepseek", "falcon", "bloom",
    "starcoder", "minicpm", "yi-coder", "xverse", "aquila", "orion", "cohere", "command-r", "dbrx", "jamba", "pixtral",
    "idefics", "smollm", "nemotron", "exaone", "hunyuan", "kimi", "ernie", "seed-", "mamba", "stablelm", "vicuna",
    "zephyr", "tinyllama", "openchat", "solar", "codegen", "bert", "t5-", "flan", "mpt-",
)  # fmt: skip
NUMBERED_FAMILY_WORDS = lazy(r"phi-?\d|yi-\d|opt-\d", needs=("phi", "yi-", "opt-"))


def names_a_family(part: str) -> bool:
    """Does a path component name a model family (`FAMILY_WORDS`, `NUMBERED_FAMILY_WORDS`)?"""
    return any(word in part for word in FAMILY_WORDS) or NUMBERED_FAMILY_WORDS.search(part) is not None


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
    needs=("llama", "qwen", "qwq", "mistral", "mixtral", "gemma", "phi", "granite", "glm", "olmo", "llava", "gpt-oss"),
)

SOURCE_CONFIG = "config.json"
SOURCE_NAME = "name"
SOURCE_PARENT = "parent folder"


class LocalModel(Record):
    """A local model folder and its `config.json` as a JSON object (read by `cfgopt/loaders/model_config.py`)."""

    folder: Path
    config: dict[str, Any]


class ModelName(Record):
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
        if names_a_family(part):
            return part, index == 0
    return parts[0], True


def model_name(ref: object, local: LocalModel | None = None) -> ModelName | None:
    """What `model_name_or_path` says of the model (None when it is not a non-empty string), with its local
    config.json where one was read (`local`)."""
    if not isinstance(ref, str) or not ref.strip():
        return None
    text, last = naming_component(ref)
    if local is not None:
        model_type = local.config.get("model_type")
        architectures = local.config.get("architectures")
        architectures = tuple(a for a in architectures if isinstance(a, str)) if isinstance(architectures, list) else ()
        return ModelName(text, model_type if isinstance(model_type, str) else "", architectures, SOURCE_CONFIG)
    return ModelName(text, "", (), SOURCE_NAME if last else SOURCE_PARENT)


def family_text(name: ModelName) -> str:
    """The text a family pattern is matched against: the config's model_type where read, else the name."""
    return name.model_type.lower() if name.model_type else name.text


def liger_patches(ref: object, local: LocalModel | None = None) -> bool:
    """Whether LLaMA-Factory's `enable_liger_kernel` patches this model (`local`: its config.json, where read)."""
    name = model_name(ref, local)
    if name is None:
        return False
    if name.model_type:
        return name.model_type in LIGER_MODEL_TYPES
    return _llama_before_4(name.text) or bool(LIGER_NAMES.search(name.text))


def _llama_before_4(text: str) -> bool:
    """Is there a `llama` not followed by `4` or `-4` in `text`: `LIGER_NAMES`' first alternative, found without
    compiling the pattern (the most common family; a name it misses is asked of the pattern)."""
    at = text.find("llama")
    while at >= 0:
        if not text.startswith(("4", "-4"), at + 5):
            return True
        at = text.find("llama", at + 1)
    return False


# Gemma 2 soft-caps its attention logits, which only eager attention and FlashAttention-2 compute: LLaMA-Factory
# turns `flash_attn: fa2` (and `auto`) without flash-attn into eager for it ("FlashAttention-2 is not installed, use
# eager attention.") and warns that SDPA drops the soft-capping (model/model_utils/attention.py L46-58 in 0.9.5;
# the same branch in 0.9.3 and 0.9.4). SDPA in its place changes what the model computes.
SOFT_CAPPED_MODEL_TYPES = frozenset({"gemma2"})
SOFT_CAPPED_NAMES = lazy(
    r"gemma-?2(?=[-_.]|$)", re.IGNORECASE, needs=("gemma",)
)  # gemma-2-9b, gemma2-2b; not gemma-2b (Gemma 1)


def soft_capped_attention(ref: object, local: LocalModel | None = None) -> bool:
    """Does this model soft-cap its attention logits (Gemma 2): eager where `fa2` has no flash-attn, and no SDPA?"""
    name = model_name(ref, local)
    if name is None:
        return False
    if name.model_type:
        return name.model_type in SOFT_CAPPED_MODEL_TYPES
    return bool(SOFT_CAPPED_NAMES.search(name.text))


# Families trained in bf16 whose activations overflow fp16 (loss 0 or NaN from the first steps): Qwen2 and later
# (Qwen1.5 trained in fp16 as well, without the reports), by transformers' model_type or by name. LF050 warns on
# `fp16: true` for them, and nothing else writes it: not LF008's or LF004's fix, nor the speed plan's precision step.
BF16_TRAINED_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen3", "qwen3_moe", "qwen3_next"})
BF16_TRAINED_NAMES = lazy(r"qwen-?(2|3)(?![0-9])|qwq", re.IGNORECASE, needs=("qwen", "qwq"))


def overflows_fp16(ref: object, local: LocalModel | None = None) -> bool:
    """Does this model, trained in bf16, overflow fp16 (Qwen2 and later: LF050)? Matched against its config's
    model_type where read, else its name."""
    name = model_name(ref, local)
    if name is None:
        return False
    family = family_text(name)
    return family in BF16_TRAINED_TYPES or bool(BF16_TRAINED_NAMES.search(family))
