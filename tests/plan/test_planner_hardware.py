"""The plan judges the hardware and packages the rules judge (issue 45): no kernel the target cannot run, no plan on an
environment that cannot start the job, a pin proposed only with the plan that uses it, and without a target only
what holds on every GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from rule_cases import run_cli

from cfgopt.environment import Environment, Origin
from cfgopt.environment.stated import fa2_outcome, fa2_refusal, found_environment
from cfgopt.job.settings import Settings
from cfgopt.knowledge.targets import TARGETS, UNSTATED
from cfgopt.plan.planner import plan_for
from cfgopt.plan.wording import description
from cfgopt.project.loader import load_job

# A Llama-3-8B LoRA SFT with room to plan (the seed's model, batch and ZeRO-3 left out: one file, no JSON)
CONFIG = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: q_proj,v_proj
dataset: alpaca_en_demo
template: llama3
cutoff_len: 1024
output_dir: out
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
learning_rate: 5.0e-5
warmup_ratio: 0.1
{extra}"""
ADVICE = ["PF", "MEM"]


def _project(tmp_path: Path, requirements: str, extra: str = "bf16: true\n") -> Path:
    (tmp_path / "requirements.txt").write_text(requirements)
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(extra=extra))
    return path


def _plan(path: Path, target: str, **settings):
    """The plan as `cfgopt lint` makes it: the environment read from the requirement file beside the config."""
    settings.setdefault("extend_select", ADVICE)
    settings.setdefault("environment", found_environment(path.parent))
    return plan_for(load_job(path, Settings(target_name=target, **settings)))


# ---------------------------------------------------------------- no kernel the target cannot run


@pytest.mark.parametrize("target", ["v100", "v100-16gb", "t4"])
def test_no_fa2_before_ampere_though_flash_attn_is_installed(tmp_path: Path, target: str) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n", extra="fp16: true\n")
    plan = _plan(path, target, gpus=1)  # None: nothing fits a 16 GiB V100 by the memory model
    assert plan is None or plan.best.attn != "fa2"
    assert plan is None or not any("fa2" in note for note in plan.notes)  # no regret on a GPU that cannot run it
    on_ampere = _plan(path, "a100", gpus=1)
    assert on_ampere is not None and on_ampere.best.attn == "fa2"  # the same files where fa2 runs


def test_fix_for_v100_writes_no_fa2(tmp_path: Path) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n")
    args = ["fix", "--write", "--unsafe-fixes", "--target", "v100", str(tmp_path)]
    run_cli(args)
    text = path.read_text()
    assert "fa2" not in text and "neat_packing: true" in text  # planned, but not the kernel V100 lacks


def test_mi300x_plans_no_fa2_on_a_flash_attn_of_unknown_build_and_says_why(tmp_path: Path) -> None:
    """ENV001 warns that a flash-attn from the default index may not be AMD's build: the plan turns no fa2 on."""
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n")
    plan = _plan(path, "mi300x", gpus=8)
    assert plan is not None and plan.best.attn != "fa2"
    assert any("requirements.txt may not be AMD's build" in note for note in plan.notes)
    rocm_wheel = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4+rocm6.2\n")
    plan = _plan(rocm_wheel, "mi300x", gpus=8)
    assert plan is not None and plan.best.attn == "fa2"


def test_fa2_refusal_names_each_reason() -> None:
    reqs = Environment({"flash_attn": "==2.7.4"}, "requirements.txt")
    snapshot = reqs._replace(source="env.json (--environment)", origin=Origin.SNAPSHOT)
    assert "older than Ampere" in (fa2_refusal(reqs, TARGETS["t4"]) or "")
    assert "may not be AMD's build" in (fa2_refusal(reqs, TARGETS["mi300x"]) or "")
    assert fa2_refusal(snapshot, TARGETS["mi300x"]) is None  # what the node has installed is its own build
    assert fa2_refusal(reqs, TARGETS["h100"]) is None and fa2_refusal(reqs, TARGETS["a10"]) is None
    assert "no target stated" in (fa2_refusal(reqs, UNSTATED) or "")


CUDA_WHEEL = (
    "flash-attn @ https://github.com/Dao-AILab/flash-attention/releases/download/v2.7.4.post1/"
    "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl\n"
)


def test_fa2_outcome_is_what_the_job_runs() -> None:
    """One answer for the plan's ranking and LF049: runs, falls back (no flash-attn, no GPU), or stops the job."""
    wheel = CUDA_WHEEL.split(" ", 1)[1].strip()
    cuda_wheel = Environment({"flash_attn": wheel}, "requirements.txt")
    default_index = Environment({"flash_attn": "==2.7.4"}, "requirements.txt")
    none = Environment({}, "requirements.txt")
    assert fa2_outcome(cuda_wheel, TARGETS["mi300x"]) == (False, fa2_outcome(cuda_wheel, TARGETS["mi300x"]).stops)
    assert "is a CUDA build: on mi300x" in (fa2_outcome(cuda_wheel, TARGETS["mi300x"]).stops or "")
    assert fa2_outcome(cuda_wheel, TARGETS["h100"]) == (True, None)
    assert fa2_outcome(default_index, TARGETS["mi300x"]) == (True, None)  # built for the torch present: not known
    assert "older than Ampere" in (fa2_outcome(default_index, TARGETS["v100"]).stops or "")
    assert fa2_outcome(none, TARGETS["v100"]) == (False, None)  # LLaMA-Factory keeps SDPA
    assert fa2_outcome(default_index, TARGETS["cpu"]) == (False, None)  # no GPU: is_flash_attn_2_available is False
    assert fa2_outcome(default_index, UNSTATED) == (True, None)  # the user's own fa2 is taken to run
    installed = cuda_wheel._replace(origin=Origin.SNAPSHOT)
    assert fa2_outcome(installed, TARGETS["mi300x"]) == (True, None)  # the node's own build: doctor judges it


def test_mi300x_with_a_cuda_flash_attn_wheel_plans_what_runs_and_lf049_flags_the_yaml(tmp_path: Path) -> None:
    """Issue 45 / explore-plan finding 5: with a CUDA wheel on ROCm the model load stops (LF049's error); the plan
    ranks and writes SDPA, the plan the same files get without flash-attn, and `fix` writes what lint shows."""
    extra = "bf16: true\nflash_attn: fa2\n"
    path = _project(tmp_path, "llamafactory==0.9.5\n" + CUDA_WHEEL, extra=extra)
    plan = _plan(path, "mi300x", gpus=8)
    assert plan is not None and plan.base.attn == "fa2" and plan.best.attn == "sdpa"
    assert any(
        "`fa2` stops this job (the flash-attn in " in r and "requirements.txt is a CUDA build" in r
        for r in plan.remarks
    )
    assert not any("flash-attn not in the environment" in r for r in plan.remarks)
    without = _plan(_project(tmp_path, "llamafactory==0.9.5\n", extra=extra), "mi300x", gpus=8)
    assert without is not None and (without.best, without.gain) == (plan.best, plan.gain)
    path = _project(tmp_path, "llamafactory==0.9.5\n" + CUDA_WHEEL, extra=extra)
    assert _codes(path, "--target", "mi300x").get("LF049") == "error"
    assert "LF049" not in _codes(path, "--target", "h100")
    # the default index builds for the torch present (AMD's build with ROCm torch): ENV001 warns, nothing stops
    default_index = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n", extra=extra)
    assert "LF049" not in _codes(default_index, "--target", "mi300x")
    path = _project(tmp_path, "llamafactory==0.9.5\n" + CUDA_WHEEL, extra=extra)
    args = ["--target", "mi300x", "--gpus", "8", "--extend-select", "PF,MEM"]
    _, out, _ = run_cli(["lint", str(path), *args])
    shown = next(line for line in out.splitlines() if "Speed plan for 8 x mi300x" in line)
    run_cli(["fix", "--write", "--unsafe-fixes", *args, str(path)])
    text = path.read_text()
    assert "flash_attn: sdpa" in text and "fa2" not in text
    micro, ga = plan.best.micro, plan.best.ga
    assert f"{micro} x {ga} (micro-batch x accumulation" in shown and f"per_device_train_batch_size: {micro}\n" in text


def test_v100_with_flash_attn_installed_plans_no_fa2_from_the_yaml(tmp_path: Path) -> None:
    """fa2 stops at the first forward before Ampere: the plan keeps no candidate with it (no LF019 one-row limit)."""
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n", extra="fp16: true\nflash_attn: fa2\n")
    plan = _plan(path, "v100", gpus=8)
    assert plan is not None and plan.best.attn == "sdpa"
    assert not any("one row per micro-batch" in r for r in plan.remarks)


def _codes(path: Path, *args: str) -> dict[str, str]:
    import json

    _, out, _ = run_cli(["lint", str(path), "--format", "json", *args])
    return {d["code"]: d["severity"] for d in json.loads(out)["diagnostics"]}


@pytest.mark.parametrize("target", ["v100", "t4"])
def test_lint_flags_fa2_before_ampere_an_error_only_where_flash_attn_is_installed(tmp_path: Path, target: str) -> None:
    """With flash-attn the first step stops in flash-attn's kernel; without it LLaMA-Factory keeps SDPA."""
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n", extra="fp16: true\nflash_attn: fa2\n")
    assert _codes(path, "--target", target).get("LF049") == "error"
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.5\n")
    assert _codes(path, "--target", target).get("LF049") == "warning"
    assert "LF049" not in _codes(path, "--target", "a100") and "LF049" not in _codes(path, "--isolated")


def test_no_advice_to_use_fa2_where_it_cannot_run(tmp_path: Path) -> None:
    """PF005 asks for fa2 with neat packing where flash-attn is installed: not on a V100."""
    extra = "fp16: true\nneat_packing: true\nflash_attn: sdpa\n"
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\n", extra=extra)
    assert "PF005" in _codes(path, "--target", "a100", "--extend-select", "PF005")
    assert "PF005" not in _codes(path, "--target", "v100", "--extend-select", "PF005")


# ---------------------------------------------------------------- no plan for a job that does not start


def test_no_plan_where_the_environment_stops_the_job_and_one_line_says_why(tmp_path: Path) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\ntransformers==4.46.1\n")
    plan = _plan(path, "h100", gpus=1)
    assert plan is not None and not plan.changed and plan.gain == 1.0
    _, out, _ = run_cli(["lint", str(tmp_path), "--target", "h100", "--gpus", "1", "--extend-select", "PF,MEM"])
    assert "Speed plan" not in out  # no fix offers a gain
    (line,) = [x for x in out.splitlines() if "no speed plan" in x]
    assert "transformers 4.46.1 in " in line and "stops at start-up unless DISABLE_VERSION_CHECK=1 (ENV002)" in line
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.5\ntransformers==4.57.1\n")
    started = _plan(path, "h100", gpus=1)
    assert started is not None and started.changed  # in the range: planned as before


# ---------------------------------------------------------------- a pin only with the plan that uses it


def _pin_fix(tmp_path: Path, *args: str) -> str | None:
    """ENV004's fix on the requirement file, linting the folder (the config and its requirement file)."""
    import json

    _, out, _ = run_cli(["lint", str(tmp_path), "--format", "json", *args])
    found = [d for d in json.loads(out)["diagnostics"] if d["code"] == "ENV004"]
    return (found[0].get("fix") or {}).get("description", "") if found else None


def test_liger_pin_is_proposed_only_where_a_later_run_turns_liger_on(tmp_path: Path) -> None:
    _project(tmp_path, "llamafactory==0.9.5\n")
    assert _pin_fix(tmp_path, "--target", "h100", "--gpus", "1", "--extend-select", "PF,MEM") == "Add liger-kernel"
    # ROCm: Liger is planned only where PF009 is selected by name, so only then is its pin
    assert _pin_fix(tmp_path, "--target", "mi300x", "--gpus", "8", "--extend-select", "PF,MEM") is None
    named = _pin_fix(tmp_path, "--target", "mi300x", "--gpus", "8", "--extend-select", "PF,MEM,PF009")
    assert named == "Add liger-kernel"
    # Triton's kernels need compute capability 8.0: no Liger plan on a T4, so no pin
    assert _pin_fix(tmp_path, "--target", "t4", "--gpus", "1", "--extend-select", "PF,MEM") is None


def test_no_pin_without_the_plan_in_the_same_fix(tmp_path: Path) -> None:
    """The config's speed findings not in the run (not selected, or not fixable): the finding stays, unfixed."""
    _project(tmp_path, "llamafactory==0.9.5\n")
    assert _pin_fix(tmp_path, "--target", "h100", "--gpus", "1", "--select", "ENV004") == ""
    unfixable = ["--target", "h100", "--gpus", "1", "--extend-select", "PF,MEM", "--unfixable", "PF,MEM"]
    assert _pin_fix(tmp_path, *unfixable) == ""


def test_the_pin_and_the_plan_that_uses_it_are_written_by_one_fix(tmp_path: Path) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\n")
    run_cli(
        [
            "fix",
            "--write",
            "--unsafe-fixes",
            "--target",
            "h100",
            "--gpus",
            "1",
            "--extend-select",
            "PF,MEM",
            str(tmp_path),
        ]
    )
    assert "liger-kernel>=0.6.3" in (tmp_path / "requirements.txt").read_text()
    assert "enable_liger_kernel: true" in path.read_text()


# ---------------------------------------------------------------- without a target: what holds on every GPU


def test_without_a_target_the_plan_moves_only_what_holds_on_every_gpu(tmp_path: Path) -> None:
    """fp16 stays (bf16 is emulated on V100 / T4), the micro-batch and packing stay (no memory to judge them by: a
    packed row is cutoff_len long), no fa2 or Liger (not before Ampere, unmeasured on ROCm); eager attention becomes
    SDPA, and the plan says what it was made for and what it kept."""
    extra = "fp16: true\nflash_attn: disabled\n"
    path = _project(tmp_path, "llamafactory==0.9.5\nflash-attn==2.7.4\nliger-kernel==0.6.3\n", extra=extra)
    plan = plan_for(load_job(path, Settings(extend_select=ADVICE, environment=found_environment(tmp_path))))
    assert plan is not None and plan.best.attn == "sdpa" and not plan.best.packing
    assert (plan.best.micro, plan.best.precision) == (plan.base.micro, plan.base.precision) == (4, "fp16")
    assert not plan.best.liger
    assert description(plan).startswith("Speed plan for any GPU (no target stated: only what holds on every GPU")
    assert "micro-batch, packing and gradient checkpointing as written" in description(plan)
    assert "unstated" not in description(plan)


def test_without_a_target_no_precision_is_written(tmp_path: Path) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\n", extra="")
    run_cli(["fix", "--write", "--unsafe-fixes", "--isolated", "--extend-select", "PF,MEM", str(path)])
    text = path.read_text()
    assert "bf16" not in text and "fp16" not in text and "per_device_train_batch_size: 4\n" in text


# ---------------------------------------------------------------- words that promise only what the fix keeps


def test_a_plan_that_packs_says_what_changes_per_step(tmp_path: Path) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\n")
    plan = _plan(path, "h100", gpus=1)
    assert plan is not None and plan.best.packing and not plan.base.packing
    words = description(plan)
    assert "same global batch" not in words and "same rows per step" in words
    assert "more samples per step and fewer steps per epoch, by the packing factor" in words
    packed = _project(tmp_path, "llamafactory==0.9.5\n", extra="bf16: true\npacking: true\n")
    kept = _plan(packed, "h100", gpus=1)
    assert kept is not None and "packing factor" not in description(kept)  # the user's own packing: no change


def test_a_json_the_plan_stops_reading_gets_no_new_key(tmp_path: Path) -> None:
    """8 x MI300X, bf16, a ZeRO-3 JSON without `communication_data_type`: DS023 would add it, but the plan drops
    `deepspeed:` from the only config reading the JSON, so the JSON is left as it is (the README's promise)."""
    (tmp_path / "ds.json").write_text('{\n  "zero_optimization": {"stage": 3},\n  "bf16": {"enabled": "auto"}\n}\n')
    _project(tmp_path, "llamafactory==0.9.5\n", extra="bf16: true\ndeepspeed: ds.json\n")
    args = ["--target", "mi300x", "--gpus", "8", "--extend-select", "PF,MEM", str(tmp_path)]
    _, out, _ = run_cli(["lint", *args])
    assert "DS023" in out and "Left as it is: every config that reads this JSON drops DeepSpeed" in out
    run_cli(["fix", "--write", "--unsafe-fixes", *args])
    assert "deepspeed:" not in (tmp_path / "cfg.yaml").read_text()
    assert "communication_data_type" not in (tmp_path / "ds.json").read_text()  # not on a later pass either


MI300X_8 = ["--target", "mi300x", "--gpus", "8"]


def _texts(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_json_the_plan_stops_reading_is_left_alone_in_one_run(tmp_path: Path) -> None:
    """The only config reading a bf16 JSON drops `deepspeed:` by its plan: the first fix says why DS023 is not
    applied, and the second finds nothing to do (the JSON, read by no config now, gets DS023's fix display-only)."""
    (tmp_path / "ds.json").write_text('{\n  "zero_optimization": {"stage": 3},\n  "bf16": {"enabled": true}\n}\n')
    _project(tmp_path, "llamafactory==0.9.5\n", extra="bf16: true\nflash_attn: sdpa\ndeepspeed: ds.json\n")
    _, _, said = run_cli(["fix", "--write", "--unsafe-fixes", *MI300X_8, str(tmp_path)])
    assert "deepspeed:" not in (tmp_path / "cfg.yaml").read_text()
    assert "communication_data_type" not in (tmp_path / "ds.json").read_text()
    assert 'DS023 fix not applied: Add "communication_data_type": "fp32": Left as it is: every config' in said
    after = _texts(tmp_path)
    code, _, again = run_cli(["fix", "--write", "--unsafe-fixes", *MI300X_8, str(tmp_path)])
    assert (code, _texts(tmp_path)) == (0, after) and "fixed:" not in again and "fix not applied" not in again


def test_the_seed_json_gets_no_speed_fix_once_the_plan_drops_it(tmp_path: Path) -> None:
    """The seed: the YAML's own fixes come first, then its plan drops `deepspeed:` (so does the script's): DS023
    waits for them and leaves the JSON's reduction dtype alone; what DeepSpeed rejects in any use (the misspelt
    key, no batch size) is fixed, as a later run would fix it. One run reaches the fixed point."""
    import shutil

    from rule_cases import ROOT

    shutil.copytree(ROOT / "fixtures" / "seed", tmp_path / "seed")
    folder = tmp_path / "seed"
    run_cli(["fix", "--write", "--unsafe-fixes", *MI300X_8, str(folder)])
    ds = (folder / "ds_z3_config.json").read_text()
    assert "communication_data_type" not in ds and "stage3_parition_grads" not in ds
    assert "deepspeed" not in (folder / "llama3_lora_sft.yaml").read_text() + (folder / "train.sh").read_text()
    after = _texts(folder)
    code, _, again = run_cli(["fix", "--write", "--unsafe-fixes", *MI300X_8, str(folder)])
    assert (code, _texts(folder)) == (0, after) and "fixed:" not in again


def test_a_json_a_kept_reader_uses_gets_ds023_after_the_configs_fixes(tmp_path: Path) -> None:
    """DS023 waits for the config's own fixes only: where its reader keeps DeepSpeed, the same run adds the key."""
    (tmp_path / "ds.json").write_text('{\n  "zero_optimization": {"stage": 3},\n  "bf16": {"enabled": true}\n}\n')
    _project(tmp_path, "llamafactory==0.9.5\n", extra="compute_type: bf16\ndeepspeed: ds.json\n")
    options = [*MI300X_8, "--select", "LF001,DS023", str(tmp_path)]
    run_cli(["fix", "--write", "--unsafe-fixes", *options])
    assert "bf16: true" in (tmp_path / "cfg.yaml").read_text()
    assert '"communication_data_type": "fp32"' in (tmp_path / "ds.json").read_text()
    assert "fixed:" not in run_cli(["fix", "--write", "--unsafe-fixes", *options])[2]


def test_lf003_names_the_kernel_sdpa_runs_on_the_target(tmp_path: Path) -> None:
    """torch's flash SDPA kernel needs sm80 as FlashAttention-2 does: on a V100 SDPA is memory-efficient."""
    import json

    path = _project(tmp_path, "llamafactory==0.9.5\n", extra="fp16: true\nflash_attn: true\n")

    def described(target: str) -> str:
        _, out, _ = run_cli(["lint", str(path), "--format", "json", "--select", "LF003", "--target", target])
        return json.loads(out)["diagnostics"][0]["fix"]["description"]

    assert described("v100") == "Use `sdpa` (memory-efficient SDPA on v100; `fa2` needs Ampere or newer (LF049))"
    assert described("a100") == "Use `sdpa` (flash-backed SDPA on a100; `fa2` needs the flash-attn package)"


def test_no_plan_where_torch_is_built_for_the_other_platform(tmp_path: Path) -> None:
    path = _project(tmp_path, "llamafactory==0.9.5\ntorch==2.5.1+cu121\n")
    plan = _plan(path, "mi300x", gpus=8)
    assert plan is not None and not plan.changed and "is a CUDA build: on mi300x it finds no GPU" in plan.why
    on_nvidia = _plan(path, "h100", gpus=1)
    assert on_nvidia is not None and on_nvidia.changed


# ---------------------------------------------------------------- without a memory estimate: nothing that spends memory


@pytest.mark.parametrize("target", ["t4", "h100", "mi300x"])
def test_the_seeds_plan_without_an_estimate_keeps_what_spends_memory_and_says_it_is_provisional(
    tmp_path: Path, target: str
) -> None:
    """Explore-plan finding 3: the seed's `flash_attn: true` is not modelled, so lint plans it without an estimate;
    the micro-batch went up to 8k tokens (8 x 2: 32 GiB on a 16 GiB T4 by the tool's own estimate). Now the
    micro-batch, packing and checkpointing stay as written, and the plan says it holds until LF003 is fixed."""
    import shutil

    from repo_paths import ROOT

    for name in ("llama3_lora_sft.yaml", "ds_z3_config.json"):
        shutil.copy(ROOT / "fixtures" / "seed" / name, tmp_path / name)
    job = load_job(tmp_path / "llama3_lora_sft.yaml", Settings(target_name=target, gpus=1))
    plan = plan_for(job)
    assert plan is not None and plan.est_gib is None and plan.changed
    b, k = plan.base, plan.best
    assert (
        (k.micro, k.ga, k.gc, k.packing, k.optim)
        == (b.micro, b.ga, b.gc, b.packing, b.optim)
        == (4, 4, True, False, "default")
    )
    words = description(plan)
    assert "micro-batch, packing and gradient checkpointing as written: no memory estimate" in words
    assert "(not modelled: flash_attn True" in words and "provisional until that is fixed" in words
    assert "packing not planned" not in words  # the remark says it once
