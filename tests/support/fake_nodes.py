"""Fake machines for `cfgopt doctor` and the GPU detection: /sys and /proc under a root folder (a ROCm MI300X
node, an NVIDIA H200 node, a CPU laptop) and a site-packages of dist-info folders and empty extension files."""

from __future__ import annotations

from pathlib import Path

from cfgopt.doctor import checks
from cfgopt.doctor.command import jobs_in
from cfgopt.environment.node import read_stack

H200_INFO = "Model: \t\t NVIDIA H200\nIRQ: 1\n"


def mi300x_root(tmp_path: Path, count: int = 8) -> Path:
    root = tmp_path / "root"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("simd_count 0\nvendor_id 0\ndevice_id 0\n")
    for i in range(1, count + 1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(
            f"simd_count 1216\ngfx_target_version 90402\nvendor_id 4098\ndevice_id {0x74A1}\nnum_xcc 8\n"
        )
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.2.4-120\n")
    return root


def nvidia_root(tmp_path: Path, count: int = 8) -> Path:
    root = tmp_path / "root"
    for i in range(count):
        gpu = root / "proc/driver/nvidia/gpus" / f"0000:{i:02x}:00.0"
        gpu.mkdir(parents=True)
        (gpu / "information").write_text(H200_INFO)
    (root / "usr/local/cuda").mkdir(parents=True)
    (root / "usr/local/cuda/version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}')
    return root


def laptop_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(parents=True)
    return root


def site(tmp_path: Path, runtime: str = "rocm", torch: str = "", **packages: str) -> Path:
    """A site-packages: dist-info folders, torch/version.py for `runtime`, and what `packages` names."""
    folder = tmp_path / "site"
    folder.mkdir(parents=True, exist_ok=True)
    torch = torch or {"rocm": "2.11.0+rocm7.1", "cuda": "2.5.1+cu124", "cpu": "2.5.1+cpu"}[runtime]
    versions = {"torch": torch, "llamafactory": "0.9.5", "transformers": "4.57.1", **packages}
    for name, version in versions.items():
        if version:
            (folder / f"{name}-{version}.dist-info").mkdir()
    (folder / "torch").mkdir()
    hip, cuda = (
        ("'6.2.41133'", "None") if runtime == "rocm" else ("None", "'12.4'") if runtime == "cuda" else ("None",) * 2
    )
    (folder / "torch" / "version.py").write_text(f"__version__ = '{torch}'\ncuda = {cuda}\nhip = {hip}\n")
    return folder


def flash_attn_extension(folder: Path, links: bytes) -> None:
    (folder / "flash_attn").mkdir()
    (folder / "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF" + links + b"\0")


def findings(tmp_path: Path, root: Path, site_dir: Path, env: dict | None = None, cfg: Path | None = None):
    stack = read_stack(str(root), [str(site_dir)], {"PATH": "", **(env or {})})
    out = list(checks.environment_findings(stack))
    if cfg is not None:
        jobs, problems = jobs_in([cfg], stack)
        assert not problems and jobs
        for job in jobs:
            out.extend(checks.job_findings(job, stack))
    return stack, [(d.code, d.severity, d.message) for d in out]
