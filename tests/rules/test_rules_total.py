"""Every rule is total on every job shape a loader produces (issue 45 item 1): `lint --select ALL` and
`fix --unsafe-fixes` over a launch line naming only a YAML, a launch line of `--key value` arguments, a YAML naming
a JSON in another folder, stdin, and several files at once, for every target (and none) with 1 and 8 GPUs, end
without an internal error or a traceback.

The jobs are LLaMA-Factory 0.9.5's own examples (examples/train_lora/qwen3_lora_sft_ds3.yaml, its
examples/deepspeed/ds_z3_config.json) and a full fine-tune, so the memory rules, the planner and the DeepSpeed rules
all have something to say. The default run checks every shape with a deterministic sample of the targets
(tests/support/sampling.py); `--full` runs every combination."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
from rule_cases import all_cases, input_files, working_copy
from sampling import params

from cfgopt.cli import main
from cfgopt.knowledge.targets import TARGETS

# LLaMA-Factory 0.9.5 examples/train_lora/qwen3_lora_sft_ds3.yaml (comments dropped), `deepspeed:` as written there
LORA_YAML = """\
model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
trust_remote_code: true
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
deepspeed: {deepspeed}
dataset: identity,alpaca_en_demo
template: qwen3_nothink
cutoff_len: 2048
max_samples: 1000
preprocessing_num_workers: 16
dataloader_num_workers: 4
output_dir: saves/qwen3-4b/lora/sft
logging_steps: 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true
save_only_model: false
report_to: none
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
resume_from_checkpoint: null
"""
FULL_YAML = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: full
deepspeed: ds_z3_config.json
dataset: alpaca_en_demo
template: llama3
cutoff_len: 4096
output_dir: out
per_device_train_batch_size: 4
gradient_accumulation_steps: 8
fp16: true
flash_attn: fa2
"""
# LLaMA-Factory 0.9.5 examples/deepspeed/ds_z3_config.json
DS_Z3 = """\
{
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "zero_allow_untested_optimizer": true,
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "bf16": {"enabled": "auto"},
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": false,
    "contiguous_gradients": true,
    "sub_group_size": 1e9,
    "reduce_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": true
  }
}
"""
DS_PATH = "examples/deepspeed/ds_z3_config.json"
ARGS_LINE = (
    "deepspeed --num_gpus 8 src/train.py --stage sft --do_train --model_name_or_path Qwen/Qwen3-4B-Instruct-2507 "
    "--dataset alpaca_en_demo --template qwen3_nothink --finetuning_type lora --lora_target all --output_dir out "
    f"--per_device_train_batch_size 1 --gradient_accumulation_steps 2 --bf16 --deepspeed {DS_PATH}\n"
)


class Shape:
    """One job shape: the files it writes into a folder, the paths linted, and stdin's text (or None)."""

    def __init__(self, name: str, files: dict[str, str], paths: list[str], stdin: str | None = None) -> None:
        self.name, self.files, self.paths, self.stdin = name, files, paths, stdin

    def __repr__(self) -> str:
        return self.name


LORA = LORA_YAML.format(deepspeed=DS_PATH)
SHAPES = (
    Shape(
        "launch-line-naming-a-yaml",
        {"train.sh": "FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train cfg.yaml\n", "cfg.yaml": LORA},
        ["train.sh"],
    ),
    Shape("launch-line-of-arguments", {"run.sh": ARGS_LINE}, ["run.sh"]),
    Shape(
        "yaml-naming-a-json-elsewhere",
        {"configs/cfg.yaml": LORA_YAML.format(deepspeed="../deepspeed/ds_z3_config.json")},
        ["configs/cfg.yaml"],
    ),
    Shape("stdin", {}, ["-", "--stdin-filename", "cfg.yaml"], stdin=LORA),
    Shape(
        "several-files",
        {
            "train.sh": "llamafactory-cli train cfg.yaml learning_rate=2e-4\nllamafactory-cli train full.yaml\n",
            "cfg.yaml": LORA,
            "full.yaml": FULL_YAML,
            "ds_z3_config.json": DS_Z3,
            "requirements.txt": "llamafactory==0.9.5\nflash-attn==2.7.4\ntransformers==4.50.0\n",
        },
        ["."],
    ),
)
TARGET_NAMES = (None, *TARGETS)  # None: no --target (the unstated GPU)
CASES = [(shape, target, gpus) for shape in SHAPES for target in TARGET_NAMES for gpus in (1, 8)]


def _case_id(case: tuple) -> str:
    shape, target, gpus = case
    return f"{shape.name}-{target or 'no-target'}-{gpus}"


def _write(shape: Shape, folder: Path) -> None:
    for name, text in {DS_PATH: DS_Z3, "deepspeed/ds_z3_config.json": DS_Z3, **shape.files}.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _run(argv: list[str], stdin: str | None) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # a usage error would be the test's own mistake: shown in the assertion
                code = exc.code
    finally:
        sys.stdin = saved
    return code, out.getvalue() + err.getvalue()


def _options(target: str | None, gpus: int) -> list[str]:
    return ["--target", target or "none", "--gpus", str(gpus), "--select", "ALL", "-q"]


def _check(shape: Shape, target: str | None, gpus: int, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(shape, folder)
    monkeypatch.chdir(folder)  # stdin's name and the launch lines' paths are read from the current directory
    for command in (["lint"], ["fix", "--unsafe-fixes"]):
        code, output = _run([*command, *shape.paths, *_options(target, gpus)], shape.stdin)
        assert "internal error" not in output and "Traceback" not in output, output[-3000:]
        assert code in (0, 1), output[-3000:]


@pytest.mark.parametrize(("shape", "target", "gpus"), params(CASES, 12, _case_id), ids=[_case_id(c) for c in CASES])
def test_every_rule_is_total_on_every_job_shape(
    shape: Shape, target: str | None, gpus: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(shape, target, gpus, tmp_path, monkeypatch)


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_every_shape_with_the_reported_setting(shape: Shape, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shape in the default run whatever the sample drew, with issue 45's setting (8 x h100)."""
    _check(shape, "h100", 8, tmp_path, monkeypatch)


def test_a_line_finding_about_a_key_of_its_yaml_points_at_the_yaml_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line's job (a larger micro-batch) is judged on its own; `deepspeed:` is the YAML's, so the line's
    MEM003 points at the word naming the YAML, with the key it is about."""
    line = "FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train cfg.yaml per_device_train_batch_size=8\n"
    _write(Shape("override", {"train.sh": line, "cfg.yaml": LORA}, []), tmp_path)
    monkeypatch.chdir(tmp_path)
    code, output = _run(["lint", "train.sh", "--target", "h100", "--select", "MEM003", "--format", "json"], None)
    found = [d for d in json.loads(output)["diagnostics"] if d["file"] == "train.sh"]
    assert code == 1 and len(found) == 1, output
    start = line.index("cfg.yaml") + 1
    assert (found[0]["line"], found[0]["column"], found[0]["end_column"]) == (1, start, start + len("cfg.yaml"))
    assert found[0]["key"] == "deepspeed"


def _yaml_cases() -> list[Path]:
    return [case for case in all_cases() if any(p.suffix in (".yaml", ".yml") for p in input_files(case))]


WRAPPED = [(case, target, gpus) for case in _yaml_cases() for target, gpus in (("h100", 8), (None, 1))]


def _wrapped_id(item: tuple) -> str:
    case, target, gpus = item
    return f"{case.parent.name}-{case.name}-{target or 'no-target'}-{gpus}"


@pytest.mark.parametrize(
    ("case", "target", "gpus"), params(WRAPPED, 8, _wrapped_id), ids=[_wrapped_id(w) for w in WRAPPED]
)
def test_every_rule_fixture_launched_by_a_line_is_total(
    case: Path, target: str | None, gpus: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rule fixture's YAML named by a launch line with an override (the line's job: the YAML's keys under
    it), linted through the line alone."""
    folder = working_copy(case, tmp_path)
    yamls = [p.name for p in input_files(case) if p.suffix in (".yaml", ".yml")]
    line = "".join(f"FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train {y} learning_rate=1e-4\n" for y in yamls)
    (folder / "launch.sh").write_text(line)
    monkeypatch.chdir(folder)
    code, output = _run(["lint", "launch.sh", *_options(target, gpus)], None)
    assert "internal error" not in output and "Traceback" not in output, output[-3000:]
    assert code in (0, 1, 2), output[-3000:]  # 2: a fixture that does not parse (CFG001's) is still no crash
