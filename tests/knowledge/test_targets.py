"""The target: the hardware table (the one place a device's figures live; verify's MFU reads it too), its
resolution (`--target` > project config > the GPUs of this machine > none, `gpus.resolve_target`), GPU detection
from /proc and /sys without torch, and what a run says about it (issue 22)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from rule_cases import CASES_DIR, case_args, input_files, job_folder, run_cli, summary_of

from cfgopt.environment import gpus
from cfgopt.environment.gpus import resolve_target as resolve
from cfgopt.knowledge.targets import HARDWARE_CHECKS, TARGETS, UNSTATED, TargetError, custom_target, target_for_device

H200_INFO = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-66a42732\nBus Type: \t PCIe\n"  # as on an H200
FULL_8B = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: full
dataset: alpaca_en_demo
template: llama3
cutoff_len: 2048
per_device_train_batch_size: 2
output_dir: saves/x
bf16: true
"""


@pytest.fixture(autouse=True)
def no_machine_gpus(tmp_path_factory, monkeypatch):
    """Every test reads an empty fake root unless it builds one: the results never depend on this machine."""
    monkeypatch.setenv(gpus.ROOT_VARIABLE, str(tmp_path_factory.mktemp("empty-root")))
    for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(variable, raising=False)
    gpus._CACHE.clear()
    yield
    gpus._CACHE.clear()


def nvidia_root(tmp_path: Path, count: int, info: str = H200_INFO) -> Path:
    root = tmp_path / "root"
    for i in range(count):
        gpu = root / "proc/driver/nvidia/gpus" / f"0000:{i:02x}:00.0"
        gpu.mkdir(parents=True)
        (gpu / "information").write_text(info)
    return root


def kfd_root(tmp_path: Path, device_ids: list[int], gfx: int = 90402, xcc: int = 8) -> Path:
    root = tmp_path / "root"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("cpu_cores_count 96\nsimd_count 0\nvendor_id 0\ndevice_id 0\n")
    for i, device in enumerate(device_ids, start=1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count 1216\ngfx_target_version {gfx}\nvendor_id 4098\ndevice_id {device}\n"
            f"num_xcc {xcc}\n"
        )
    return root


# --------------------------------------------------------------------------- the table


def test_reported_device_names_map_to_targets() -> None:
    expected = {
        "NVIDIA H200": "h200",
        "NVIDIA H100 80GB HBM3": "h100",
        "NVIDIA H100 PCIe": "h100-pcie",
        "NVIDIA A100-SXM4-80GB": "a100",
        "NVIDIA A100-SXM4-40GB": "a100-40gb",
        "NVIDIA A800-SXM4-80GB": "a800",
        "NVIDIA H800": "h800",
        "NVIDIA H20": "h20",
        "NVIDIA B200": "b200",
        "NVIDIA L40S": "l40s",
        "NVIDIA L4": "l4",
        "NVIDIA A10": "a10",
        "NVIDIA A10G": "a10g",
        "NVIDIA GeForce RTX 4090": "rtx4090",
        "NVIDIA GeForce RTX 3090": "rtx3090",
        "Tesla V100-SXM2-32GB": "v100",
        "Tesla V100-SXM2-16GB": "v100-16gb",
        "Tesla T4": "t4",
        "AMD Instinct MI300X": "mi300x",
        "AMD Instinct MI300A": "mi300a",
        "AMD Instinct MI325X": "mi325x",
        "AMD Instinct MI355X": "mi355x",
        "AMD Instinct MI250X / MI250": "mi250x",
        "AMD Instinct MI210": "mi210",
    }
    assert {name: getattr(target_for_device(name), "name", None) for name in expected} == expected
    for unknown in ("NVIDIA RTX A6000", "NVIDIA L40", "cpu", "AMD Radeon RX 7900 XTX"):
        assert target_for_device(unknown) is None, unknown


def test_every_gpu_target_has_memory_a_peak_and_its_architecture_facts() -> None:
    gpus = [t for t in TARGETS.values() if t.platform != "cpu"]
    assert all(t.peak_bf16_tflops > 0 and t.memory_gib > 0 and t.arch for t in gpus)
    assert {t.name for t in gpus if not t.bf16} == {"v100", "v100-16gb", "t4"}
    # CDNA2 (MI250X, MI210) has neither FP8 nor TF32 matrix cores; CDNA3 has both (rules scope AMD claims by it)
    assert not any(TARGETS[n].fp8 or TARGETS[n].tf32 for n in ("mi250x", "mi210"))
    assert all(TARGETS[n].fp8 and TARGETS[n].tf32 for n in ("mi300x", "mi325x", "mi300a"))
    # the fully connected 8-GPU xGMI mesh PF052 judges: MI300X / MI325X / MI355X platforms, not CDNA2 nor MI300A
    assert {t.name for t in gpus if t.xgmi_mesh} == {"mi300x", "mi325x", "mi355x"}
    memory = {n: TARGETS[n].memory_gib for n in ("a100-40gb", "h20", "l40s", "l4", "rtx4090", "v100-16gb", "b200")}
    assert memory == {"a100-40gb": 40, "h20": 96, "l40s": 48, "l4": 24, "rtx4090": 24, "v100-16gb": 16, "b200": 180}
    assert {t.vendor for t in gpus} == {"nvidia", "amd"}


def test_custom_target_from_a_table_and_its_errors() -> None:
    mine = custom_target({"name": "my-gpu", "memory-gib": 48, "bf16": True, "vendor": "nvidia"}, "cfgopt.toml")
    assert (mine.name, mine.platform, mine.memory_gib, mine.bf16, mine.tf32, mine.fp8) == (
        "my-gpu", "cuda", 48.0, True, True, False,
    )  # fmt: skip
    with pytest.raises(TargetError, match="needs memory-gib"):
        custom_target({"name": "x", "bf16": True, "vendor": "amd"}, "cfgopt.toml")
    with pytest.raises(TargetError, match="vendor"):
        custom_target({"name": "x", "memory-gib": 8, "bf16": True, "vendor": "intel"}, "cfgopt.toml")
    with pytest.raises(TargetError, match="unknown key"):
        custom_target({"name": "x", "memory-gib": 8, "bf16": True, "vendor": "amd", "hbm": 1}, "cfgopt.toml")


# --------------------------------------------------------------------------- detection


def test_nvidia_gpus_are_read_from_proc(tmp_path: Path) -> None:
    found = gpus.detect_gpus(str(nvidia_root(tmp_path, 8)))
    assert found is not None and (found.target, found.count) == (TARGETS["h200"], 8)


def test_amd_gpus_are_read_from_the_kfd_topology_and_cpu_nodes_skipped(tmp_path: Path) -> None:
    found = gpus.detect_gpus(str(kfd_root(tmp_path, [0x74A1] * 8)))
    assert found is not None and (found.target, found.count) == (TARGETS["mi300x"], 8)


def test_amd_gpus_from_drm_when_there_is_no_kfd(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for i, (vendor, device) in enumerate([("0x1002", "0x740f"), ("0x1002", "0x740f"), ("0x8086", "0x56a0")]):
        card = root / "sys/class/drm" / f"card{i}" / "device"
        card.mkdir(parents=True)
        (card / "vendor").write_text(vendor + "\n")
        (card / "device").write_text(device + "\n")
    (root / "sys/class/drm/card0-DP-1").mkdir()
    found = gpus.detect_gpus(str(root))
    assert found is not None and (found.target, found.count) == (TARGETS["mi210"], 2)


def test_an_unknown_gpu_is_named_but_gives_no_target(tmp_path: Path) -> None:
    found = gpus.detect_gpus(str(nvidia_root(tmp_path, 2, "Model: \t\t NVIDIA RTX A6000\n")))
    assert found is not None and found.target is None and (found.count, found.model) == (2, "NVIDIA RTX A6000")
    unknown_amd = gpus.detect_gpus(str(kfd_root(tmp_path / "amd", [0x74A2], gfx=90402)))
    assert unknown_amd is not None and unknown_amd.target is None and "gfx942" in unknown_amd.model
    # a partitioned MI300X (CPX: one XCD per node) has a share of the memory the target describes
    cpx = gpus.detect_gpus(str(kfd_root(tmp_path / "cpx", [0x74A1] * 8, xcc=1)))
    assert cpx is not None and cpx.target is None and cpx.model == "AMD Instinct MI300X partition (1 of 8 XCDs)"


def test_visible_devices_limit_the_count(tmp_path: Path, monkeypatch) -> None:
    root = str(nvidia_root(tmp_path, 8))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert gpus.detect_gpus(root).count == 2
    gpus._CACHE.clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.detect_gpus(root) is None


def test_detection_is_cheap_and_finds_nothing_without_gpus(tmp_path: Path, monkeypatch) -> None:
    root = str(nvidia_root(tmp_path, 8))
    read: list[str] = []
    real_read = gpus._read
    monkeypatch.setattr(gpus, "_read", lambda path: read.append(path) or real_read(path))
    assert gpus._detect(root).count == 8
    assert len(read) == 8  # cheap: eight small file reads (one `information` file a GPU), nothing imported
    assert gpus.detect_gpus(str(tmp_path / "nothing")) is None


def test_this_machine_without_gpus_detects_none() -> None:
    if any(os.path.exists(p) for p in ("/proc/driver/nvidia/gpus", "/sys/class/kfd", "/sys/class/drm")):
        pytest.skip("this machine has GPU drivers")
    assert gpus._detect("/") is None


# --------------------------------------------------------------------------- resolution


def test_resolution_order(tmp_path: Path) -> None:
    root = str(nvidia_root(tmp_path, 8))
    assert resolve("h100", "--target", None, "", root).target is TARGETS["h100"]
    assert resolve("none", "--target", None, "", root).target is None  # `--target none`: no detection
    detected = resolve(None, "", None, "", root)
    assert (detected.target, detected.source, detected.gpus, detected.gpus_source) == (
        TARGETS["h200"], "detected", 8, "detected",
    )  # fmt: skip
    assert resolve(None, "", 2, "--gpus", root).gpus == 2
    assert resolve(None, "", None, "", str(tmp_path / "none")).target is None


def lint(*args: str, cwd: Path | None = None) -> tuple[int, list[dict], str]:
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code, out, _ = run_cli(["lint", "--format", "json", *args])
        diags = json.loads(out)["diagnostics"] if out.strip() else []
        _, _, summary = run_cli(["lint", "--format", "concise", *args])
    finally:
        os.chdir(old)
    return code, diags, summary_of(summary)


def test_summary_says_which_target_and_where_it_came_from(tmp_path: Path, monkeypatch) -> None:
    cfg = tmp_path / "proj" / "train.yaml"
    cfg.parent.mkdir()
    cfg.write_text(FULL_8B)
    assert (
        lint(str(cfg), "--target", "h100", "--gpus", "4")[2]
        .split("; environment:")[0]
        .endswith("; judged for 4 x h100 (--target, --gpus)")
    )
    assert re.search(
        r"no target stated: \d+ hardware checks skipped \(--target NAME or target = in pyproject.toml\)",
        lint(str(cfg))[2],
    )
    (cfg.parent / "pyproject.toml").write_text('[tool.cfgopt]\ntarget = "l40s"\ngpus = 2\n')
    assert lint(str(cfg))[2].split("; environment:")[0].endswith("; judged for 2 x l40s (pyproject.toml)")
    (cfg.parent / "pyproject.toml").unlink()
    monkeypatch.setenv(gpus.ROOT_VARIABLE, str(nvidia_root(tmp_path, 8)))
    gpus._CACHE.clear()
    assert lint(str(cfg))[2].split("; environment:")[0].endswith("; judged for 8 x h200 (detected)")
    assert re.search(r"no target \(--target none\): \d+ hardware checks skipped", lint(str(cfg), "--target", "none")[2])
    (cfg.parent / "cfgopt.toml").write_text('target = "none"\n')  # a GPU login node that lints for elsewhere
    assert re.search(
        r"; no target \(target = none in cfgopt.toml\): \d+ hardware checks skipped; environment:", lint(str(cfg))[2]
    )
    # no hardware check among the selected rules: said so, not "0 hardware checks skipped"
    assert (
        "; no target (target = none in cfgopt.toml): no hardware check selected; environment:"
        in lint(str(cfg), "--select", "LF001")[2]
    )


def test_an_unknown_detected_gpu_is_said(tmp_path: Path, monkeypatch) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B)
    monkeypatch.setenv(gpus.ROOT_VARIABLE, str(nvidia_root(tmp_path, 2, "Model: \t\t NVIDIA RTX A6000\n")))
    assert "this machine's 2 x NVIDIA RTX A6000 is not a known target" in lint(str(cfg))[2]


# --------------------------------------------------------------------------- the rules it turns


def test_bf16_on_a_gpu_without_bf16_turns_the_advice_round(tmp_path: Path) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B)
    code, diags, _ = lint(str(cfg), "--target", "v100", "--select", "LF008,PF001,PF002")
    (lf008,) = diags
    assert lf008["code"] == "LF008" and lf008["severity"] == "warning" and code == 1
    assert "no bf16 hardware" in lf008["message"] and lf008["fix"]["description"] == "Use fp16"
    cfg.write_text(FULL_8B.replace("bf16: true", "fp16: true"))
    assert lint(str(cfg), "--target", "t4", "--select", "LF008,PF001,PF002")[1] == []  # fp16 is right there
    assert [d["code"] for d in lint(str(cfg), "--target", "h100", "--select", "PF001")[1]] == ["PF001"]
    assert lint(str(cfg), "--select", "PF001")[1] == []  # no target: no "on unstated" advice
    cfg.write_text(FULL_8B + "fp16: true\n")
    (lf004,) = lint(str(cfg), "--target", "v100", "--select", "LF004")[1]
    assert lf004["fix"]["description"] == "Set `bf16: false` (keep fp16)"
    cfg.write_text(FULL_8B.replace("bf16: true\n", ""))
    (pf002,) = lint(str(cfg), "--target", "v100", "--select", "PF002")[1]
    assert pf002["fix"]["description"] == "Set `fp16: true`"


def test_bf16_on_cpu_is_still_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B)
    (lf008,) = lint(str(cfg), "--target", "cpu", "--select", "LF008")[1]
    assert lf008["severity"] == "error" and lf008["fix"] is None


def test_tf32_on_a_pre_ampere_gpu_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B + "tf32: true\n")
    assert [d["severity"] for d in lint(str(cfg), "--target", "t4", "--select", "LF007")[1]] == ["error"]
    assert lint(str(cfg), "--target", "rtx3090", "--select", "LF007")[1] == []


def test_memory_is_judged_for_24_gib_cards(tmp_path: Path) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B)
    mem = [d for d in lint(str(cfg), "--target", "rtx4090", "--gpus", "4")[1] if d["code"] == "MEM001"]
    assert mem and "24 GiB rtx4090" in mem[0]["message"]
    assert not [d for d in lint(str(cfg))[1] if d["code"] == "MEM001"]  # no target: no memory judged


def test_custom_target_in_lint_and_estimate(tmp_path: Path) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B)
    (tmp_path / "cfgopt.toml").write_text(
        'target = { name = "my-gpu", memory-gib = 48, bf16 = true, vendor = "nvidia" }\ngpus = 2\n'
    )
    _, diags, summary = lint(str(cfg))
    assert summary.split("; environment:")[0].endswith("; judged for 2 x my-gpu (cfgopt.toml)")
    assert any(d["code"] == "MEM001" and "48 GiB my-gpu" in d["message"] for d in diags)
    code, out, err = run_cli(["estimate", str(cfg), "--format", "json"])
    assert code == 1, err
    est = json.loads(out)
    assert (est["target"], est["target_source"], est["gpus"]) == ("my-gpu", "cfgopt.toml", 2)
    shown = run_cli(["lint", "--show-settings", str(cfg)])[1]
    assert 'target = { name = "my-gpu", memory-gib = 48, bf16 = true, vendor = "nvidia"' in shown
    (tmp_path / "cfgopt.toml").write_text('target = { name = "my-gpu", bf16 = true, vendor = "nvidia" }\n')
    code, _, err = run_cli(["lint", str(cfg)])
    assert code == 2 and "needs memory-gib" in err and "Traceback" not in err


def test_estimate_needs_a_target_and_never_assumes_one(tmp_path: Path, monkeypatch) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(FULL_8B)
    code, out, err = run_cli(["estimate", str(cfg)])
    assert code == 2 and "no target" in err and "--target NAME" in err and not out
    monkeypatch.setenv(gpus.ROOT_VARIABLE, str(nvidia_root(tmp_path, 8)))
    code, out, _ = run_cli(["estimate", str(cfg)])
    assert "8 x h200 (141 GiB each; detected)" in out.splitlines()[0]


def test_hardware_checks_are_quiet_without_a_target() -> None:
    """What the summary counts as skipped really says nothing with no target: each rule's own cases, linted
    with `--target none`, give none of its findings."""
    for code in sorted(HARDWARE_CHECKS):
        for case in sorted((CASES_DIR / code).glob("*/")):
            args = case_args(case)
            while "--target" in args:
                i = args.index("--target")
                del args[i : i + 2]
            with job_folder(case) as folder:
                files = [str(f) for f in input_files(folder)]
                _, out, _ = run_cli(["lint", "--format", "json", *files, *args, "--target", "none"])
            assert not [d for d in json.loads(out)["diagnostics"] if d["code"] == code], case
    assert UNSTATED.bf16 and not UNSTATED.stated and not UNSTATED.memory_gib


def test_no_message_names_the_unstated_placeholder() -> None:
    """With no target nothing says "on unstated" (issue 22: `fp16: true on unstated, which runs bf16 ...`)."""
    _, out, _ = run_cli(["lint", "--isolated", "--select", "ALL", "--format", "concise", str(CASES_DIR)])
    assert out.count("\n") > 100 and UNSTATED.name not in out
