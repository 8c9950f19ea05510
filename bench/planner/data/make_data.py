"""Local datasets of set length profiles for the H200 checks of issue 36, Alpaca format, English-like prose,
seeded: `short` (responses of about 30 tokens) and `long` (about 1,300) for the plan's expected gain against the
measured one; `pairwise` (DPO: chosen and rejected of 400 tokens, +-3%) and `kto` (KTO-tagged, the same
lengths) for the memory estimate with profiled data.

Usage: python bench/planner/data/make_data.py [ROWS]   (writes bench/planner/data/<name>/data/; not committed)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "at",
    "this",
    "from",
    "or",
    "an",
    "are",
    "which",
    "but",
    "not",
    "have",
    "they",
    "one",
    "had",
    "model",
    "data",
    "train",
    "loss",
    "batch",
    "memory",
    "token",
    "layer",
    "value",
    "step",
    "rate",
    "weight",
    "answer",
    "question",
    "explain",
    "write",
    "list",
    "describe",
    "example",
    "number",
    "result",
    "method",
    "system",
    "process",
    "change",
    "order",
    "group",
    "point",
    "state",
    "form",
    "line",
    "part",
    "case",
]
CHARS_PER_TOKEN = 4.76  # Qwen's latin ratio (bench/data/char_ratios.md): the profile counts with it


def _text(rng: random.Random, tokens: int) -> str:
    out, size = [], 0
    while size < tokens * CHARS_PER_TOKEN:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out).capitalize() + "."


def _row(rng: random.Random, response_median: float, kind: str) -> dict:
    # the memory checks set their lengths (a narrow spread: a 4-step run meets the longest sample's length);
    # the gain checks draw them as SFT data spreads
    spread = 0.03 if kind in ("pairwise", "kto") else 0.45
    prompt = _text(rng, max(4, round(rng.lognormvariate(3.0, spread if spread < 0.1 else 0.5))))

    def answer() -> str:
        return _text(rng, max(4, round(rng.lognormvariate(response_median, spread))))

    if kind == "pairwise":
        return {"instruction": prompt, "input": "", "chosen": answer(), "rejected": answer()}
    row = {"instruction": prompt, "input": "", "output": answer()}
    if kind == "kto":
        row["label"] = rng.random() < 0.5
    return row


_ENTRIES = {
    "sft": {},
    "pairwise": {
        "ranking": True,
        "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"},
    },
    "kto": {"columns": {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "label"}},
}


def make(name: str, rows: int, response_median: float, seed: int, kind: str = "sft") -> Path:
    rng = random.Random(seed)
    folder = HERE / name / "data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps([_row(rng, response_median, kind) for _ in range(rows)]))
    entry = {"file_name": f"{name}.json", **_ENTRIES[kind]}
    (folder / "dataset_info.json").write_text(json.dumps({name: entry}, indent=2))
    return folder


if __name__ == "__main__":
    import math

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    sets = (("short", 30, 1, "sft"), ("long", 1300, 2, "sft"), ("pairwise", 400, 3, "pairwise"), ("kto", 400, 4, "kto"))
    for name, median, seed, kind in sets:
        print("wrote", make(name, rows, math.log(median), seed, kind))
