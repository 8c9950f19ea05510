"""How long a 100k-sample local dataset takes to profile (sampled), cold and from the cache.

python bench/data/profile_speed.py > bench/data/profile_speed.md

Each dataset is written, and the rows that made it freed, before any run is timed (rows held alive would make
every garbage collection during the run walk them: a cost of this script, not of the profile). A cold run has
an empty cache folder; the operating system's page cache is warm in both (the file was just written). The
median of `RUNS` runs of each kind is printed, with the fastest and slowest.
"""

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cfgopt.job.data_profile import profile
from cfgopt.job.data_tokens import ratio_counter

ROWS = 100_000
RUNS = 5
WORDS = ["the", "model", "reads", "a", "config", "and", "trains", "on", "data", "with", "a", "cutoff", "length"]


def _write(path: Path, rng: random.Random) -> int:
    rows = [
        {
            "instruction": " ".join(rng.choices(WORDS, k=rng.randint(5, 60))),
            "input": "",
            "output": " ".join(rng.choices(WORDS, k=rng.randint(20, 600))),
        }
        for _ in range(ROWS)
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows) if path.suffix == ".jsonl" else json.dumps(rows)
    path.write_text(text)
    return len(text)


def _time(folder: Path, cache: Path, cold: bool) -> tuple[float, int]:
    os.environ["CFGOPT_CACHE_DIR"] = tempfile.mkdtemp(dir=cache) if cold else str(cache / "kept")
    start = time.perf_counter()
    result = profile(["d"], folder, ratio_counter("qwen"), [folder])
    return time.perf_counter() - start, len(result.samples)


def main() -> None:
    rng = random.Random(1)
    print("| format | dataset | run | sample | time (median of 5) | fastest - slowest |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = Path(tmp) / "data", Path(tmp) / "cache"
        folder.mkdir()
        cache.mkdir()
        for name, suffix in (("jsonl", ".jsonl"), ("json", ".json")):
            size = _write(folder / f"d{suffix}", rng) / 2**20
            (folder / "dataset_info.json").write_text(json.dumps({"d": {"file_name": f"d{suffix}"}}))
            _time(folder, cache, cold=False)  # fills the kept cache
            for run in ("cold", "cached"):
                times, sampled = zip(*(_time(folder, cache, cold=run == "cold") for _ in range(RUNS)), strict=True)
                print(
                    f"| {name} | {ROWS} rows, {size:.0f} MiB | {run} | {sampled[0]} sampled "
                    f"| {statistics.median(times):.2f} s | {min(times):.2f} - {max(times):.2f} s |"
                )
            (folder / f"d{suffix}").unlink()
            shutil.rmtree(cache / "kept")


if __name__ == "__main__":
    main()
