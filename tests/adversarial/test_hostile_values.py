"""Hostile values inside well-formed files (cfgopt issue 26 items 9, 10, 11, 13, 20, 21, 24): NaN, infinities,
`1e300`, 400-digit integers, lists where a string belongs, lone surrogates, control characters, UTF-16 files.
Every command answers with findings or a one-line message and exit 0/1/2, never a traceback or an "internal
error"; every output format writes valid output in its encoding; what a file holds cannot forge report lines.
The last test is a generator over the fields the memory model and the rules read (docs/limits.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cfgopt.cli import main

FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit")

TRAIN_YAML = """\
model_name_or_path: Qwen/Qwen3-4B
stage: sft
do_train: true
finetuning_type: full
deepspeed: ds.json
dataset: alpaca_en_demo
template: qwen3
cutoff_len: 2048
output_dir: out
logging_steps: 10
save_steps: 500
per_device_train_batch_size: 2
gradient_accumulation_steps: 4
learning_rate: 1.0e-5
num_train_epochs: 3.0
bf16: true
"""
DS_JSON = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 500000000},
}


class Run:
    """One in-process run of the CLI with stdout as a terminal would take it: strict UTF-8, so a character
    that cannot be written fails the run (stderr backslash-escapes, as Python's own stderr does)."""

    def __init__(self, argv: list[str], stdin: bytes | None = None) -> None:
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
        err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", newline="")
        saved = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    self.code = main(argv)
                except SystemExit as exc:
                    self.code = exc.code
                out.flush()
                err.flush()
        finally:
            sys.stdin = saved
        self.out = out.buffer.getvalue().decode("utf-8")
        self.err = err.buffer.getvalue().decode("utf-8")

    def assert_clean(self) -> Run:
        text = self.out + self.err
        assert "Traceback" not in text and "internal error" not in text, text[-2000:]
        assert self.code in (0, 1, 2), (self.code, text[-2000:])
        return self


def write_job(folder: Path, yaml_text: str = TRAIN_YAML, ds_text: str | None = None) -> Path:
    (folder / "train.yaml").write_text(yaml_text)
    (folder / "ds.json").write_text(ds_text if ds_text is not None else json.dumps(DS_JSON, indent=2))
    return folder / "train.yaml"


def with_value(key: str, value: str, text: str = TRAIN_YAML) -> str:
    lines = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
    return "\n".join([*lines, f"{key}: {value}"]) + "\n"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def findings(run: Run) -> list[dict]:
    return json.loads(run.out)["diagnostics"]


# --------------------------------------------------------------------------- 9. a list for flash_attn


def test_flash_attn_list_is_no_crash_and_no_estimate(tmp_path: Path) -> None:
    write_job(tmp_path, with_value("flash_attn", "[fa2]"))
    run = Run(["estimate", "--target", "h200", "train.yaml"]).assert_clean()
    assert "not modelled" in run.out and "flash_attn ['fa2'] (not one of its choices)" in run.out
    lint = Run(["lint", "--select", "ALL", "--target", "h200", "--format", "json", "train.yaml"]).assert_clean()
    assert not any(d["code"].startswith("MEM") for d in findings(lint))  # no estimate: the memory rules stay quiet

    from cfgopt.memory.config_values import attention_of

    assert attention_of({"flash_attn": ["fa2"]}) == "sdpa"


# --------------------------------------------------------------------------- 10. sizes beyond the float range


@pytest.mark.parametrize(
    ("key", "value"),
    [("per_device_train_batch_size", "1e300"), ("cutoff_len", "1.0e308"), ("cutoff_len", "1" + "0" * 400)],
)
def test_huge_sizes_are_no_overflow(tmp_path: Path, key: str, value: str) -> None:
    write_job(tmp_path, with_value(key, value))
    run = Run(["estimate", "--target", "h200", "train.yaml"]).assert_clean()
    assert run.code == 2 and f"`{key}` is " in run.err and "no estimate" in run.err
    assert len(run.err.strip().splitlines()) == 1
    Run(["lint", "--select", "ALL", "--target", "h200", "train.yaml"]).assert_clean()
    Run(["fix", "--select", "ALL", "--unsafe-fixes", "--target", "h200", "train.yaml"]).assert_clean()


def test_memory_model_refuses_counts_it_cannot_count_with() -> None:
    from cfgopt.memory import estimate as memory

    config = {"per_device_train_batch_size": 10**400, "cutoff_len": float("nan")}
    assert len(memory.unusable_sizes(config)) == 2
    assert memory.unusable_sizes({"per_device_train_batch_size": 4, "cutoff_len": 2048}) == []
    assert "digits" in memory.unusable_sizes({"per_device_train_batch_size": 10**5000, "cutoff_len": 1})[0]


def test_estimate_refuses_a_gpu_count_beyond_the_model(tmp_path: Path) -> None:
    write_job(tmp_path)
    run = Run(["estimate", "--target", "h200", "--gpus", "1" + "0" * 400, "train.yaml"]).assert_clean()
    assert run.code == 2 and "--gpus: must be at most 1048576" in run.err


# --------------------------------------------------------------------------- 13. NaN / infinite batch sizes, steps


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_ds007_reads_non_finite_batch_sizes_as_deepspeed_does(tmp_path: Path, value: str) -> None:
    text = json.dumps({**DS_JSON, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})
    write_job(tmp_path, ds_text=text.replace('"train_batch_size": "auto"', f'"train_batch_size": {value}'))
    run = Run(["lint", "--select", "DS007", "--format", "json", "ds.json"]).assert_clean()
    ds007 = [d for d in findings(run) if d["code"] == "DS007"]
    assert len(ds007) == 1 and ds007[0]["severity"] == "error", findings(run)
    # NaN and -inf fail DeepSpeed's `> 0` assertion; +inf fails `train == micro * accum * world`
    expected = "greater than 0" if value in ("NaN", "-Infinity") else "Check batch related parameters"
    assert expected in ds007[0]["message"]


@pytest.mark.parametrize("key", ["logging_steps", "save_steps"])
@pytest.mark.parametrize("value", [".inf", "1e400"])
def test_lf031_infinite_steps_are_transformers_overflow(tmp_path: Path, key: str, value: str) -> None:
    write_job(tmp_path, with_value(key, value))
    run = Run(["lint", "--select", "LF031", "--format", "json", "train.yaml"]).assert_clean()
    [finding] = [d for d in findings(run) if d["code"] == "LF031"]
    assert f"`{key}` is infinite: its `int()` raises OverflowError" in finding["message"]


def test_lf031_huge_integer_steps_pass_as_in_transformers(tmp_path: Path) -> None:
    write_job(tmp_path, with_value("logging_steps", "1" + "0" * 400))
    run = Run(["lint", "--select", "LF031", "--format", "json", "train.yaml"]).assert_clean()
    assert not findings(run)  # TrainingArguments: int(10**400) == 10**400, no error


# --------------------------------------------------------------------------- 11 / 21. what keys can do to output

HOSTILE_KEYS_JSON = (
    '{"train_micro_batch_size_per_gpu": "auto", "\\ud800": 1, '
    '"a\\u001b[31mX\\nds.json:1:1: error FAKE\\u0085\\u202e": 2, "zero_optimization": {"stage": 2}}'
)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_writes_valid_output_for_hostile_keys(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "ds.json").write_text(HOSTILE_KEYS_JSON)
    run = Run(["lint", "--format", fmt, "ds.json"]).assert_clean()  # strict UTF-8: a lone surrogate would fail
    assert run.code == 1
    if fmt in ("json", "sarif"):
        json.loads(run.out)
    elif fmt == "json-lines":
        assert len([json.loads(line) for line in run.out.splitlines()]) == 2
    elif fmt == "junit":
        ET.fromstring(run.out.split("\n", 1)[1])  # XML 1.0 allows none of the control characters raw
    else:
        assert "\x1b" not in run.out and "\x85" not in run.out and "\u202e" not in run.out
        assert "\\x1b[31mX\\x0ads.json:1:1: error FAKE\\x85\\u202e" in run.out
        assert "\\ud800" in run.out
        # no line of the report starts with the forged finding
        assert not any(line.startswith("ds.json:1:1: error FAKE") for line in run.out.splitlines())


def test_machine_formats_keep_the_key_itself(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(HOSTILE_KEYS_JSON)
    keys = {d["key"] for d in findings(Run(["lint", "--format", "json", "ds.json"]).assert_clean())}
    assert keys == {"\ud800", "a\x1b[31mX\nds.json:1:1: error FAKE\x85\u202e"}  # JSON's own escaping round-trips


def test_code_frame_caret_stays_under_an_escaped_key(tmp_path: Path) -> None:
    # json.load takes a raw C1 control (U+009B, a terminal's CSI) and U+2028 inside a string
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2},\n  "a\x9b2J\u2028b": 1}\n')
    run = Run(["lint", "--format", "full", "ds.json"]).assert_clean()
    lines = run.out.splitlines()
    frame = next(i for i, line in enumerate(lines) if line.startswith("2 |"))
    text, caret = lines[frame], lines[frame + 1]
    assert "\x9b" not in run.out and "\u2028" not in run.out
    start = caret.index("^")
    assert text[start:].startswith('"a\\x9b2J\\u2028b"')
    assert len(caret) - start == len('"a\\x9b2J\\u2028b"')


def test_problems_on_stderr_are_escaped(tmp_path: Path) -> None:
    name = "bad\x1b[31m.yaml"
    (tmp_path / name).write_bytes(b"\xff\xfe\x00")
    run = Run(["lint", name]).assert_clean()
    assert run.code == 2 and "bad\\x1b[31m.yaml" in run.err and "\x1b" not in run.err


# --------------------------------------------------------------------------- 20. line breaks by syntax


def test_json_lines_ignore_unicode_separators_inside_strings(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(
        '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "comment": "a\u2028b\x85c\u2029",\n'
        '  "zero_optimization": {"stage": 2, "bogus_key": 1}\n}\n'
    )
    run = Run(["lint", "--format", "json", "ds.json"]).assert_clean()
    positions = {d["code"]: (d["line"], d["column"]) for d in findings(run)}
    assert positions["DS001"] == (4, 37)  # json.load's own lines: U+2028 / U+0085 are characters of the string
    fixed = Run(["fix", "--select", "DS001", "--unsafe-fixes", "ds.json"]).assert_clean()
    assert "not fixed" not in fixed.err and "would fix: DS001" in fixed.err


def test_yaml_still_breaks_lines_where_pyyaml_does(tmp_path: Path) -> None:
    text = "# a\u2028# b\n" + TRAIN_YAML.replace("deepspeed: ds.json\n", "").replace("bf16: true", 'bf16: "true"')
    (tmp_path / "train.yaml").write_text(text)
    run = Run(["lint", "--format", "json", "train.yaml"]).assert_clean()
    lf002 = next(d for d in findings(run) if d["code"] == "LF002")
    assert lf002["line"] == len(TRAIN_YAML.splitlines()) + 1  # U+2028 is a line break for PyYAML
    fixed = Run(["fix", "--unsafe-fixes", "train.yaml"]).assert_clean()
    assert "line break other than" in fixed.err


def test_a_document_counts_lines_by_its_syntax() -> None:
    from cfgopt.text.document import Document

    text = "a\u2028b\rc\r\nd\ne"
    yaml_doc, json_doc, script_doc = (Document(Path(f"x{s}"), text) for s in (".yaml", ".json", ".sh"))
    assert [len(d.line_starts) for d in (yaml_doc, json_doc, script_doc)] == [5, 4, 3]
    assert yaml_doc.unusual_line_break() is not None and script_doc.unusual_line_break() is None
    assert json_doc.unusual_line_break() == "a lone CR (\\r) at line 1"
    json_doc.syntax = "yaml"  # a loader that reads another syntax sets it; the table is counted again
    assert len(json_doc.line_starts) == 5


def test_syntax_by_suffix_is_the_discovery_loader() -> None:
    from cfgopt.loaders import discovery
    from cfgopt.text.document import Document

    for suffix in (".json", ".JSON", ".sh", ".bash", ".yaml", ".yml", ".txt", ""):
        path = Path(f"cfg{suffix}")
        assert Document(path, "").syntax == discovery.loader_for(path)


# --------------------------------------------------------------------------- 24. encodings and stdin


@pytest.mark.parametrize(
    ("encoding", "words"),
    [
        ("utf-16", "UTF-16 encoded (little-endian, with a byte order mark)"),
        ("utf-16-be", "UTF-16 encoded (big-endian, no byte order mark"),
        ("utf-32", "UTF-32 encoded (little-endian, with a byte order mark)"),
    ],
)
def test_utf16_files_are_named_not_binary(tmp_path: Path, encoding: str, words: str) -> None:
    (tmp_path / "train.yaml").write_bytes(TRAIN_YAML.encode(encoding))
    run = Run(["lint", "--format", "json", "train.yaml"]).assert_clean()
    assert run.code == 2
    [problem] = json.loads(run.out)["problems"]
    assert words in problem["message"] and "re-save it as UTF-8" in problem["message"]
    assert "binary" not in problem["message"]


def test_binary_is_still_binary() -> None:
    from cfgopt.text.document import wide_encoding

    assert wide_encoding(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10) is None
    assert wide_encoding("model: m # caf\u00e9\n".encode()) is None


def test_utf16_on_stdin_is_named_as_in_a_file() -> None:
    run = Run(["lint", "-"], stdin=TRAIN_YAML.encode("utf-16")).assert_clean()
    assert run.code == 2 and "stdin.yaml: error: UTF-16 encoded" in run.err and "usage:" not in run.err


def test_fix_stdin_keeps_the_bom() -> None:
    text = "\ufeff" + TRAIN_YAML.replace("bf16: true", 'bf16: "true"').replace("deepspeed: ds.json\n", "")
    run = Run(["fix", "--unsafe-fixes", "-"], stdin=text.encode("utf-8"))
    assert run.out.startswith("\ufeff") and "bf16: true" in run.out


# --------------------------------------------------------------------------- the generator

YAML_HOSTILE = (".nan", ".inf", "-.inf", "1e400", "1" + "0" * 400, "-1" + "0" * 400, "[fa2]", "{a: 1}", "null", "true")
YAML_HOSTILE += ('"\\ud800"', '"a\\e[31m\\nx:1:1: error X\\x85\\u2028"', "-1", "0", "1.5", "1e300")
YAML_HOSTILE += ("{1: a, b: [.nan], zero_optimization: {stage: .inf}}",)  # mixed key types: no sorting them
JSON_HOSTILE = ("NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400, "[1]", '{"a": 1}', "null", "true")
JSON_HOSTILE += ('"\\ud800"', '"a\\u001b[31m\\nb"', "-1", "0", "0.5")
# What the memory model, the planner and the rules read as numbers or strings
YAML_FIELDS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "cutoff_len",
    "flash_attn",
    "finetuning_type",
    "stage",
    "lora_rank",
    "lora_target",
    "lora_dropout",
    "quantization_bit",
    "pure_bf16",
    "disable_gradient_checkpointing",
    "enable_liger_kernel",
    "packing",
    "neat_packing",
    "optim",
    "freeze_trainable_layers",
    "logging_steps",
    "save_steps",
    "eval_steps",
    "warmup_steps",
    "max_grad_norm",
    "val_size",
    "model_name_or_path",
    "deepspeed",
    "dataloader_prefetch_factor",
)
JSON_FIELDS = (
    ("train_batch_size",),
    ("train_micro_batch_size_per_gpu",),
    ("gradient_accumulation_steps",),
    ("gradient_clipping",),
    ("zero_optimization", "stage"),
    ("zero_optimization", "reduce_bucket_size"),
    ("zero_optimization", "offload_optimizer"),
    ("bf16", "enabled"),
    ("fp16", "loss_scale"),
)
LINT = ["lint", "--select", "ALL", "--target", "h200", "--format", "json", "train.yaml"]


def _json_with(paths: tuple[tuple[str, ...], ...], value: str) -> str:
    data = json.loads(json.dumps(DS_JSON))
    for path in paths:
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = "@HOSTILE@"
    return json.dumps(data).replace('"@HOSTILE@"', value)


def _yaml_with(keys: tuple[str, ...], value: str) -> str:
    text = TRAIN_YAML
    for key in keys:
        text = with_value(key, value, text)
    return text


def _groups(fields: tuple, size: int) -> list[tuple]:
    """Fields in small groups (round robin, so that related fields land apart): a value goes into a group at
    once, which keeps the run short; a crash in one field cannot hide behind another's early return for long,
    as every value meets every field."""
    count = -(-len(fields) // size)
    return [fields[i::count] for i in range(count)]


def test_generated_hostile_values_never_crash(tmp_path: Path) -> None:
    """Every hostile scalar in every field the memory model and the rules read: `lint --select ALL` (JSON
    output, which must parse) and `fix --unsafe-fixes`; `estimate` for the YAML fields; the human format for a
    share. No traceback, no internal error, exit 0, 1 or 2 (in about 10 s)."""
    cases = [(_yaml_with(g, v), None) for g in _groups(YAML_FIELDS, 4) for v in YAML_HOSTILE]
    cases += [(TRAIN_YAML, _json_with(g, v)) for g in _groups(JSON_FIELDS, 3) for v in JSON_HOSTILE]
    for i, (yaml_text, ds_text) in enumerate(cases):
        write_job(tmp_path, yaml_text, ds_text)
        json.loads(Run(LINT).assert_clean().out)
        Run(["fix", "--select", "ALL", "--unsafe-fixes", "--target", "h200", "train.yaml"]).assert_clean()
        if ds_text is None:
            Run(["estimate", "--target", "h200", "--gpus", "2", "train.yaml"]).assert_clean()
        if i % 4 == 0:
            Run(["lint", "--select", "ALL", "--target", "mi300x", "--gpus", "8", "train.yaml"]).assert_clean()


def test_a_five_thousand_digit_integer_is_a_parse_error_not_a_crash(tmp_path: Path) -> None:
    write_job(tmp_path, with_value("cutoff_len", "9" * 5000), _json_with((("train_batch_size",),), "9" * 5000))
    for argv in (LINT, ["lint", "ds.json"], ["estimate", "--target", "h200", "train.yaml"]):
        Run(argv).assert_clean()


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_writes_to_a_latin1_stream(tmp_path: Path, fmt: str) -> None:
    """A terminal or pipe that is not UTF-8 (PYTHONIOENCODING=latin-1) and a CJK key: an escape, not a
    UnicodeEncodeError; JUnit stays valid XML (ASCII with character references)."""
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "\u4e2d": 1}', encoding="utf-8")
    stream = io.TextIOWrapper(io.BytesIO(), encoding="latin-1", errors="strict", newline="")
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(io.StringIO()):
        code = main(["lint", "--format", fmt, "ds.json"])
    stream.flush()
    out = stream.buffer.getvalue().decode("latin-1")
    assert code == 1 and ("\\u4e2d" in out or "&#20013;" in out), out
    if fmt == "junit":
        ET.fromstring(out.split("\n", 1)[1])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_name_that_is_not_utf8(tmp_path: Path, fmt: str) -> None:
    """A repository may hold a file whose name is not UTF-8 (Python sees lone surrogates) and has an escape
    sequence: every format writes it, escaped, and SARIF percent-encodes the name's own bytes."""
    folder = tmp_path / "configs"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"\xff\x1b[31m.yaml"), "w") as handle:
        handle.write("model_name_or_path: m\nstage: sft\nbogus: 1\n")
    run = Run(["lint", "--format", fmt, "configs"]).assert_clean()
    assert run.code == 1 and "\x1b" not in run.out.replace("\\u001b", "")
    if fmt == "sarif":
        assert "configs/%FF%1B%5B31m.yaml" in run.out
    elif fmt in ("full", "concise", "github"):
        assert "configs/\\udcff\\x1b[31m.yaml" in run.out


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_ds007_non_finite_messages_are_deepspeeds(tmp_path: Path, value: float) -> None:
    """The oracle: DeepSpeed's own DeepSpeedConfig on the same batch values fails with DS007's message."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    config = {"train_batch_size": value, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}
    with pytest.raises(AssertionError) as real:
        DeepSpeedConfig(dict(config))
    (tmp_path / "ds.json").write_text(json.dumps({**config, "zero_optimization": {"stage": 2}}))
    run = Run(["lint", "--select", "DS007", "--gpus", "1", "--format", "json", "ds.json"]).assert_clean()
    [finding] = findings(run)
    assert str(real.value) in finding["message"] or f"`train_batch_size` is {value}" in finding["message"]


def test_lf031_infinite_steps_oracle() -> None:
    """The oracle: transformers' TrainingArguments raises OverflowError for `logging_steps: .inf`."""
    pytest.importorskip("transformers")
    from transformers import TrainingArguments

    with pytest.raises(OverflowError):
        TrainingArguments(output_dir="out", logging_steps=float("inf"), report_to="none")


def test_a_yaml_true_is_no_count() -> None:
    """`bool` subclasses `int`: the rules and commands ask `is_int`, which refuses YAML's and JSON's `true`."""
    from cfgopt.text.user_text import is_int

    assert is_int(3) and is_int(0) and is_int(-1) and is_int(10**400)
    assert not any(is_int(v) for v in (True, False, 3.0, "3", None, [3]))
