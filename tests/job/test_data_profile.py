"""The data profile (cfgopt.job.data_profile, cfgopt.job.data_lengths): LLaMA-Factory's dataset resolution, the formats,
truncation as `infer_seqlen` cuts, padding, sampling and the cache. The fixtures' profiles are pinned in
fixtures/data/<case>/profile.json; regenerate with `python tests/job/test_data_profile.py --write`."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

from cfgopt.job import data_lengths, data_profile
from cfgopt.job.data_profile import DataProfile, NotLocal, Sample
from cfgopt.job.settings import Settings
from cfgopt.project.loader import load_job

ROOT = Path(__file__).resolve().parents[2]  # tests/job/: run as a script too (--write)
CASES = ROOT / "fixtures" / "data"


def _profile_of(config: Path):
    job = load_job(config, Settings(target_name="h200", gpus=1))
    return job, job.data_profile


def _golden(case: Path) -> dict:
    job, profile = _profile_of(case / "train.yaml")
    assert isinstance(profile, DataProfile), profile
    return data_lengths.summary(profile, job.value("cutoff_len"), job.value("per_device_train_batch_size"))


@pytest.fixture(autouse=True)
def _in_case_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CFGOPT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir()))
def test_golden_profiles(case, monkeypatch):
    monkeypatch.chdir(CASES / case)
    expected = json.loads((CASES / case / "profile.json").read_text())
    assert _golden(CASES / case) == expected


def test_cache_is_used_and_keyed_by_content(tmp_path, monkeypatch):
    monkeypatch.chdir(CASES / "short")
    first = _golden(CASES / "short")
    stored = list(data_profile.cache_dir().glob("*.json"))
    assert len(stored) == 1
    assert _golden(CASES / "short") == first  # read back from the cache
    data = json.loads(stored[0].read_text())
    data["rows"] = 12345
    stored[0].write_text(json.dumps(data))
    assert _golden(CASES / "short")["rows"] == 12345  # the cache, not the file, answered


def _project(tmp_path: Path, rows: str, entry: dict, name: str = "d.jsonl", yaml_extra: str = "") -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dataset_info.json").write_text(json.dumps({"d": {"file_name": name, **entry}}))
    (tmp_path / "data" / name).write_text(rows)
    config = tmp_path / "train.yaml"
    config.write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
        f"dataset: d\ncutoff_len: 64\nper_device_train_batch_size: 2\noutput_dir: o\n{yaml_extra}"
    )
    return config


def test_alpaca_columns_and_history(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    row = {"q": "a" * 476, "a": "b" * 952, "h": [["c" * 476, "d" * 476]]}
    config = _project(tmp_path, json.dumps(row) + "\n", {"columns": {"prompt": "q", "response": "a", "history": "h"}})
    _, profile = _profile_of(config)
    (sample,) = profile.samples
    assert sample.turns == ((100 + 8, 100 + 2), (100 + 8, 200 + 2))  # 4.76 characters a token, template allowance


def test_not_local_and_problems(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _project(tmp_path, "", {"hf_hub_url": "org/d"})
    assert isinstance(_profile_of(config)[1], NotLocal)
    config.write_text(config.read_text().replace("dataset: d", "dataset: missing"))
    _, profile = _profile_of(config)
    assert "Undefined dataset missing" in profile.problems[0].text and profile.problems[0].stops


def test_empty_and_unreadable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _project(tmp_path, "", {})
    _, profile = _profile_of(config)
    assert profile.rows == 0 and "holds no rows" in profile.problems[0].text and profile.problems[0].stops
    (tmp_path / "data" / "d.jsonl").write_text("{not json\n")
    _, profile = _profile_of(config)
    # cfgopt's reader fails where `datasets` may not (a JSON line broken over two lines): not certain
    assert "cannot be read" in profile.problems[0].text and not profile.problems[0].stops


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_not_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _project(tmp_path, "", {})
    (tmp_path / "data" / "d.jsonl").unlink()
    os.mkfifo(tmp_path / "data" / "d.jsonl")
    _, profile = _profile_of(config)  # returns: the bounded reader refuses a FIFO
    assert "not a regular file" in profile.problems[0].text


def test_parquet_is_said_not_profiled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _project(tmp_path, "", {}, name="d.parquet")
    result = _profile_of(config)[1]
    assert isinstance(result, NotLocal) and "not profiled" in result.reason


def test_csv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _project(tmp_path, "instruction,input,output\nhi,,there\n", {}, name="d.csv")
    assert _profile_of(config)[1].rows == 1


def test_large_dataset_is_sampled_with_its_longest_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"instruction": "x", "output": "y" * 10} for _ in range(5000)]
    rows[4321]["output"] = "z" * 47600  # 10000 tokens: the longest, drawn or not
    config = _project(tmp_path, "".join(json.dumps(r) + "\n" for r in rows), {})
    _, profile = _profile_of(config)
    assert profile.rows == 5000 and len(profile.samples) == data_profile.SAMPLE_SIZE and profile.sampled
    assert data_lengths.lengths(profile, 64).longest == 0 + 8 + 10000 + 2  # "x" rounds to no token


@pytest.mark.parametrize("layout", ["lines", "list", "indented list"])
def test_the_seeded_sample_is_the_same_rows_in_every_layout(tmp_path, monkeypatch, layout):
    """JSON lines are parsed only where drawn and a list's rows sized without `str()`: the sample is still
    `SAMPLE_SIZE` rows drawn by index with the seed, and the tail the rows with the longest text."""
    monkeypatch.chdir(tmp_path)
    rows = [{"instruction": f"row {i}", "output": "y" * (i % 97)} for i in range(3000)]
    rows[2999]["output"] = "z" * 4760  # the longest (1000 tokens), and not drawn
    text = {
        "lines": "".join(json.dumps(r) + ("\r\n" if i % 2 else "\n \n") for i, r in enumerate(rows)),
        "list": json.dumps(rows),
        "indented list": " \n" + json.dumps(rows, indent=2) + "\n",
    }[layout]
    config = _project(tmp_path, text, {}, name="d.jsonl" if layout == "lines" else "d.json")
    _, profile = _profile_of(config)
    drawn = sorted(random.Random(data_profile.SEED).sample(range(3000), data_profile.SAMPLE_SIZE))
    assert 2999 not in drawn and profile.rows == 3000
    assert [s.turns[0][0] for s in profile.samples] == [round(len(f"row {i}") / 4.76) + 8 for i in drawn]
    assert profile.tail[0].turns == ((round(8 / 4.76) + 8, 1000 + 2),)
    assert len(profile.tail) == data_profile.TAIL_SIZE


def test_a_list_too_deep_for_marshal_is_sized_by_its_text():
    """From Python 3.13 json parses rows nested deeper than marshal's 2000 levels: such a list is sized by str()."""
    deep: list = []
    for _ in range(2100):
        deep = [deep]
    rows = [{"instruction": "x" * (i % 50)} for i in range(2100)]
    drawn = set(random.Random(data_profile.SEED).sample(range(2100), data_profile.SAMPLE_SIZE))
    longest = min(set(range(2100)) - drawn)
    rows[longest]["instruction"] = "x" * 500
    rows[0]["history"] = deep
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 5000))  # str() of 2100 levels, as Python 3.13's own limits allow
    try:
        measured = data_profile._list_rows(rows)
    finally:
        sys.setrecursionlimit(limit)
    assert measured.rows == 2100 and measured.tail[0] is rows[longest]


@pytest.mark.parametrize(
    "text",
    [
        '[{"instruction": "a"},]',  # a trailing comma
        '[{"instruction": "a"} {"instruction": "b"}]',
        '[{"instruction": "a"}] x',  # extra data
        '[{"instruction": "a"}, {"instruction": "b"',  # cut short
        '[{"instruction": "a"}, {"instruction": "\u00e9\x01"}]',  # a raw control character
        '\u3000[{"instruction": "a"}]',  # not json's whitespace before the list
        "[" * 100_000 + "]" * 100_000,  # nested too deeply
        '[{"instruction": 1' + "0" * 5000 + "}]",  # an integer too long to convert
    ],
)
def test_a_malformed_list_says_what_json_says(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    config = _project(tmp_path, text, {}, name="d.json")
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        said = str(exc).split("\n")[0][:160]
    _, profile = _profile_of(config)
    assert [p.text for p in profile.problems] == [f"`d`: d.json cannot be read ({said})"]


def test_a_file_that_is_not_utf8_is_refused_whole(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = "".join(json.dumps({"instruction": "x", "output": "y"}) + "\n" for _ in range(3000))
    config = _project(tmp_path, "", {})
    (tmp_path / "data" / "d.jsonl").write_bytes(rows.encode() + b'{"instruction": "\xff"}\n')  # not drawn
    _, profile = _profile_of(config)
    assert "cannot be read ('utf-8' codec can't decode byte 0xff" in profile.problems[0].text


def test_the_bounded_reader_reads_a_file_at_once_and_a_pseudo_file_in_chunks(tmp_path):
    from cfgopt.text.user_files import UnsafeFileError, read_bounded

    big = os.urandom(3 * 1024 * 1024 + 5)
    (tmp_path / "big").write_bytes(big)
    assert read_bounded(tmp_path / "big", len(big)) == big
    with pytest.raises(UnsafeFileError):
        read_bounded(tmp_path / "big", len(big) - 1)
    if Path("/proc/self/status").exists():  # reports size 0
        assert b"Name:" in read_bounded("/proc/self/status")


def test_local_tokenizer_json_counts_exactly(tmp_path, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(model / "tokenizer.json"))
    config = _project(tmp_path, json.dumps({"instruction": "a b a", "output": "b b"}) + "\n", {})
    config.write_text(config.read_text().replace("Qwen/Qwen2.5-0.5B", "model"))
    _, profile = _profile_of(config)
    assert profile.exact and profile.samples[0].turns == ((3 + 8, 2 + 2),)


def test_infer_seqlen_matches_llamafactory():
    import importlib.util

    spec = importlib.util.find_spec("llamafactory")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llamafactory is not installed")
    path = Path(spec.submodule_search_locations[0]) / "data" / "processor" / "processor_utils.py"
    # the file alone: importing the package pulls torch and torchaudio; this file imports only the stdlib
    loaded = importlib.util.spec_from_file_location("lf_processor_utils", path)
    processor_utils = importlib.util.module_from_spec(loaded)
    sys.modules["lf_processor_utils"] = processor_utils  # its dataclasses look their module up
    loaded.loader.exec_module(processor_utils)
    for src in (0, 10, 300, 900):
        for tgt in (0, 5, 400, 2000):
            for cutoff in (16, 512, 1024):
                assert data_lengths.infer_seqlen(src, tgt, cutoff) == processor_utils.infer_seqlen(src, tgt, cutoff)


def test_cut_shares_and_padding():
    profile = DataProfile(
        ("d",), ("d.json",), "alpaca", False, 2, (Sample(((10, 100),)), Sample(((10, 10),))), (), "", False
    )
    measured = data_lengths.lengths(profile, 64)
    assert measured.truncated == 0.5 and measured.response_cut == 0.5 and measured.prompt_cut == 0.0
    pad = data_lengths.padding(profile, 2048, 2)  # lengths 110 and 20 in every batch of 2: padded to 112
    assert pad.expected_longest == 112 and pad.share == pytest.approx(1 - 130 / 224)


def _write() -> None:
    for case in sorted(CASES.iterdir()):
        os.chdir(case)
        (case / "profile.json").write_text(json.dumps(_golden(case), indent=2) + "\n")


if __name__ == "__main__" and "--write" in sys.argv:
    os.environ["CFGOPT_CACHE_DIR"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cfgopt-golden-cache")
    _write()
