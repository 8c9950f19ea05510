"""Model shapes for the memory reasoning of the speed rules, without loading anything heavy.

`shape_for(model_name_or_path, local)` takes the shape from a local model folder's `config.json` where one was
read (`local`: read by `cfgopt/loaders/model_config.py`, for a job once, `Job.local_model`; nothing is read here),
else matches a built-in table of common decoder-only families by the path component that names the model,
case-insensitively (`meta-llama/Meta-Llama-3-8B-Instruct` -> Llama-3-8B, and so is
`/ckpt/Meta-Llama-3-8B-Instruct/checkpoint-500`). Unknown models give None, and the rules that need a size stay
silent.

`num_parameters` counts embeddings (twice when untied), per layer the attention projections (GQA, with
biases and q/k norms where the family has them), the SwiGLU MLP (3 matrices) and the RMSNorm weights,
and the final norm. It reproduces the published counts (Llama-3-8B: 8,030,261,248).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cfgopt.knowledge.model_family import LocalModel, naming_component
from cfgopt.text.user_text import positive_int


class ModelShape(NamedTuple):  # not a dataclass: `dataclasses` imports `inspect`, 3-5 ms of a lint run
    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    head_dim: int | None = None  # None: hidden_size // num_attention_heads
    qkv_bias: bool = False  # Qwen2 / Qwen2.5
    qk_norm: bool = False  # Qwen3: RMSNorm over q and k per head
    norms_per_layer: int = 2  # Gemma 2 has four (pre/post attention and MLP)
    logit_softcapping: bool = False  # Gemma 2: tanh soft-capping of the final logits (an extra copy in the loss)
    model_type: str = ""  # transformers' model_type where known ("" for the built-in table's llama-like rows)

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_parameters(self) -> int:
        h, d = self.hidden_size, self.head_size
        q_dim, kv_dim = self.num_attention_heads * d, self.num_key_value_heads * d
        attention = h * q_dim + 2 * h * kv_dim + q_dim * h
        if self.qkv_bias:
            attention += q_dim + 2 * kv_dim
        if self.qk_norm:
            attention += 2 * d
        mlp = 3 * h * self.intermediate_size
        layer = attention + mlp + self.norms_per_layer * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return embeddings + self.num_hidden_layers * layer + h


def _s(name: str, h: int, i: int, layers: int, heads: int, kv: int, vocab: int, tied: bool, **kw) -> ModelShape:
    return ModelShape(name, h, i, layers, heads, kv, vocab, tied, **kw)


# (pattern over the lower-cased id, shape). Values from each model's config.json on the Hugging Face Hub.
_QWEN25 = {"qkv_bias": True, "model_type": "qwen2"}
_QWEN3 = {"head_dim": 128, "qk_norm": True, "model_type": "qwen3"}
_LLAMA = {"model_type": "llama"}
_MISTRAL = {"model_type": "mistral"}
_GEMMA2 = {"norms_per_layer": 4, "logit_softcapping": True, "model_type": "gemma2"}
_TABLE: tuple[tuple[str, ModelShape], ...] = tuple(  # patterns as text: `shape_for` compiles the one it tries
    (p, s)
    for p, s in (
        (r"llama-?3(\.[01])?-8b", _s("Llama-3-8B", 4096, 14336, 32, 32, 8, 128256, False, **_LLAMA)),
        (r"llama-?3(\.[013])?-70b", _s("Llama-3-70B", 8192, 28672, 80, 64, 8, 128256, False, **_LLAMA)),
        (r"llama-?3\.2-1b", _s("Llama-3.2-1B", 2048, 8192, 16, 32, 8, 128256, True, head_dim=64, **_LLAMA)),
        (r"llama-?3\.2-3b", _s("Llama-3.2-3B", 3072, 8192, 28, 24, 8, 128256, True, head_dim=128, **_LLAMA)),
        (r"qwen2\.5-0\.5b", _s("Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 151936, True, **_QWEN25)),
        (r"qwen2\.5-1\.5b", _s("Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 151936, True, **_QWEN25)),
        (r"qwen2\.5-3b", _s("Qwen2.5-3B", 2048, 11008, 36, 16, 2, 151936, True, **_QWEN25)),
        (r"qwen2\.5-7b", _s("Qwen2.5-7B", 3584, 18944, 28, 28, 4, 152064, False, **_QWEN25)),
        (r"qwen2\.5-14b", _s("Qwen2.5-14B", 5120, 13824, 48, 40, 8, 152064, False, **_QWEN25)),
        (r"qwen2\.5-32b", _s("Qwen2.5-32B", 5120, 27648, 64, 40, 8, 152064, False, **_QWEN25)),
        (r"qwen2\.5-72b", _s("Qwen2.5-72B", 8192, 29568, 80, 64, 8, 152064, False, **_QWEN25)),
        (r"qwen3-0\.6b", _s("Qwen3-0.6B", 1024, 3072, 28, 16, 8, 151936, True, **_QWEN3)),
        (r"qwen3-1\.7b", _s("Qwen3-1.7B", 2048, 6144, 28, 16, 8, 151936, True, **_QWEN3)),
        (r"qwen3-4b", _s("Qwen3-4B", 2560, 9728, 36, 32, 8, 151936, True, **_QWEN3)),
        (r"qwen3-8b", _s("Qwen3-8B", 4096, 12288, 36, 32, 8, 151936, False, **_QWEN3)),
        (r"qwen3-14b", _s("Qwen3-14B", 5120, 17408, 40, 40, 8, 151936, False, **_QWEN3)),
        (r"qwen3-32b", _s("Qwen3-32B", 5120, 25600, 64, 64, 8, 151936, False, **_QWEN3)),
        (r"mistral-7b-(instruct-)?v0\.3", _s("Mistral-7B-v0.3", 4096, 14336, 32, 32, 8, 32768, False, **_MISTRAL)),
        (r"mistral-7b", _s("Mistral-7B", 4096, 14336, 32, 32, 8, 32000, False, **_MISTRAL)),
        (r"gemma-2-2b", _s("Gemma-2-2B", 2304, 9216, 26, 8, 4, 256000, True, head_dim=256, **_GEMMA2)),
        (r"gemma-2-9b", _s("Gemma-2-9B", 3584, 14336, 42, 16, 8, 256000, True, head_dim=256, **_GEMMA2)),
        (r"gemma-2-27b", _s("Gemma-2-27B", 4608, 36864, 46, 32, 16, 256000, True, head_dim=128, **_GEMMA2)),
    )
)
_WORD_END = r"(?![0-9.])"  # `qwen3-8b` must not match `qwen3-8b0...`; `-4b` must not match `-4.5b`


def shape_for(model_name_or_path: str, local: LocalModel | None = None) -> ModelShape | None:
    """The shape of the model `model_name_or_path` names: its config.json's where read (`local`), else the
    built-in table's row for its name; None when neither knows it."""
    if not isinstance(model_name_or_path, str) or not model_name_or_path.strip():
        return None
    if local is not None:
        return _from_config(local.config, local.folder.name)
    name, _ = naming_component(model_name_or_path)  # `/ckpt/Qwen3-8B/checkpoint-500` is Qwen3-8B
    for pattern, shape in _TABLE:
        if re.search(r"(?:^|[^a-z0-9])" + pattern + _WORD_END, name):
            return shape
    return None


# A dimension beyond this is no model (a config.json with `1e400` or a 400-digit integer): the memory model's
# products of dimensions must stay within the float range.
MAX_DIMENSION = 2**31 - 1


def _dimension(value: object) -> bool:
    """A positive integer (not a bool) up to MAX_DIMENSION."""
    return positive_int(value, MAX_DIMENSION) is not None


def _from_config(data: object, name: str) -> ModelShape | None:
    if not isinstance(data, dict):
        return None
    if "hidden_size" not in data and isinstance(data.get("text_config"), dict):
        data = data["text_config"]
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    values = [data.get(k) for k in keys]
    if not all(_dimension(v) for v in values):
        return None
    h, i, layers, heads, vocab = values
    kv = data.get("num_key_value_heads") or heads
    head_dim = data.get("head_dim")
    model_type = str(data.get("model_type", ""))
    return ModelShape(
        name=name,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv if _dimension(kv) else heads,
        vocab_size=vocab,
        tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
        head_dim=head_dim if _dimension(head_dim) else None,
        qkv_bias=bool(data.get("attention_bias", model_type == "qwen2")),
        qk_norm=model_type.startswith("qwen3"),
        norms_per_layer=4 if model_type.startswith("gemma2") or model_type.startswith("gemma3") else 2,
        logit_softcapping=bool(data.get("final_logit_softcapping")),
        model_type=model_type,
    )
