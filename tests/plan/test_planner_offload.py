"""The speed plan and the offloads of the job's DeepSpeed JSON: MEM002 removes an offload the run does not need in the
same `cfgopt fix` run as the plan, so the plan, MEM003 and MEM002 judge the JSON as those fixes leave it, and the
plan's "estimated peak" is `cfgopt estimate`'s "required per GPU" of the files written. A plan whose JSON part is not
written (the JSON not named, or `cfgopt fix -`) says it was applied in part, and what it leaves is counted."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rule_cases import ROOT, cfgopt_process, fix_output, lint_diagnostics

from cfgopt.job.settings import Settings
from cfgopt.project.loader import load_job

# LLaMA-Factory v0.9.5's examples/deepspeed/ds_z3_config.json with both offloads to the CPU, as its
# ds_z3_offload_config.json has them
STOCK_Z3 = ROOT / "bench" / "planner" / "examples" / "deepspeed" / "ds_z3_config.json"
FULL_8B = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: full
dataset: alpaca_en_demo
template: llama3
output_dir: out
bf16: true
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
deepspeed: ds.json
"""
# the job's environment: LLaMA-Factory without Liger, so that the plan is written in one pass (Liger under ZeRO-3 is
# planned only on the next pass, once the JSON holds ZeRO-2)
REQUIREMENTS = "llamafactory[torch,metrics,deepspeed]==0.9.5\n"
H100_16 = ["--target", "h100", "--gpus", "16"]
PEAK = re.compile(r"estimated peak (\d+) GiB per GPU")


def _job(folder: Path) -> Path:
    ds = json.loads(STOCK_Z3.read_text())
    ds["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    ds["zero_optimization"]["offload_param"] = {"device": "cpu", "pin_memory": True}
    (folder / "ds.json").write_text(json.dumps(ds, indent=2) + "\n")
    (folder / "requirements.txt").write_text(REQUIREMENTS)
    path = folder / "train.yaml"
    path.write_text(FULL_8B)
    return path


def _required(train: Path, gpus: int) -> float:
    est = load_job(train, Settings(target_name="h100", gpus=gpus)).estimate(gpus)
    assert est is not None
    return est.required_gib


def test_the_plans_peak_is_that_of_the_files_written(tmp_path: Path) -> None:
    """8B full SFT, ZeRO-3 with both offloads, 16 x H100: MEM002 removes the offloads and the plan lowers the stage
    in the same run. The plan's figure, MEM003's and that of the JSON's own fix line are the one `cfgopt estimate`
    gives the files written (it was 36 GiB with `offload_optimizer` kept, for a file that needs 42)."""
    train = _job(tmp_path)
    found = lint_diagnostics(H100_16, train, tmp_path / "ds.json")
    plan = next(d["fix"]["description"] for d in found if d["code"] == "MEM004")
    stage = next(d for d in found if d["code"] == "MEM003")
    assert "ZeRO-2 (in ds.json)" in plan
    assert "with ZeRO-2 and `offload_optimizer` removed (MEM002) the estimated peak" in stage["message"]
    said = fix_output(H100_16, train, tmp_path / "ds.json")
    assert "fixed: MEM002 Remove `offload_optimizer`" in said and "in part" not in said
    assert "offload" not in (tmp_path / "ds.json").read_text()
    required = round(_required(train, 16))
    lines = [line for line in said.splitlines() if "Speed plan" in line]
    assert [int(m.group(1)) for line in lines for m in [PEAK.search(line)] if m] == [required] * len(lines) != []
    assert int(PEAK.search(plan).group(1)) == required  # type: ignore[union-attr]


def test_mem002_removes_only_the_offloads_that_fit_together(tmp_path: Path) -> None:
    """8B full SFT on 2 x H100: without the optimizer's offload it needs 66 GiB, without the parameters' 16, without
    both 74, over 90% of 80. MEM002 reports the optimizer's alone: both fixes apply in one run, so the parameters
    are judged with the optimizer's offload removed too."""
    train = _job(tmp_path)
    options = ["--target", "h100", "--gpus", "2", "--select", "MEM002"]
    found = [d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["code"] == "MEM002"]
    assert [d["key"] for d in found] == ["zero_optimization.offload_optimizer"]


def test_a_plan_whose_json_part_is_not_written_says_so(tmp_path: Path) -> None:
    """Only the config named: its part of the plan is written, the JSON's is not. The fix line says the plan was
    applied in part, which part was not and how to write it; the JSON's findings are counted as remaining."""
    train = _job(tmp_path)
    said = fix_output(H100_16, train)
    line = next(line for line in said.splitlines() if line.startswith(f"{train}: fixed: MEM004"))
    assert line.startswith(
        f"{train}: fixed: MEM004 in part (ZeRO-2 (in ds.json) not written: that file is not named on the command "
        "line; --fix-references writes it): Speed plan for 16 x h100: "
    )
    assert "Fixed 1 problem(s) in 1 file(s); 3 remaining" in said  # MEM003 and MEM002 twice, on the JSON
    assert '"stage": 3' in (tmp_path / "ds.json").read_text()


def test_fix_from_stdin_counts_what_the_json_it_names_keeps(tmp_path: Path) -> None:
    """`cfgopt fix -` writes stdin's text alone (with --fix-references too): the plan's JSON part is said not to be
    written, the JSON's findings are listed and counted (as `cfgopt lint -` counts them), and the exit code is 1."""
    train = _job(tmp_path)
    command = ["fix", "-", "--stdin-filename", "train.yaml", "--unsafe-fixes", *H100_16]
    runs = [cfgopt_process(*command, *more, cwd=tmp_path, stdin=FULL_8B) for more in ([], ["--fix-references"])]
    for run in runs:
        assert run.returncode == 1, run.stderr
        assert "train.yaml: fixed: MEM004 in part (ZeRO-2 (in ds.json) not written: only the text read from stdin" in (
            run.stderr
        )
        assert "Fixed 1 problem(s) in 1 file(s); 3 remaining" in run.stderr
        assert run.stderr.count("ds.json:") == 3
    assert runs[0].stdout == runs[1].stdout != FULL_8B  # the same text: planned against the JSON as it is on disk
    assert train.read_text() == FULL_8B and '"stage": 3' in (tmp_path / "ds.json").read_text()
