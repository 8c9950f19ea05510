"""Offline stand-ins for the hub: a tokenizer built with `tokenizers`, random-init weights with the model's
real shapes, and a dataset of the stage's kind (synthetic_meta.STAGE_DATA: Alpaca-like, pairwise, KTO-tagged or
plain text) with a realistic length distribution. Runs in the worker process
(imports torch / transformers / tokenizers)."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cfgopt.text.user_files import read_text_bounded
from cfgopt.text.user_text import integer
from cfgopt.verify import synthetic_meta
from cfgopt.verify.synthetic_meta import SUPPORTED_TEMPLATES  # noqa: F401 - one list, shared

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_PARTIAL = ".building-"


def build_into(final: Path, build: Callable[[Path], Any]) -> Any:
    """Run `build(folder)` in a fresh hidden folder beside `final`, then rename it into place: a build that
    fails or is interrupted never leaves a folder that looks finished (what is left, if the process was
    killed outright, is removed by `remove_partial` before the next build)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{final.name}{_PARTIAL}", dir=final.parent))
    try:
        value = build(folder)
        if final.exists():  # built meanwhile by another run: keep that one
            shutil.rmtree(folder, ignore_errors=True)
        else:
            os.replace(folder, final)
        return value
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def remove_partial(final: Path) -> None:
    """Remove what builds of `final` that were killed left behind (and the `.building` folders of old
    releases)."""
    if not final.parent.is_dir():
        return
    for leftover in final.parent.glob(f".{final.name}{_PARTIAL}*"):
        shutil.rmtree(leftover, ignore_errors=True)
    shutil.rmtree(final.with_name(final.name + ".building"), ignore_errors=True)


def cpu_bytes_needed(parameters: int, finetuning_type: str) -> int:
    """Memory a CPU run of a random-init model needs, roughly: fp32 weights, built once and loaded again by
    the trainer, plus (full / freeze fine-tuning) fp32 gradients and two Adam states; 2 GiB for the rest."""
    per_parameter = 16 if finetuning_type in ("full", "freeze") else 8
    return parameters * per_parameter + 2 * 1024**3


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else physical memory; None when neither is known."""
    try:
        for line in read_text_bounded("/proc/meminfo", 1 << 20).splitlines():
            if line.startswith("MemAvailable:"):
                kib = integer(line.split()[1])
                if kib is not None:
                    return kib * 1024
    except (OSError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


# Special tokens of the chat templates the synthetic tokenizer supports (LLaMA-Factory template names).
LLAMA3_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
]
CHATML_TOKENS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"]

FUNCTION_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "an",
    "which",
    "can",
    "will",
    "not",
    "you",
    "your",
    "we",
]


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 1.5, 1.5, 1, 0.8, 0.2, 0.2, 0.1, 0.1]
    return ["".join(rng.choices(letters, weights, k=rng.randint(2, 9))) for _ in range(n)]


def _sentence(rng: random.Random, words: list[str], n_words: int) -> str:
    out = []
    for _ in range(n_words):
        if rng.random() < 0.45:
            out.append(rng.choice(FUNCTION_WORDS))
        else:  # Zipf-like: low indices much more frequent
            out.append(words[min(len(words) - 1, int(rng.paretovariate(1.1)) - 1)])
    text = " ".join(out)
    return text[:1].upper() + text[1:] + "."


def build_tokenizer(out_dir: Path, vocab_size: int = 32000, seed: int = 0) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    words = _pseudo_words(rng, 20000)
    corpus = [_sentence(rng, words, rng.randint(8, 60)) for _ in range(30000)]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=LLAMA3_TOKENS + CHATML_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
    )
    fast.save_pretrained(out_dir)


def build_model(out_dir: Path, config: dict[str, Any], device: str, dtype_name: str = "bfloat16") -> int:
    """Random-init weights with the given config.json contents; returns the parameter count."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type = config.get("model_type", "llama")
    cfg = AutoConfig.for_model(model_type, **{k: v for k, v in config.items() if k != "model_type"})
    dtype = getattr(torch, dtype_name)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(out_dir, safe_serialization=True)
    count = sum(p.numel() for p in model.parameters())
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return count


def _lengths(rng: random.Random) -> tuple[int, int, int]:
    """One sample's token budget: (total, prompt, input) lengths, lognormal (median ~150 tokens with the
    template, long tail to ~1000), 40% of the prompts with an input."""
    total = int(min(1000, max(25, rng.lognormvariate(math.log(140), 0.6))))
    prompt_len = max(5, int(total * rng.uniform(0.15, 0.45)))
    input_len = int(prompt_len * 0.5) if rng.random() < 0.4 else 0
    return total, prompt_len, input_len


def _words_for(rng: random.Random, words: list[str], tokens: int) -> str:
    return _sentence(rng, words, max(3, int(tokens * 0.75)))  # ~0.75 words a token


def _alpaca_row(rng: random.Random, words: list[str]) -> dict[str, Any]:
    total, prompt_len, input_len = _lengths(rng)
    return {
        "instruction": _words_for(rng, words, prompt_len - input_len),
        "input": _words_for(rng, words, input_len) if input_len else "",
        "output": _words_for(rng, words, total - prompt_len),
    }


def _pairwise_row(rng: random.Random, words: list[str]) -> dict[str, Any]:
    """A prompt with two responses of independent lengths (the rejected one drawn as the chosen one is)."""
    row = _alpaca_row(rng, words)
    total, prompt_len, _ = _lengths(rng)
    return {
        "instruction": row["instruction"],
        "input": row["input"],
        "chosen": row["output"],
        "rejected": _words_for(rng, words, max(5, total - prompt_len)),
    }


def _kto_row(rng: random.Random, words: list[str]) -> dict[str, Any]:
    """An Alpaca row with a bool `kto_tag` (desirable or not, half each): LLaMA-Factory reads a KTO example
    only where the tag is a real bool (converter.py `isinstance(..., bool)`)."""
    return {**_alpaca_row(rng, words), "kto_tag": rng.random() < 0.5}


def _text_row(rng: random.Random, words: list[str]) -> dict[str, Any]:
    total, _, _ = _lengths(rng)
    return {"text": _words_for(rng, words, total)}


_ROWS = {
    synthetic_meta.ALPACA.dataset: _alpaca_row,
    synthetic_meta.PAIRWISE.dataset: _pairwise_row,
    synthetic_meta.KTO.dataset: _kto_row,
    synthetic_meta.TEXT.dataset: _text_row,
}


def dataset_rows(kind: synthetic_meta.DataKind, rows: int, seed: int = 0) -> list[dict[str, Any]]:
    """`rows` samples of the kind's format (deterministic for a seed)."""
    rng = random.Random(seed)
    words = _pseudo_words(rng, 20000)
    make = _ROWS[kind.dataset]
    return [make(rng, words) for _ in range(rows)]


def build_dataset(out_dir: Path, rows: int = 4000, seed: int = 0, kind: synthetic_meta.DataKind | None = None) -> str:
    """The kind's rows (Alpaca-format SFT data by default) and its dataset_info.json; returns the dataset's
    name."""
    kind = kind or synthetic_meta.ALPACA
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / kind.info["file_name"]).write_text(json.dumps(dataset_rows(kind, rows, seed)))
    (out_dir / "dataset_info.json").write_text(json.dumps({kind.dataset: kind.info}))
    return kind.dataset
