"""How long a 100k-sample local dataset takes to profile (sampled), cold and from the cache.

python bench/data/profile_speed.py > bench/data/profile_speed.md
"""

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cfgopt.data_profile import profile
from cfgopt.data_tokens import ratio_counter

ROWS = 100_000


def main() -> None:
    rng = random.Random(1)
    words = ["the", "model", "reads", "a", "config", "and", "trains", "on", "data", "with", "a", "cutoff", "length"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CFGOPT_CACHE_DIR"] = os.path.join(tmp, "cache")
        folder = Path(tmp)
        for name, suffix in (("jsonl", ".jsonl"), ("json", ".json")):
            rows = [
                {
                    "instruction": " ".join(rng.choices(words, k=rng.randint(5, 60))),
                    "input": "",
                    "output": " ".join(rng.choices(words, k=rng.randint(20, 600))),
                }
                for _ in range(ROWS)
            ]
            text = "".join(json.dumps(r) + "\n" for r in rows) if suffix == ".jsonl" else json.dumps(rows)
            (folder / f"d{suffix}").write_text(text)
            (folder / "dataset_info.json").write_text(json.dumps({"d": {"file_name": f"d{suffix}"}}))
            for run in ("cold", "cached"):
                start = time.perf_counter()
                result = profile(["d"], folder, ratio_counter("qwen"), [folder])
                took = time.perf_counter() - start
                size = len(text) / 2**20
                print(
                    f"| {name} | {ROWS} rows, {size:.0f} MiB | {run} | {len(result.samples)} sampled | {took:.2f} s |"
                )


if __name__ == "__main__":
    print("| format | dataset | run | sample | time |")
    print("| --- | --- | --- | --- | --- |")
    main()
