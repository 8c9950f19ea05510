"""MEM001's remedies when nothing the plan can set fits: what fits on the job's own GPUs first, cheapest first, each
with its estimate, and never one that saves nothing (an offload of a LoRA's optimizer states moves MiB)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rule_cases import run_cli

from cfgopt.plan.space import deepspeed_template

LORA_70B = """model_name_or_path: meta-llama/Meta-Llama-3-70B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: out
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
bf16: true
{extra}"""


def _remedies(tmp_path: Path, gpus: int, extra: str = "") -> list[str]:
    cfg = tmp_path / "l70.yaml"
    cfg.write_text(LORA_70B.format(extra=extra))
    args = ["lint", "--format", "json", "--select", "MEM001", "--target", "h100", "--gpus", str(gpus), str(cfg)]
    _, out, _ = run_cli(args)
    (msg,) = [d["message"] for d in json.loads(out)["diagnostics"] if d["code"] == "MEM001"]
    return msg.split("; try ", 1)[1].split("; or ")


def test_zero3_over_the_stated_gpus_comes_first_with_its_estimate_and_alone_where_it_fits(tmp_path: Path) -> None:
    """A 70B LoRA on 8 x H100 (151 GiB per GPU without DeepSpeed): ZeRO-3 over the 8 GPUs fits (29 GiB), so neither
    an offload (slower, and it moves 0 GiB here) nor 16 GPUs is named."""
    remedies = _remedies(tmp_path, 8)
    assert len(remedies) == 1 and re.fullmatch(r"ZeRO-3 over the 8 GPUs \(~\d+ GiB per GPU\)", remedies[0]), remedies


def test_no_offload_that_moves_nothing_and_a_partial_remedy_says_so(tmp_path: Path) -> None:
    """On 2 GPUs ZeRO-3 alone leaves 83 GiB: the parameters' offload fits (with the host memory it takes), the
    optimizer's moves a LoRA's MiB and is not named; ZeRO-3 alone comes with its figure and "not enough alone"."""
    remedies = _remedies(tmp_path, 2)
    text = "; ".join(remedies)
    assert "optimizer offloaded" not in text
    assert re.fullmatch(r"ZeRO-3 with CPU offload \(~\d+ GiB per GPU, \d+ GiB in host memory; slower\)", remedies[0])
    assert re.search(r"\d+ GPUs with ZeRO-3 \(~\d+ GiB each\)", text)
    assert re.search(r"ZeRO-3 over the 2 GPUs \(~\d+ GiB per GPU, not enough alone\)", text)


def test_a_zero3_job_is_offered_only_the_offload_that_moves_something(tmp_path: Path) -> None:
    """The job's own ZeRO-3 JSON on 2 GPUs: "ZeRO offload of the optimizer states" without a figure was named
    though a LoRA's optimizer states are MiB; now the offload that fits, with its estimate."""
    (tmp_path / "ds.json").write_text(json.dumps(deepspeed_template("z3")))
    remedies = _remedies(tmp_path, 2, "deepspeed: ds.json\n")
    text = "; ".join(remedies)
    assert "optimizer" not in text and "ZeRO-3 over" not in text
    assert re.search(r"ZeRO-3 with CPU offload \(~\d+ GiB per GPU, \d+ GiB in host memory; slower\)", text), text
