"""FSDP and plain DDP from the accelerate config a launch line names (issue 42): the config read as accelerate 1.11
reads it (`cfgopt.knowledge.accelerate_plan`), the memory per GPU counted from the code (`cfgopt.memory.sharding`,
docs/memory.md "FSDP and DDP"), checked here against hand computation, and the job, `cfgopt estimate` and MEM001
judging the line's job with it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from repo_paths import ROOT

from cfgopt.job.settings import Settings
from cfgopt.knowledge.accelerate_plan import AcceleratePlan, accelerate_plan, plugin_deepspeed
from cfgopt.knowledge.model_shapes import shape_for
from cfgopt.knowledge.targets import TARGETS
from cfgopt.lint.engine import build_project
from cfgopt.memory.base import GIB, embedding_params, layer_params
from cfgopt.memory.estimate import estimate

FIXTURES = ROOT / "fixtures" / "fsdp"
L8 = shape_for("meta-llama/Meta-Llama-3-8B-Instruct", None)
PSI = L8.num_parameters
FULL = {
    "stage": "sft",
    "finetuning_type": "full",
    "do_train": True,
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "cutoff_len": 2048,
    "packing": True,
    "bf16": True,
}
FSDP = AcceleratePlan("fsdp", 8, mixed_precision="bf16", config="fsdp.yaml")


def _fixture(name: str) -> dict:
    return yaml.safe_load((FIXTURES / name).read_text())


def _gib(est, name: str) -> float:
    return est.gib(name)


def _estimate(config: dict, plan: AcceleratePlan | None, gpus: int = 8, deepspeed: dict | None = None):
    return estimate(config, L8, TARGETS["h100"], gpus, deepspeed, distributed=plan)


# ---------------------------------------------------------------- the config, as accelerate reads it


def test_llamafactory_fsdp_config_is_full_shard_fsdp1() -> None:
    plan = accelerate_plan(_fixture("fsdp_config.yaml"), {}, "fsdp_config.yaml")
    assert plan == AcceleratePlan(
        "fsdp", 8, mixed_precision="bf16", cpu_ram_efficient_loading=True, config="fsdp_config.yaml"
    )
    assert plan.describe(8) == "FSDP FULL_SHARD over 8 GPU(s) (fsdp_config.yaml)"


def test_fsdp_activation_checkpointing_without_llamafactorys_is_not_modelled() -> None:
    plan = FSDP._replace(activation_checkpointing=True)
    assert _estimate(FULL, plan).confidence == "medium"  # LLaMA-Factory's checkpointing on: the same layers
    est = _estimate({**FULL, "disable_gradient_checkpointing": True}, plan)
    assert est.confidence == "none" and "activation checkpointing" in est.unmodelled[0]


@pytest.mark.parametrize(
    ("fsdp_config", "sharding", "version"),
    [
        ({"fsdp_version": 2, "fsdp_reshard_after_forward": True}, "FULL_SHARD", 2),
        ({"fsdp_version": 2, "fsdp_reshard_after_forward": False}, "SHARD_GRAD_OP", 2),
        ({"fsdp_version": 2}, "FULL_SHARD", 2),  # FSDP2's default reshards after the forward
        ({"fsdp_sharding_strategy": 2}, "SHARD_GRAD_OP", 1),  # an older config's integer: the strategy's index + 1
        ({"fsdp_sharding_strategy": "no_shard"}, "NO_SHARD", 1),
        # FSDP1: the launcher always exports FSDP_SHARDING_STRATEGY, which the plugin prefers to reshard_after_forward
        ({"fsdp_reshard_after_forward": "SHARD_GRAD_OP"}, "FULL_SHARD", 1),
        ({"sharding_strategy": "HYBRID_SHARD"}, "HYBRID_SHARD", 1),  # a bare key is prefixed `fsdp_`
    ],
)
def test_sharding_strategy_and_version(fsdp_config: dict, sharding: str, version: int) -> None:
    plan = accelerate_plan({"distributed_type": "FSDP", "fsdp_config": fsdp_config})
    assert (plan.kind, plan.sharding, plan.fsdp_version) == ("fsdp", sharding, version)


def test_the_lines_options_win_over_the_config() -> None:
    data = {"distributed_type": "MULTI_GPU", "num_processes": 8, "mixed_precision": "bf16"}
    assert accelerate_plan(data).kind == "ddp"
    options = {"--use_fsdp": "--use_fsdp", "--fsdp_sharding_strategy": "SHARD_GRAD_OP", "--num_processes": "4"}
    plan = accelerate_plan(data, options)
    assert (plan.kind, plan.sharding, plan.processes) == ("fsdp", "SHARD_GRAD_OP", 4)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"distributed_type": "NO"}, "single"),
        ({"distributed_type": "DEEPSPEED"}, "deepspeed"),
        ({"distributed_type": "MULTI_NPU"}, "ddp"),
        ({"distributed_type": "TPU?"}, "unknown"),
        ({"distributed_type": "FSDP", "fsdp_config": {"fsdp_version": 3}}, "unknown"),
        ({"distributed_type": "FSDP", "fsdp_config": {"fsdp_offload_params": "maybe"}}, "unknown"),
        (["not", "a", "mapping"], "unknown"),
    ],
)
def test_distributed_type(data, kind: str) -> None:
    assert accelerate_plan(data).kind == kind


# ---------------------------------------------------------------- the memory, against hand computation


def test_full_shard_partitions_every_state_and_gathers_two_layers_and_the_root() -> None:
    est = _estimate(FULL, FSDP)
    # LLaMA-Factory upcasts the trained parameters to fp32; FSDP shards them, their fp32 gradients and Adam's states
    assert _gib(est, "weights") == pytest.approx(4 * PSI / 8 / GIB)
    assert _gib(est, "gradients") == pytest.approx(4 * PSI / 8 / GIB)
    assert _gib(est, "optimizer states") == pytest.approx(8 * PSI / 8 / GIB)
    # bf16 (param_dtype): the root unit (embeddings, untied lm_head, final norm) + the layer computing + the prefetched
    gathered = 2 * (embedding_params(L8) + L8.hidden_size + 2 * layer_params(L8))
    component = next(c for c in est.components if c.name == "FSDP gathered parameters")
    assert component.gib == pytest.approx(gathered / GIB)
    assert component.phases == ("loss", "backward")
    assert "FSDP no_sync gradients" not in {c.name for c in est.components}  # accumulation 1: no no_sync
    assert "FSDP FULL_SHARD (read from accelerate's and torch's code, not measured)" in est.confidence_line()
    assert est.confidence == "medium"


def test_shard_grad_op_keeps_the_whole_model_gathered_through_the_backward() -> None:
    est = _estimate(FULL, FSDP._replace(sharding="SHARD_GRAD_OP"))
    assert _gib(est, "FSDP gathered parameters") == pytest.approx(2 * PSI / GIB)
    assert _gib(est, "optimizer states") == pytest.approx(8 * PSI / 8 / GIB)


def test_no_shard_keeps_full_states_on_each_gpu() -> None:
    est = _estimate(FULL, FSDP._replace(sharding="NO_SHARD"))
    assert _gib(est, "weights") + _gib(est, "optimizer states") == pytest.approx(12 * PSI / GIB)


def test_hybrid_shard_partitions_over_one_machine() -> None:
    est = _estimate(FULL, FSDP._replace(sharding="HYBRID_SHARD", machines=2), gpus=16)
    assert _gib(est, "optimizer states") == pytest.approx(8 * PSI / 8 / GIB)


def test_accumulation_holds_the_unsharded_gradients_of_no_sync() -> None:
    est = _estimate({**FULL, "gradient_accumulation_steps": 4}, FSDP)
    component = next(c for c in est.components if c.name == "FSDP no_sync gradients")
    assert component.gib == pytest.approx(2 * PSI / GIB)  # bf16 (param_dtype), every trained parameter
    assert component.phases == ("loss", "backward")
    grads = next(c for c in est.components if c.name == "gradients")
    # the last micro-batch's backward turns the unsharded gradients into shards: counted once, not twice
    assert grads.phases == ("step",)


def test_offload_params_moves_the_states_to_the_host() -> None:
    est = _estimate(FULL, FSDP._replace(offload_params=True))
    assert _gib(est, "weights") == _gib(est, "optimizer states") == _gib(est, "gradients") == 0
    assert est.offloaded_gib == pytest.approx(16 * PSI / 8 / GIB)
    assert _gib(est, "FSDP gathered parameters") > 0  # the units still compute on the GPU


def test_fsdp2_upcasts_a_lora_base_and_fsdp1_does_not() -> None:
    lora = {**FULL, "finetuning_type": "lora", "lora_target": "all"}
    v1 = _estimate(lora, FSDP)
    v2 = _estimate(lora, FSDP._replace(fsdp_version=2))
    frozen = PSI - v1.trainable_params
    assert v2.gib("weights") - v1.gib("weights") == pytest.approx(2 * frozen / 8 / GIB)
    assert any("upcasts the whole model" in note for note in v2.notes)


def test_ddp_keeps_a_second_copy_of_the_gradients_in_its_buckets() -> None:
    ddp = AcceleratePlan("ddp", 4, mixed_precision="bf16", config="ddp.yaml")
    plain = _estimate(FULL, None, gpus=4)
    est = _estimate(FULL, ddp, gpus=4)
    buckets = next(c for c in est.components if c.name == "DDP gradient buckets")
    assert buckets.gib == pytest.approx(4 * PSI / GIB)  # fp32 gradients (the trained parameters are fp32)
    assert buckets.phases == ("states",)
    assert est.peak_allocated_gib == pytest.approx(plain.peak_allocated_gib + buckets.gib)
    assert "DDP's gradient buckets" in est.confidence_line()
    assert "DDP gradient buckets" not in {c.name for c in _estimate(FULL, ddp, gpus=1).components}


@pytest.mark.parametrize(
    ("plan", "deepspeed", "config", "why"),
    [
        (FSDP, {"zero_optimization": {"stage": 2}}, FULL, "FSDP (fsdp.yaml) with a DeepSpeed JSON"),
        (FSDP, None, {**FULL, "finetuning_type": "lora", "quantization_bit": 4}, "a 4-bit base under FSDP"),
        (AcceleratePlan("unknown", config="a.yaml", problem="not found"), None, FULL, "accelerate config (a.yaml)"),
        (AcceleratePlan("deepspeed", 8, config="ds.yaml"), None, FULL, "with a deepspeed_config_file (not read)"),
    ],
)
def test_what_the_model_does_not_cover_is_no_estimate(plan, deepspeed, config, why: str) -> None:
    est = _estimate(config, plan, deepspeed=deepspeed)
    assert est.confidence == "none"
    assert any(why in item for item in est.unmodelled)


def test_one_process_or_no_plan_changes_nothing() -> None:
    plain = _estimate(FULL, None)
    single = _estimate(FULL, AcceleratePlan("single", 1))
    assert single.as_dict() == plain.as_dict()


# ---------------------------------------------------------------- the launch line's job


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "fsdp")
    return tmp_path / "fsdp"


def _line(folder: Path, script: str):
    proj = build_project([folder / script], Settings(target_name="h100"))
    (line,) = [s for s in proj.sources if s.command.get("launcher")]
    return proj, line


def test_the_line_carries_the_config_and_its_gpu_count(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    proj, line = _line(folder, "run_fsdp.sh")
    assert line.command["accelerate"].sharding == "FULL_SHARD"
    assert line.command["launcher_gpus"] == (8, "`num_processes: 8` in fsdp_config.yaml")
    job = proj.context(line).job
    assert job.hardware(1).gpus == 8 and job.distributed.kind == "fsdp"
    yaml_source = line.command["base"]
    assert yaml_source.command["accelerate"] == line.command["accelerate"]  # one launch: the YAML's job too


def test_num_processes_on_the_line_wins(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "run.sh").write_text(
        "accelerate launch --config_file fsdp_config.yaml --num_processes 4 src/train.py llama3_full_sft.yaml\n"
    )
    _, line = _line(folder, "run.sh")
    assert line.command["launcher_gpus"] == (4, "`--num_processes 4`")
    assert line.command["accelerate"].processes == 4


def test_a_missing_config_is_an_unknown_plan_and_no_estimate(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "run.sh").write_text("accelerate launch --config_file gone.yaml src/train.py llama3_full_sft.yaml\n")
    proj, line = _line(folder, "run.sh")
    assert line.command["accelerate"].kind == "unknown"
    assert line.command["launcher_gpus"] is None
    assert proj.context(line).job.estimate(8) is None  # the memory rules stay silent


def test_a_yaml_launched_under_two_plans_is_judged_at_each_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    proj = build_project([folder], Settings())
    (yaml_source,) = [s for s in proj.sources if s.document.path.name == "llama3_full_sft.yaml"]
    assert yaml_source.command["accelerate"].kind == "unknown"


def _cfgopt(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cfgopt", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )


def test_estimate_of_an_fsdp_launch_script(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    run = _cfgopt(folder, "estimate", "run_fsdp.sh", "--target", "h100", "--format", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["gpus"] == 8 and "8 GPU(s) from the launch line" in out["target_source"]
    assert out["distributed"] == "FSDP FULL_SHARD over 8 GPU(s) (fsdp_config.yaml)"
    assert out["weights_gib"] == pytest.approx(4 * PSI / 8 / GIB)
    text = _cfgopt(folder, "estimate", "run_fsdp.sh", "--target", "h100").stdout
    assert "FSDP FULL_SHARD over 8 GPU(s) (fsdp_config.yaml), no DeepSpeed" in text.splitlines()[0]
    assert "not measured" in text


def test_mem001_on_a_ddp_line_names_its_gpus_and_fsdp(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    run = _cfgopt(folder, "lint", "run_ddp.sh", "--target", "h100", "--format", "json")
    found = [d for d in json.loads(run.stdout)["diagnostics"] if d["code"] == "MEM001"]
    (mem001,) = found
    assert "with 4 GPU(s) (Llama" in mem001["message"]  # the line states 4: not "(assumed; --gpus)"
    assert "`distributed_type: FSDP` (FULL_SHARD) in ddp_config.yaml" in mem001["message"]


def test_reading_the_accelerate_config_imports_neither_torch_nor_accelerate(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    code = (
        "import sys; from pathlib import Path; from cfgopt.job.settings import Settings; "
        "from cfgopt.lint.engine import build_project; "
        f"build_project([Path({str(folder)!r})], Settings()); "
        "print(sorted(m for m in ('torch', 'accelerate', 'transformers') if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
    )
    assert run.stdout.strip() == "[]", run.stderr


def test_fsdp2_reshards_the_root_after_the_forward_as_accelerate_sets_it() -> None:
    v1 = next(c for c in _estimate(FULL, FSDP).components if c.name == "FSDP gathered parameters")
    v2 = next(c for c in _estimate(FULL, FSDP._replace(fsdp_version=2)).components if c.name == v1.name)
    assert (v1.phases, v2.phases) == (("loss", "backward"), ("backward",))
    assert v1.gib == v2.gib


def test_an_hf_trainer_script_under_an_accelerate_config_gets_its_plan(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "run.sh").write_text(
        "accelerate launch --config_file=ddp_config.yaml train.py --model_name_or_path m --output_dir out "
        "--per_device_train_batch_size 4 --bf16\n"
    )
    proj, line = _line(folder, "run.sh")
    assert line.command["trainer"] == "hf"
    assert proj.context(line).job.distributed.kind == "ddp"
    assert line.command["launcher_gpus"] == (4, "`num_processes: 4` in ddp_config.yaml")


def test_mem001_under_fsdp_names_the_gpus_its_own_config_needs(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    config = (folder / "fsdp_config.yaml").read_text().replace("num_processes: 8", "num_processes: 2")
    (folder / "fsdp_config.yaml").write_text(config)
    long = (folder / "llama3_full_sft.yaml").read_text().replace("cutoff_len: 2048", "cutoff_len: 16384")
    (folder / "llama3_full_sft.yaml").write_text(long)
    run = _cfgopt(folder, "lint", "run_fsdp.sh", "--target", "h100", "--format", "json")
    (mem001,) = [d for d in json.loads(run.stdout)["diagnostics"] if d["code"] == "MEM001"]
    assert "with 2 GPU(s) (Llama" in mem001["message"]
    assert "ZeRO" not in mem001["message"]  # the job shards with FSDP: its own config's remedies
    assert "`fsdp_offload_params: true` in fsdp_config.yaml" in mem001["message"]


def test_one_units_gradient_waits_for_its_reduce_scatter_in_the_backward() -> None:
    component = next(c for c in _estimate(FULL, FSDP).components if c.name == "FSDP unit gradient")
    assert component.gib == pytest.approx(2 * layer_params(L8) / GIB)
    assert component.phases == ("backward",)
    one_gpu = _estimate(FULL, FSDP, gpus=1)
    assert "FSDP unit gradient" not in {c.name for c in one_gpu.components}  # one rank: the shard is the whole


def test_an_expansion_among_accelerates_options_leaves_the_plan_unknown(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "run.sh").write_text(
        "accelerate launch $EXTRA --config_file fsdp_config.yaml src/train.py llama3_full_sft.yaml\n"
    )
    _, line = _line(folder, "run.sh")
    assert line.command["accelerate"].kind == "unknown"
    assert line.command["launcher_gpus"] is None  # `$EXTRA` may hold `--num_processes`


ACCELERATE_ZERO3 = """\
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  offload_optimizer_device: cpu
  zero3_init_flag: true
  zero_stage: 3
mixed_precision: bf16
num_processes: 8
"""


def test_accelerates_deepspeed_plugin_is_judged_as_the_json_it_builds(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "zero3.yaml").write_text(ACCELERATE_ZERO3)
    (folder / "run.sh").write_text("accelerate launch --config_file zero3.yaml src/train.py llama3_full_sft.yaml\n")
    proj, line = _line(folder, "run.sh")
    job = proj.context(line).job
    known, ds = job.memory_deepspeed
    assert known and ds["zero_optimization"]["stage"] == 3 and ds["bf16"] == {"enabled": True}
    assert job.deepspeed == (True, None)  # the DeepSpeed rules judge a JSON; there is none
    est = job.estimate(8)
    assert est is not None and est.zero_stage == 3 and est.offloaded_gib > 0
    json_ds = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": True}}
    assert est.required_gib == pytest.approx(job.estimate(8, deepspeed=json_ds).required_gib)
    text = _cfgopt(folder, "estimate", "run.sh", "--target", "h100").stdout
    assert "ZeRO-3 (accelerate's DeepSpeed plugin, zero3.yaml)" in text.splitlines()[0]


def test_the_plugins_defaults_and_a_config_file_it_would_read() -> None:
    plan = accelerate_plan({"distributed_type": "DEEPSPEED", "mixed_precision": "fp16"})
    assert plan.zero == (2, "none", "none")  # accelerate's defaults: ZeRO-2, no offload
    ds = plugin_deepspeed(plan, fp16=False, bf16=False)
    assert ds["fp16"] == {"enabled": True} and ds["zero_optimization"]["stage"] == 2
    named = {"distributed_type": "DEEPSPEED", "deepspeed_config": {"deepspeed_config_file": "ds.json"}}
    assert accelerate_plan(named).zero is None and plugin_deepspeed(accelerate_plan(named), False, True) is None
    assert accelerate_plan({"distributed_type": "DEEPSPEED"}, {"--zero_stage": "3"}).zero == (3, "none", "none")
