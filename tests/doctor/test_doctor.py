"""`cfgopt doctor`: the environment read from fake trees (a site-packages of dist-info folders and empty extension
files, /sys and /proc under a root), for a ROCm MI300X node, an NVIDIA node and a CPU laptop; each check fires in
one case and stays quiet in another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_nodes import findings, flash_attn_extension, laptop_root, mi300x_root, nvidia_root, site
from repo_paths import ROOT
from rule_cases import TRAIN, run_cli

from cfgopt.doctor import checks
from cfgopt.environment import gpus
from cfgopt.environment.node import read_stack, summary
from cfgopt.text.diagnostics import Severity

CONFIG = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: mine
dataset_dir: data
template: llama3
output_dir: saves/x
bf16: true
"""
OFFLOAD = '{"train_batch_size": "auto", "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}'


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    for variable in (*("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"), "FORCE_TORCHRUN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    gpus._CACHE.clear()
    yield
    gpus._CACHE.clear()


def config(tmp_path: Path, extra: str = "", dataset: bool = True) -> Path:
    if dataset:
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "data/mine.json").write_text("[]")
        (tmp_path / "data/dataset_info.json").write_text('{"mine": {"file_name": "mine.json"}}')
    path = tmp_path / "train.yaml"
    path.write_text(CONFIG + extra)
    return path


def codes(found) -> list[str]:
    return [c for c, _, _ in found]


# ------------------------------------------------------------------------------------------------ the stack
def test_the_stack_of_three_machines_is_read_from_files(tmp_path: Path) -> None:
    amd, _ = findings(tmp_path / "a", mi300x_root(tmp_path / "a"), site(tmp_path / "a", "rocm"))
    assert amd.target.name == "mi300x" and amd.gpu_count == 8 and amd.rocm_version.startswith("6.2.4")
    assert (
        amd.torch_runtime == "rocm"
        and "ROCm/HIP 6.2.41133" in summary(amd)
        and "8 x AMD Instinct MI300X" in summary(amd)
    )
    nv, _ = findings(tmp_path / "n", nvidia_root(tmp_path / "n"), site(tmp_path / "n", "cuda"))
    assert nv.target.name == "h200" and nv.cuda_version == "12.4.1" and "CUDA toolkit 12.4.1" in summary(nv)
    cpu, found = findings(tmp_path / "c", laptop_root(tmp_path / "c"), site(tmp_path / "c", "cpu"))
    assert cpu.target is None and "no GPU found" in summary(cpu) and found == []


def test_torch_built_for_another_runtime(tmp_path: Path) -> None:
    _, found = findings(tmp_path / "x", mi300x_root(tmp_path / "x"), site(tmp_path / "x", "cuda"))
    assert codes(found) == ["DOC010"] and "CUDA build" in found[0][2]
    _, found = findings(tmp_path / "y", mi300x_root(tmp_path / "y"), site(tmp_path / "y", "rocm"))
    assert "DOC010" not in codes(found)


# ------------------------------------------------------------------------------------------------ per check
@pytest.mark.parametrize(
    ("links", "env", "expected"),
    [
        (None, {}, Severity.WARNING),  # not installed: falls back to SDPA
        (b"libc10_cuda.so libcudart.so.12", {}, Severity.ERROR),  # a CUDA build on ROCm torch
        (b"libc10_hip.so libamdhip64.so.6", {}, None),  # AMD's CK build
        ("triton", {}, Severity.WARNING),
        ("triton", {"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}, None),
    ],
)
def test_attention_the_config_asks_for(tmp_path: Path, links, env: dict, expected) -> None:
    folder = site(tmp_path, "rocm", flash_attn="2.7.3" if links is not None else "")
    if isinstance(links, bytes):
        flash_attn_extension(folder, links)
    elif links == "triton":
        (folder / "flash_attn" / "flash_attn_triton_amd").mkdir(parents=True)
    _, found = findings(tmp_path, mi300x_root(tmp_path), folder, env, config(tmp_path, "flash_attn: fa2\n"))
    assert [s for c, s, _ in found if c == "DOC001"] == ([expected] if expected else [])


def test_flash_attn_built_for_this_gpu_architecture(tmp_path: Path) -> None:
    cfg = config(tmp_path, "flash_attn: fa2\n")
    for arch, expected in (("gfx90a", ["DOC001"]), ("gfx942:sramecc+:xnack-", [])):
        folder = site(tmp_path / arch.replace(":", "_"), "rocm", flash_attn="2.7.3")
        flash_attn_extension(folder, b"libamdhip64.so.6" + b"\0" * 100 + f"hipv4-amdgcn-amd-amdhsa--{arch}".encode())
        _, found = findings(
            tmp_path / arch.replace(":", "_"), mi300x_root(tmp_path / arch.replace(":", "_")), folder, cfg=cfg
        )
        assert codes(found) == expected, arch
    assert "built for gfx90a, not for this node's gfx942" in found_message(tmp_path, cfg)


def found_message(tmp_path: Path, cfg: Path) -> str:
    folder = tmp_path / "gfx90a" / "site"
    return findings(tmp_path / "gfx90a", tmp_path / "gfx90a" / "root", folder, cfg=cfg)[1][0][2]


def test_llamafactory_itself_missing(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    bare = site(tmp_path / "a", "cuda", llamafactory="")
    _, found = findings(tmp_path / "a", nvidia_root(tmp_path / "a", count=1), bare, cfg=cfg)
    assert codes(found) == ["DOC013"] and "LLaMA-Factory is not installed" in found[0][2]
    _, found = findings(tmp_path / "b", nvidia_root(tmp_path / "b", count=1), site(tmp_path / "b", "cuda"), cfg=cfg)
    assert found == []


def test_bitsandbytes_with_rocm_support_when_the_config_quantizes(tmp_path: Path) -> None:
    cfg = config(tmp_path, "quantization_bit: 4\n")
    _, found = findings(
        tmp_path / "a", mi300x_root(tmp_path / "a"), site(tmp_path / "a", bitsandbytes="0.43.3"), cfg=cfg
    )
    assert codes(found) == ["DOC012"] and "before 0.47" in found[0][2]
    _, found = findings(
        tmp_path / "b", mi300x_root(tmp_path / "b"), site(tmp_path / "b", bitsandbytes="0.48.2"), cfg=cfg
    )
    assert found == []
    _, found = findings(tmp_path / "c", mi300x_root(tmp_path / "c"), site(tmp_path / "c"), cfg=cfg)
    assert codes(found) == ["DOC012"] and "not installed" in found[0][2]


def test_liger_present_for_this_gpu(tmp_path: Path) -> None:
    cfg = config(tmp_path, "enable_liger_kernel: true\n")
    _, found = findings(tmp_path / "a", mi300x_root(tmp_path / "a"), site(tmp_path / "a"), cfg=cfg)
    assert codes(found) == ["DOC002"] and "not installed" in found[0][2]
    folder = site(tmp_path / "b", liger_kernel="0.6.2", pytorch_triton_rocm="3.1.0")
    _, found = findings(tmp_path / "b", mi300x_root(tmp_path / "b"), folder, cfg=cfg)
    assert "DOC002" not in codes(found)


def test_deepspeed_cpu_adam_built_or_buildable_when_the_json_offloads(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(OFFLOAD)
    cfg = config(tmp_path, "deepspeed: ds.json\n")
    root = mi300x_root(tmp_path)
    folder = site(tmp_path, deepspeed="0.16.4")
    _, found = findings(tmp_path, root, folder, cfg=cfg)
    assert [(c, s) for c, s, _ in found] == [("DOC003", Severity.ERROR)] and "no a C++ compiler and ninja" in found[0][
        2
    ]
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("c++", "ninja"):
        (tools / tool).write_text("#!/bin/sh\n")
        (tools / tool).chmod(0o755)
    _, found = findings(tmp_path, root, folder, {"PATH": str(tools)}, cfg)
    assert [(c, s) for c, s, _ in found] == [("DOC003", Severity.INFO)]
    (folder / "deepspeed/ops/adam").mkdir(parents=True)
    (folder / "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    _, found = findings(tmp_path, root, folder, cfg=cfg)
    assert found == []


def test_force_torchrun_for_deepspeed_on_one_gpu(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text('{"train_batch_size": "auto", "zero_optimization": {"stage": 2}}')
    cfg = config(tmp_path, "deepspeed: ds.json\n")
    folder = site(tmp_path, "cuda", deepspeed="0.16.4")
    one = nvidia_root(tmp_path / "one", 1)
    _, found = findings(tmp_path / "one", one, folder, cfg=cfg)
    assert codes(found) == ["DOC004"]
    _, found = findings(tmp_path / "one", one, folder, {"FORCE_TORCHRUN": "1"}, cfg)
    assert found == []
    _, found = findings(tmp_path / "eight", nvidia_root(tmp_path / "eight", 8), folder, cfg=cfg)
    assert found == []
    _, found = findings(tmp_path / "one", one, folder, {"FORCE_TORCHRUN": "yes"}, cfg)
    assert codes(found) == ["DOC004"]  # 0.9.5's is_env_enabled takes "true", "y" or "1" only


@pytest.mark.parametrize(("prefix", "expected"), [("FORCE_TORCHRUN=1 ", []), ("", ["DOC004"])])
def test_a_launch_line_that_forces_torchrun_is_the_jobs_launch(tmp_path: Path, prefix: str, expected: list) -> None:
    """The script beside the YAML launches it with FORCE_TORCHRUN=1: the node's variable does not decide (XF003)."""
    (tmp_path / "ds.json").write_text('{"train_batch_size": "auto", "zero_optimization": {"stage": 2}}')
    config(tmp_path, "deepspeed: ds.json\n")
    (tmp_path / "train.sh").write_text(f"{prefix}llamafactory-cli train train.yaml\n")
    folder = site(tmp_path, "cuda", deepspeed="0.16.4")
    _, found = findings(tmp_path / "one", nvidia_root(tmp_path / "one", 1), folder, cfg=tmp_path / "train.sh")
    assert codes(found) == expected


def test_visible_devices_variable_matches_the_gpu_count(tmp_path: Path) -> None:
    root, folder = mi300x_root(tmp_path), site(tmp_path)
    _, found = findings(tmp_path, root, folder, {"HIP_VISIBLE_DEVICES": "0,8"})
    assert codes(found) == ["DOC005"] and "device(s) 8" in found[0][2]
    _, found = findings(tmp_path, root, folder, {"HIP_VISIBLE_DEVICES": "0,1"})
    assert found == []


def test_dataset_files_and_dataset_info_entries(tmp_path: Path) -> None:
    root, folder = laptop_root(tmp_path), site(tmp_path, "cpu")
    _, found = findings(tmp_path, root, folder, cfg=config(tmp_path, dataset=False))
    assert codes(found) == ["DOC006"] and "dataset_info.json not found" in found[0][2]
    cfg = config(tmp_path)
    assert findings(tmp_path, root, folder, cfg=cfg)[1] == []
    (tmp_path / "data/mine.json").unlink()
    _, found = findings(tmp_path, root, folder, cfg=cfg)
    assert codes(found) == ["DOC006"] and "does not exist" in found[0][2]
    cfg.write_text(CONFIG.replace("dataset: mine", "dataset: theirs"))
    assert "not in data/dataset_info.json" in findings(tmp_path, root, folder, cfg=cfg)[1][0][2]


def test_model_path_present_or_a_hub_id(tmp_path: Path) -> None:
    root, folder = laptop_root(tmp_path), site(tmp_path, "cpu")
    cfg = config(tmp_path)
    cfg.write_text(CONFIG.replace("meta-llama/Meta-Llama-3-8B-Instruct", "/models/llama3-8b"))
    _, found = findings(tmp_path, root, folder, cfg=cfg)
    assert codes(found) == ["DOC007"] and "does not exist" in found[0][2]
    cfg.write_text(CONFIG)
    assert findings(tmp_path, root, folder, cfg=cfg)[1] == []


def test_disk_space_for_full_fine_tuning_checkpoints(tmp_path: Path, monkeypatch) -> None:
    root, folder = laptop_root(tmp_path), site(tmp_path, "cpu")
    cfg = config(tmp_path, "finetuning_type: full\n")
    cfg.write_text(cfg.read_text().replace("finetuning_type: lora\n", ""))
    monkeypatch.setattr(checks.shutil, "disk_usage", lambda _p: _Usage(10 * 2**30))
    _, found = findings(tmp_path, root, folder, cfg=cfg)
    assert codes(found) == ["DOC008"] and "10 GiB free" in found[0][2]
    monkeypatch.setattr(checks.shutil, "disk_usage", lambda _p: _Usage(10 * 2**40))
    assert findings(tmp_path, root, folder, cfg=cfg)[1] == []


class _Usage:
    def __init__(self, free: int) -> None:
        self.free = free


def test_expandable_segments_the_launcher_sets_before_rocm_torch_honours_them(tmp_path: Path) -> None:
    root = mi300x_root(tmp_path)
    old = site(tmp_path / "old", torch="2.5.1+rocm6.2")
    _, found = findings(tmp_path, root, old)
    assert codes(found) == ["DOC011"] and "expandable_segments" in found[0][2]
    _, found = findings(tmp_path, root, old, {"OPTIM_TORCH": "0"})
    assert found == []
    assert findings(tmp_path, root, site(tmp_path / "new", torch="2.11.0+rocm7.1"))[1] == []


def test_python_older_than_the_llamafactory_release_requires(tmp_path: Path) -> None:
    stack = read_stack(str(laptop_root(tmp_path)), [str(site(tmp_path, "cpu"))], {})
    assert not [d for d in checks.environment_findings(stack) if d.code == "DOC009"]
    old = stack._replace(python=(3, 10, 12))
    assert [d.code for d in checks.environment_findings(old)] == ["DOC009"]


def test_rocm_variables_in_the_environment(tmp_path: Path) -> None:
    _, found = findings(
        tmp_path / "a", mi300x_root(tmp_path / "a"), site(tmp_path / "a"), {"TORCH_BLAS_PREFER_HIPBLASLT": "0"}
    )
    assert codes(found) == ["DOC011"] and "rocBLAS" in found[0][2]
    _, found = findings(
        tmp_path / "n", nvidia_root(tmp_path / "n"), site(tmp_path / "n", "cuda"), {"TORCH_BLAS_PREFER_HIPBLASLT": "0"}
    )
    assert found == []


# --------------------------------------------------------------------------------------------- the command
HEAVY = ("torch", "transformers", "deepspeed", "llamafactory", "flash_attn")
# doctor in a fresh process, then which heavy packages it imported (its speed: bench/results.md, "doctor")
DOCTOR_THEN_IMPORTS = (
    "import sys\nfrom cfgopt.cli import main\ncode = main(['doctor', 'fixtures/seed'])\n"
    f"print('imported:', sorted(m for m in {HEAVY!r} if m in sys.modules))\nsys.exit(code)"
)


def test_doctor_on_this_machine_answers_fast_without_a_traceback() -> None:
    """Fast because it reads files and imports none of the heavy packages (the figure is bench's, not a test's)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", DOCTOR_THEN_IMPORTS],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr and "stack: Python" in proc.stdout
    assert "imported: []" in proc.stdout, proc.stdout[-500:]


def test_doctor_formats_as_lint(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,9")
    root, folder = mi300x_root(tmp_path), site(tmp_path)
    cfg = config(tmp_path, "flash_attn: fa2\n")
    args = ["doctor", "--root", str(root), "--site-packages", str(folder), "--format", "json", str(cfg)]
    code, out, err = run_cli(args)
    data = json.loads(out)
    assert code == 1 and {d["code"] for d in data["diagnostics"]} == {"DOC001", "DOC005"}
    assert "stack: Python" in err and "8 x AMD Instinct MI300X" in err
    code, out, _ = run_cli([*args[:-2], "concise", str(cfg)])
    assert "DOC001 warning" in out and "Checked 1 training config(s)" in out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("model_name_or_path: [\n")
    code, _out, err = run_cli(["doctor", "--root", str(laptop_root(tmp_path)), "nope.yaml", "bad.yaml"])
    assert code == 2 and "Traceback" not in err
    assert "nope.yaml: no such file" in err and "bad.yaml: not checked: it does not parse" in err


def test_no_path_says_it_walks_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: `cfgopt doctor` with no config walks the current folder and every folder below it, and says so
    before it starts (a walk of a home folder is long); a config named checks only that, without the note."""
    root = laptop_root(tmp_path)
    project = tmp_path / "project" / "configs"
    project.mkdir(parents=True)
    (project / "cfg.yaml").write_text(TRAIN)
    monkeypatch.chdir(project.parent)
    _code, out, err = run_cli(["doctor", "--root", str(root)])
    assert err.startswith("cfgopt doctor: no config named: checking the training configs in the current folder and")
    assert "Checked 1 training config(s)" in out + err
    _code, out, err = run_cli(["doctor", "--root", str(root), "configs/cfg.yaml"])
    assert "no config named" not in out + err and "Checked 1 training config(s)" in out + err
