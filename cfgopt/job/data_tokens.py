"""Counting a dataset's tokens: the model's own tokenizer when its files are local, else characters per token.

1. A local model folder's `tokenizer.json` (read through the bounded reader) is loaded with the `tokenizers`
   package, which needs no torch; the count is exact for the text (the template's tokens are added apart,
   `TEMPLATE_TOKENS`). This module is the only one that imports `tokenizers`, and only then.
2. Otherwise a ratio of characters per token, per tokenizer family and script, measured with the real Qwen
   (151,643 ranks) and Llama 3 (128,256 tokens) tokenizers on LLaMA-Factory's demo datasets:
   `bench/data/char_ratios.md` (the command is in `bench/data/measure_char_ratios.py`). The error per sample is
   stated with every count (`Counter.how`): median 8-11%, 90th percentile 21-28% on prose; code is worse (p90
   36-44%). A family not measured (Llama 2, Mistral, Gemma...) takes Llama 3's ratios and says so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from cfgopt.text.record import Record
from cfgopt.text.user_files import read_bounded

# (latin, CJK) characters per token, the median over samples (bench/data/char_ratios.md: alpaca_en_demo and
# alpaca_zh_demo of LLaMA-Factory at ff6d4d12)
CHARS_PER_TOKEN = {"qwen": (4.76, 1.72), "llama3": (4.79, 1.34)}
RATIO_ERROR = "per-sample error median 11%, p90 28% (code: p90 44%)"  # the worst of the rows measured
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024  # Gemma's tokenizer.json is 34 MB; Qwen's 7 MB
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")

# Tokens a chat template adds to one turn around the text: Qwen's `<|im_start|>user\n ... <|im_end|>\n
# <|im_start|>assistant\n` is 8 before the response and `<|im_end|>\n` 2 after it; Llama 3's header tokens
# are 9 and 1 (llamafactory 0.9.5 data/template.py L1946-1948, L1412-1421). An allowance, not a rendering:
# LLaMA-Factory tokenizes each turn's template text and content as one string (template.py `_encode`,
# L132-170), and its 123 templates differ in prefix, system markup, default system prompt (`qwen` has one)
# and thought tags, so every output states the allowance (`template_allowance`).
TEMPLATE_TOKENS = (8, 2)  # (prompt side, response side) per turn
TEMPLATE_NOT_COUNTED = "not the job's template: its prefix, system markup and default system prompt are not counted"


def template_allowance() -> str:
    """What the counts add for the template, as every output says it after the tokenizer."""
    before, after = TEMPLATE_TOKENS
    return (
        f"plus a fixed template allowance of {before + after} tokens per turn ({before} before the response, "
        f"{after} after), {TEMPLATE_NOT_COUNTED}"
    )


class Counter(Record):
    """How a text's tokens are counted: `count(text)`, what it is (for outputs), and a key for the cache."""

    count: Callable[[str], int]
    how: str
    exact: bool
    key: str


def _family(model: str) -> tuple[str, bool]:
    """(the measured family whose ratios a model takes, whether it is that family)."""
    name = model.lower()
    if "qwen" in name or "qwq" in name:
        return "qwen", True
    if re.search(r"llama-?3|llama3", name):
        return "llama3", True
    return "llama3", False


def ratio_counter(model: str) -> Counter:
    family, measured = _family(model)
    latin, cjk = CHARS_PER_TOKEN[family]

    def count(text: str) -> int:
        wide = len(_CJK.findall(text)) if not text.isascii() else 0
        return round((len(text) - wide) / latin + wide / cjk)

    what = family if measured else f"{family}'s (family not measured)"
    how = f"estimated: {what} {latin} characters per token ({cjk} for CJK), {RATIO_ERROR}"
    return Counter(count, how, False, f"ratio:{family}")


def _tokenizer_file(model: str, folder: Path | None) -> Path | None:
    path = Path(model.strip()).expanduser()
    candidates = [path] if path.is_absolute() else [p for p in ((folder / path) if folder else None, path) if p]
    for candidate in candidates:
        if (candidate / "tokenizer.json").is_file():
            return candidate / "tokenizer.json"
    return None


def counter_for(model: object, folder: Path | None = None) -> Counter:
    """The model's tokenizer when `model_name_or_path` is a local folder with a readable `tokenizer.json` (and
    the `tokenizers` package is installed), else the ratio of its family."""
    name = model if isinstance(model, str) else ""
    found = _tokenizer_file(name, folder) if name else None
    if found is not None:
        try:
            raw = read_bounded(found, MAX_TOKENIZER_BYTES)
            from tokenizers import Tokenizer  # only here: a local tokenizer.json to read

            tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
        except Exception:  # noqa: BLE001 (tokenizers raises a bare Exception on a bad file; the ratio stands in)
            return ratio_counter(name)

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

        return Counter(count, f"counted: {found.parent.name}/tokenizer.json", True, hashlib.sha256(raw).hexdigest())
    return ratio_counter(name)
