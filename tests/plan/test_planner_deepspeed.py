"""The speed plan and the job's DeepSpeed JSON (issue 32): a plan that lowers ZeRO-3 writes the stage into the
job's own JSON, so that after `cfgopt fix --write --unsafe-fixes` lint has no MEM003 / MEM004 / LF027 warning left
on the plan's output; a JSON another config reads, or one outside the fix's scope, keeps its stage, and the
config's part of the plan stands on its own (no Liger under the ZeRO-3 left in the JSON). The plan keeps no
combination another rule calls a failure (neat packing with fa2 and several rows, LF019)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rule_cases import ROOT, fix_output, lint_diagnostics, run_cli

from cfgopt.job.settings import Settings
from cfgopt.lint.fixer import apply_edits
from cfgopt.loaders.json_loader import load_json
from cfgopt.plan.knob_edits import stage_edits
from cfgopt.plan.planner import plan_for
from cfgopt.project.loader import load_job
from cfgopt.text.document import Document
from cfgopt.text.source import Kind

# LLaMA-Factory v0.9.5's examples/deepspeed/ds_z3_config.json, verbatim (bench/planner/README.md)
STOCK_Z3 = ROOT / "bench" / "planner" / "examples" / "deepspeed" / "ds_z3_config.json"
FULL_8B = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: full
dataset: alpaca_en_demo
template: llama3
output_dir: out
bf16: true
cutoff_len: {cutoff}
per_device_train_batch_size: {micro}
gradient_accumulation_steps: {ga}
deepspeed: ds.json
"""
PLAN_RULES = {"MEM003", "MEM004", "LF027"}


def _job(folder: Path, micro: int = 1, ga: int = 8, cutoff: int = 2048, name: str = "train.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "ds.json").exists():
        shutil.copy(STOCK_Z3, folder / "ds.json")
    path = folder / name
    path.write_text(FULL_8B.format(micro=micro, ga=ga, cutoff=cutoff))
    return path


def _warned(diagnostics: list[dict]) -> set[str]:
    return {d["code"] for d in diagnostics if d["severity"] in ("warning", "error")}


@pytest.mark.parametrize("target", ["h200", "mi300x"])
def test_multi_gpu_full_zero3_leaves_no_planned_warning(tmp_path: Path, target: str) -> None:
    """8B full SFT with LLaMA-Factory's stock ZeRO-3 JSON on 8 GPUs: ZeRO-2 fits, so the plan writes it in the
    JSON (the keys only stage 3 reads removed) with the config's part; lint then warns of none of its rules."""
    train = _job(tmp_path)
    options = ["--target", target, "--gpus", "8"]
    before = lint_diagnostics(options, train, tmp_path / "ds.json")
    stage = next(d for d in before if d["code"] == "MEM003")
    assert stage["file"].endswith("ds.json") and stage["key"] == "zero_optimization.stage"  # where the edit is
    assert stage["fix"]["description"].startswith("ZeRO-2 (`zero_optimization.stage: 2`")
    fix_output(options, train, tmp_path / "ds.json")
    assert not _warned(lint_diagnostics(options, train, tmp_path / "ds.json")) & PLAN_RULES
    ds = json.loads((tmp_path / "ds.json").read_text())
    assert ds["zero_optimization"]["stage"] == 2
    assert not [k for k in ds["zero_optimization"] if k.startswith("stage3_")]
    assert ds["fp16"] == json.loads(STOCK_Z3.read_text())["fp16"]  # nothing else of the file changes
    assert fix_output(options, train, tmp_path / "ds.json").count("fixed:") == 0  # converged: a second fix does nothing


def test_a_json_another_config_reads_keeps_its_stage(tmp_path: Path) -> None:
    """Two configs read one JSON: the plan does not edit it (the other job would change too), and MEM003 keeps
    its advice on the config, without a fix, its message naming the other reader."""
    train, other = _job(tmp_path), _job(tmp_path, micro=2, ga=4, name="other.yaml")
    options = ["--target", "h200", "--gpus", "8", "--select", "MEM003"]
    found = [d for d in lint_diagnostics(options, train, other, tmp_path / "ds.json") if d["code"] == "MEM003"]
    assert {Path(d["file"]).name for d in found} == {"train.yaml", "other.yaml"}
    assert all("with ZeRO-2 the estimated peak is about" in d["message"] and d["fix"] is None for d in found)
    for d in found:
        reader = "other.yaml" if d["file"].endswith("train.yaml") else "train.yaml"
        assert d["message"].endswith(
            f"; ZeRO-2 not written in ds.json: {reader} reads it too (the edit would change that job as well)"
        )
    fix_output(options, train, other, tmp_path / "ds.json")
    assert (tmp_path / "ds.json").read_text() == STOCK_Z3.read_text()


def _sibling_32b(folder: Path, deepspeed: str = "ds.json") -> Path:
    """The 32B full fine-tune beside the job, the same file but the model: ZeRO-3 fits it, ZeRO-2 does not."""
    path = folder / "qwen25_32b_full_sft.yaml"
    text = FULL_8B.format(micro=1, ga=8, cutoff=2048).replace("meta-llama/Meta-Llama-3-8B-Instruct", "Qwen/Qwen2.5-32B")
    path.write_text(text.replace("deepspeed: ds.json", f"deepspeed: {deepspeed}"))
    return path


def test_a_json_a_config_outside_the_run_reads_keeps_its_stage(tmp_path: Path) -> None:
    """The sweep's repro (explore-sweep 1): the 8B job and its JSON named, a 32B job beside them reading the same
    JSON not named (a pre-commit run on the changed files). The plan would write ZeRO-2, which takes the 32B job
    out of memory; it keeps the JSON and says which config reads it, in the fix line and in the plan's text."""
    train = _job(tmp_path)
    big = _sibling_32b(tmp_path)
    options = ["--target", "h100", "--gpus", "8"]
    before = [d["message"] for d in lint_diagnostics(options, big) if d["code"] == "MEM001"]
    said = fix_output(options, train, tmp_path / "ds.json")
    assert (tmp_path / "ds.json").read_text() == STOCK_Z3.read_text()
    assert "ZeRO-2 not written in ds.json: qwen25_32b_full_sft.yaml reads it too and is not in this run" in said
    assert [d["message"] for d in lint_diagnostics(options, big) if d["code"] == "MEM001"] == before
    stage = next(d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["code"] == "MEM003")
    assert stage["file"].endswith("train.yaml") and stage["fix"] is None
    assert "; ZeRO-2 not written in ds.json: qwen25_32b_full_sft.yaml reads it too" in stage["message"]
    fix_output(options, train, big, tmp_path / "ds.json")  # both judged: the stage stays (ZeRO-2 is too much for 32B)
    assert (tmp_path / "ds.json").read_text() == STOCK_Z3.read_text()


def test_a_launch_script_outside_the_run_is_a_reader(tmp_path: Path) -> None:
    """A launch line's `--deepspeed` names the JSON too: the script, not named, keeps it at its stage."""
    train = _job(tmp_path)
    (tmp_path / "run.sh").write_text(
        "llamafactory-cli train --model_name_or_path Qwen/Qwen2.5-32B --stage sft --do_train --finetuning_type full "
        "--dataset alpaca_en_demo --template qwen --output_dir out --bf16 --deepspeed ds.json\n"
    )
    said = fix_output(["--target", "h100", "--gpus", "8"], train, tmp_path / "ds.json")
    assert "run.sh reads it too and is not in this run" in said
    assert (tmp_path / "ds.json").read_text() == STOCK_Z3.read_text()


@pytest.mark.parametrize("launched_in_the_jobs_folder", [False, True])
def test_a_config_naming_another_json_of_the_same_name_is_no_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launched_in_the_jobs_folder: bool
) -> None:
    """The 32B job in another folder names its own `ds.json` (resolved from its folder, as the loader resolves it;
    the current folder, where it holds the job's JSON, is not where a config outside it is launched from), and a
    hidden folder's copy is not looked at: the job's JSON gets ZeRO-2."""
    train = _job(tmp_path / "a")
    if launched_in_the_jobs_folder:
        monkeypatch.chdir(tmp_path / "a")
    (tmp_path / "b").mkdir()
    shutil.copy(STOCK_Z3, tmp_path / "b" / "ds.json")
    _sibling_32b(tmp_path / "b")
    (tmp_path / "a" / ".old").mkdir()
    _sibling_32b(tmp_path / "a" / ".old", deepspeed="../ds.json")
    fix_output(["--target", "h100", "--gpus", "8"], train, tmp_path / "a" / "ds.json")
    assert json.loads((tmp_path / "a" / "ds.json").read_text())["zero_optimization"]["stage"] == 2
    assert (tmp_path / "b" / "ds.json").read_text() == STOCK_Z3.read_text()


def test_a_json_outside_the_fix_keeps_the_config_part_sound(tmp_path: Path) -> None:
    """Only the config named: the JSON is not written (the fix says why), and the config's part of the plan
    runs under the ZeRO-3 left there: no Liger (LF027), and every warning left is MEM003's, on the JSON. (The other
    examples, which read the JSON too, are left out: with them the plan would not lower its stage at all.)"""
    shutil.copytree(ROOT / "bench" / "planner" / "examples" / "deepspeed", tmp_path / "examples" / "deepspeed")
    train = tmp_path / "examples" / "train_full" / "qwen3_full_sft.yaml"
    train.parent.mkdir()
    shutil.copy(ROOT / "bench" / "planner" / "examples" / "train_full" / train.name, train)
    options = ["--target", "h200", "--gpus", "8"]
    said = fix_output(options, train)
    assert "ds_z3_config.json: not fixed: not named on the command line" in said
    assert (
        "enable_liger_kernel" not in train.read_text() and "disable_gradient_checkpointing: true" in train.read_text()
    )
    left = [
        d for d in lint_diagnostics(options, train) if d["severity"] in ("warning", "error") and d["code"] != "DS023"
    ]
    assert [(Path(d["file"]).name, d["code"]) for d in left] == [("ds_z3_config.json", "MEM003")]


def test_mem003_names_the_plans_settings_where_only_they_fit_zero2(tmp_path: Path) -> None:
    """8 x 8192 tokens per micro-batch: ZeRO-2 does not fit the batch as written, but the plan's 1 x 8 does;
    MEM003 says so, on the JSON, with the stage's edit (the plan's JSON part has a finding to carry it)."""
    train = _job(tmp_path, micro=8, ga=1, cutoff=8192)
    options = ["--target", "h200", "--gpus", "8"]
    stage = next(d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["code"] == "MEM003")
    assert "needs on 8 GPU(s) with the speed plan's settings (1 x 8 (micro-batch x accumulation" in stage["message"]
    assert stage["file"].endswith("ds.json") and stage["fix"] is not None
    fix_output(options, train, tmp_path / "ds.json")
    assert not _warned(lint_diagnostics(options, train, tmp_path / "ds.json")) & PLAN_RULES


def test_the_plan_packs_neatly_with_fa2_at_one_row_only_where_flash_attn_runs(tmp_path: Path) -> None:
    """`flash_attn: fa2` and the default micro-batch of 8. With flash-attn in the job's environment the neat packing
    the plan turns on takes one row per micro-batch (LF019), so the plan writes 1 x 8 with it, or no packing;
    without it (the assumed environment) `fa2` runs SDPA, nothing asserts, and the micro-batch stays (issue 41),
    with `flash_attn: sdpa` written: what runs, and no LF019 once flash-attn is installed."""
    path = tmp_path / "train.yaml"
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nliger-kernel>=0.6.3\nflash-attn==2.8.3\n")
    options = ["--target", "h200", "--gpus", "1"]
    shutil.copy(ROOT / "fixtures" / "rules" / "LF006" / "fa3" / "good_fa2.yaml", path)
    fix_output([*options, "--environment", str(node)], path)
    text = path.read_text()
    assert "neat_packing: true" in text and "per_device_train_batch_size: 1\n" in text
    assert "LF019" not in _warned(lint_diagnostics([*options, "--environment", str(node)], path))
    shutil.copy(ROOT / "fixtures" / "rules" / "LF006" / "fa3" / "good_fa2.yaml", path)
    out = fix_output(options, path)
    text = path.read_text()
    assert "neat_packing: true" in text and "per_device_train_batch_size" not in text
    assert "flash_attn: sdpa" in text and "LF019" not in _warned(lint_diagnostics(options, path))
    assert "`flash_attn: sdpa` written: what `fa2` runs here (flash-attn not in the environment)" in out


def _json_source(text: str):
    return load_json(Document.from_bytes(Path("ds.json"), text.encode()), Kind.DEEPSPEED)


def test_removed_json_members_leave_valid_json() -> None:
    """Runs of members removed in one fix, in the middle and at the end of an object, leave JSON that parses
    as the object without them; the stage is written in place."""
    text = STOCK_Z3.read_text()
    src = _json_source(text)
    made = stage_edits(src, 2)
    assert made is not None
    after = json.loads(apply_edits(text, made))
    zero = json.loads(text)["zero_optimization"]
    kept = {k: v for k, v in zero.items() if not k.startswith("stage3_")}
    assert after["zero_optimization"] == {**kept, "stage": 2}
    middle = '{"zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1e9, "offload_param": {}, "x": 1}}'
    done = json.loads(apply_edits(middle, stage_edits(_json_source(middle), 2) or []))
    assert done == {"zero_optimization": {"stage": 2, "x": 1}}
    assert stage_edits(_json_source('{"zero_optimization": {"stage": "auto"}}'), 2) is None


def test_a_per_file_ignore_of_the_json_keeps_the_finding_on_the_config(tmp_path: Path) -> None:
    """MEM003 ignored in the JSON (`per-file-ignores`): the finding does not move there, and stays on the config."""
    train = _job(tmp_path)
    options = ["--target", "h200", "--gpus", "8", "--config", 'per-file-ignores = {"ds.json" = ["MEM003"]}']
    found = [d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["code"] == "MEM003"]
    assert [Path(d["file"]).name for d in found] == ["train.yaml"]


def test_no_lower_stage_with_the_optimizer_offloaded_to_nvme(tmp_path: Path) -> None:
    """Optimizer offload to NVMe runs as CPU offload below stage 3 (DS012): the plan keeps ZeRO-3 there."""
    train = _job(tmp_path)
    ds = json.loads(STOCK_Z3.read_text())
    ds["zero_optimization"]["offload_optimizer"] = {"device": "nvme", "nvme_path": "/local_nvme"}
    (tmp_path / "ds.json").write_text(json.dumps(ds, indent=2))
    settings = Settings(target_name="h200", gpus=8, extend_select=["PF", "MEM"])
    plan = plan_for(load_job(train, settings))
    assert plan is not None and plan.best.zero.startswith("z3") and plan.deepspeed_stage is None
    (tmp_path / "ds.json").write_text(STOCK_Z3.read_text())
    lowered = plan_for(load_job(train, settings))
    assert lowered is not None and lowered.deepspeed_stage == 2  # the same job with the stock JSON: lowered


def test_an_offload_a_config_outside_the_run_reads_is_kept(tmp_path: Path) -> None:
    """PF051 (a LoRA job's optimizer offload) and MEM002 leave a JSON that a full fine-tune outside the run reads as
    it is: no fix, and the message names that config (also in `cfgopt fix`'s list of what remains)."""
    ds = json.loads(STOCK_Z3.read_text())
    ds["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    (tmp_path / "ds.json").write_text(json.dumps(ds, indent=2) + "\n")
    train = _job(tmp_path)
    train.write_text(train.read_text().replace("finetuning_type: full", "finetuning_type: lora"))
    options = ["--target", "h100", "--gpus", "8", "--select", "PF051,MEM002"]
    alone = [d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["file"].endswith("ds.json")]
    assert [(d["code"], d["fix"]["applicability"]) for d in alone] == [("PF051", "unsafe")]
    _sibling_32b(tmp_path)
    found = [d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["file"].endswith("ds.json")]
    assert [(d["code"], d["fix"]) for d in found] == [("PF051", None)]
    assert found[0]["message"].endswith(
        "; not fixed: qwen25_32b_full_sft.yaml reads it too and is not in this run (name it as well, or the "
        "folder, so that every job reading it is judged)"
    )
    before = (tmp_path / "ds.json").read_text()
    code, _, said = run_cli(["fix", "--write", "--unsafe-fixes", *options, str(train), str(tmp_path / "ds.json")])
    assert code == 1 and "not fixed: qwen25_32b_full_sft.yaml reads it too" in said  # in what remains
    assert (tmp_path / "ds.json").read_text() == before


def test_ds023_leaves_a_json_a_config_outside_the_run_reads(tmp_path: Path) -> None:
    """DS023 (fp32 reductions for bf16 on ROCm) edits the JSON only where every config reading it is judged: with a
    config outside the run reading it, no fix, and the message names that config (also in what `cfgopt fix` leaves)."""
    (tmp_path / "ds.json").write_text('{\n  "zero_optimization": {"stage": 3},\n  "bf16": {"enabled": true}\n}\n')
    train = _job(tmp_path)
    options = ["--target", "mi300x", "--gpus", "8", "--select", "DS023"]
    alone = [d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["code"] == "DS023"]
    assert [(d["severity"], d["fix"]["applicability"]) for d in alone] == [("warning", "unsafe")]
    _sibling_32b(tmp_path)
    found = [d for d in lint_diagnostics(options, train, tmp_path / "ds.json") if d["code"] == "DS023"]
    assert [(d["severity"], d["fix"]) for d in found] == [("warning", None)]
    assert found[0]["message"].endswith(
        "; not fixed: qwen25_32b_full_sft.yaml reads it too and is not in this run (name it as well, or the "
        "folder, so that every job reading it is judged)"
    )
    before = (tmp_path / "ds.json").read_text()
    code, _, said = run_cli(["fix", "--write", "--unsafe-fixes", *options, str(train), str(tmp_path / "ds.json")])
    assert code == 1 and "not fixed: qwen25_32b_full_sft.yaml reads it too" in said
    assert (tmp_path / "ds.json").read_text() == before
    run_cli(["fix", "--write", "--unsafe-fixes", *options, str(tmp_path)])  # every reader judged: the key is added
    assert json.loads((tmp_path / "ds.json").read_text())["communication_data_type"] == "fp32"
