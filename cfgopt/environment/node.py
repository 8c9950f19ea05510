"""What the training node has, read from files: no torch, transformers, deepspeed or flash-attn import."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping

from cfgopt.environment import Environment, Origin, gpus
from cfgopt.knowledge.targets import TARGETS, Target
from cfgopt.text.record import Record
from cfgopt.text.requirements.requirement import installed_distribution
from cfgopt.text.user_files import open_regular, read_head

# How far into a compiled extension the runtime libraries it links are looked for: the ELF dynamic string table
# sits near the start of the file (flash-attn's extension is hundreds of MB; reading it whole would take seconds).
_ELF_HEAD_BYTES = 8 * 1024 * 1024
# torch/version.py's `cuda = '12.4'` / `hip: Optional[str] = '6.2...'`: the GPU runtime torch was built for
_RUNTIME_LINE = re.compile(r"^(cuda|hip|rocm)\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
INSTALLED_SOURCE = "this node's packages (cfgopt doctor)"  # how outputs name what doctor read
ENV_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "FORCE_TORCHRUN",
    "NPROC_PER_NODE",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE",
    "TORCH_BLAS_PREFER_HIPBLASLT",
    "PYTORCH_TUNABLEOP_ENABLED",
    "PYTORCH_TUNABLEOP_TUNING",
    "PYTORCH_NO_HIP_MEMORY_CACHING",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "HSA_DISABLE_FRAGMENT_ALLOCATOR",
    "DISABLE_VERSION_CHECK",
    "TORCH_EXTENSIONS_DIR",
    "OPTIM_TORCH",
)


class Stack(Record):
    """The environment as read: every field from a file or a variable, None / "" where absent."""

    python: tuple[int, int, int]
    environment: Environment  # the installed distributions (`Origin.INSTALLED`): `has`, `version`
    site_dirs: tuple[str, ...]
    torch_runtime: str  # "rocm", "cuda", "cpu" or "" (no torch)
    torch_runtime_version: str  # torch's HIP / CUDA version ("6.2.41133", "12.4")
    rocm_version: str  # /opt/rocm/.info/version
    cuda_version: str  # /usr/local/cuda/version.json or version.txt
    gpu_models: tuple[str, ...]  # every GPU the OS shows, visible-devices lists not applied
    target: Target | None  # the GPUs' target (None: none, or a GPU cfgopt has no target for)
    gpu_name: str
    env: dict[str, str]
    flash_attn_build: str  # "rocm", "cuda", "triton", "unknown", "" (no flash-attn)
    deepspeed_prebuilt: frozenset[str]  # DeepSpeed ops compiled at install time (`cpu_adam`, ...)
    jit_cache: frozenset[str]  # ops in torch's JIT extension cache
    compiler: str  # a C++ compiler on PATH ("" none)
    ninja: bool

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_models)


def read_stack(root: str = "/", site_dirs: list[str] | None = None, env: Mapping[str, str] | None = None) -> Stack:
    """The environment of this node; `root` prefixes every system path (tests point it at a fake tree), `site_dirs`
    replaces `sys.path` (the interpreter's own import path, where the training job's packages are)."""
    env = os.environ if env is None else env
    dirs = tuple(d for d in (site_dirs if site_dirs is not None else sys.path) if d and os.path.isdir(d))
    packages = _distributions(dirs)
    runtime, runtime_version = _torch_build(dirs, packages)
    installed = {name: "==" + version for name, version in packages.items()}
    models = tuple(gpus.gpu_models(root))
    target, name = _target_of(models)
    path = env.get("PATH", "")
    return Stack(
        python=tuple(sys.version_info[:3]),  # type: ignore[arg-type]
        environment=Environment(installed, INSTALLED_SOURCE, Origin.INSTALLED),
        site_dirs=dirs,
        torch_runtime=runtime,
        torch_runtime_version=runtime_version,
        rocm_version=_read(os.path.join(root, "opt/rocm/.info/version")).strip(),
        cuda_version=_cuda_version(root),
        gpu_models=models,
        target=target,
        gpu_name=name,
        env={k: env[k] for k in ENV_VARIABLES if k in env},
        flash_attn_build=_flash_attn_build(dirs) if "flash_attn" in packages else "",
        deepspeed_prebuilt=_prebuilt_ops(dirs) if "deepspeed" in packages else frozenset(),
        jit_cache=_jit_cache(env),
        compiler=next((c for c in ("c++", "g++", "clang++") if shutil.which(c, path=path)), ""),
        ninja="ninja" in packages or bool(shutil.which("ninja", path=path)),
    )


def _read(path: str, limit: int = 65536) -> str:
    try:
        return read_head(path, limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _listing(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _distributions(dirs: tuple[str, ...]) -> dict[str, str]:
    """Installed distributions by their dist-info / egg-info folder names (`torch-2.5.1+rocm6.2.dist-info`), as
    `importlib.metadata` finds them: the first on the path wins."""
    out: dict[str, str] = {}
    for folder in dirs:
        for name in _listing(folder):
            found = installed_distribution(name)
            if found is not None and found[1]:
                out.setdefault(*found)
    return out


def _torch_build(dirs: tuple[str, ...], packages: dict[str, str]) -> tuple[str, str]:
    """torch's runtime from `torch/version.py` (`hip = '6.2...'`, `cuda = '12.4'`), else from its local version."""
    if "torch" not in packages:
        return "", ""
    for folder in dirs:
        text = _read(os.path.join(folder, "torch", "version.py"))
        if text:
            found = {k: v for k, v in _RUNTIME_LINE.findall(text)}
            if found.get("hip"):
                return "rocm", found["hip"]
            if found.get("cuda"):
                return "cuda", found["cuda"]
            return "cpu", ""
    local = packages["torch"].partition("+")[2]
    if local.startswith("rocm"):
        return "rocm", local[4:]
    return ("cpu", "") if local == "cpu" else ("cuda", local[2:] if local.startswith("cu") else "")


def _cuda_version(root: str) -> str:
    text = _read(os.path.join(root, "usr/local/cuda/version.json"))
    if text:
        try:
            return str(json.loads(text)["cuda"]["version"])
        except (ValueError, KeyError, TypeError):
            pass
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", _read(os.path.join(root, "usr/local/cuda/version.txt")))
    return match.group(1) if match else ""


def _target_of(models: tuple[str, ...]) -> tuple[Target | None, str]:
    if not models:
        return None, ""
    model = max(set(models), key=lambda m: (models.count(m), m))
    if model.startswith("target:"):
        target = TARGETS[model[len("target:") :]]
        return target, target.device
    from cfgopt.knowledge.targets import target_for_device

    return (None if model.startswith("AMD ") else target_for_device(model)), model


def _linked_runtime(path: str) -> str:
    """ "rocm" / "cuda" from the runtime libraries a compiled extension links (its ELF head), else "unknown"."""
    try:
        head = read_head(path, _ELF_HEAD_BYTES)
    except OSError:
        return "unknown"
    if b"libamdhip64" in head or b"libc10_hip" in head:
        return "rocm"
    if b"libcudart" in head or b"libc10_cuda" in head:
        return "cuda"
    return "unknown"


# The GPU architectures a HIP extension carries code for: its offload bundles are named
# `hipv4-amdgcn-amd-amdhsa--gfx942[:features]`. They may sit anywhere in a file of hundreds of MB, so the file is
# read in chunks, only when a config asks for flash-attn on a ROCm build, and at most this far.
_GFX = re.compile(rb"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)")
_ARCH_SCAN_BYTES = 1024 * 1024 * 1024
GFX_OF = {"cdna2": "gfx90a", "cdna3": "gfx942", "cdna4": "gfx950"}


def flash_attn_archs(site_dirs: tuple[str, ...]) -> frozenset[str]:
    """The gfx architectures flash-attn's compiled (CK) extension has kernels for; empty when none are found."""
    for folder in site_dirs:
        names = [n for n in _listing(folder) if n.startswith("flash_attn_2_cuda") and n.endswith(".so")]
        if names:
            return _archs_in(os.path.join(folder, names[0]))
    return frozenset()


def _archs_in(path: str) -> frozenset[str]:
    found: set[str] = set()
    tail = b""
    read = 0
    try:
        with open_regular(path) as f:
            while read < _ARCH_SCAN_BYTES:
                chunk = f.read(_ELF_HEAD_BYTES)
                if not chunk:
                    break
                read += len(chunk)
                before = len(found)
                found.update(m.decode() for m in _GFX.findall(tail + chunk))
                if found and len(found) == before:
                    break  # the bundles sit together: a chunk that adds none ends the list
                tail = chunk[-64:]
    except OSError:
        return frozenset()
    return frozenset(found)


def _flash_attn_build(dirs: tuple[str, ...]) -> str:
    for folder in dirs:
        extensions = [n for n in _listing(folder) if n.startswith("flash_attn_2_cuda") and n.endswith(".so")]
        if extensions:
            return _linked_runtime(os.path.join(folder, extensions[0]))
        if os.path.isdir(os.path.join(folder, "flash_attn", "flash_attn_triton_amd")):
            return "triton"
        if os.path.isdir(os.path.join(folder, "flash_attn")):
            return "unknown"
    return "unknown"


def _prebuilt_ops(dirs: tuple[str, ...]) -> frozenset[str]:
    """DeepSpeed ops built at install time (`DS_BUILD_CPU_ADAM=1`): `deepspeed/ops/<group>/<op>_op*.so`."""
    ops = set()
    for folder in dirs:
        base = os.path.join(folder, "deepspeed", "ops")
        for group in _listing(base):
            for name in _listing(os.path.join(base, group)):
                if name.endswith(".so") and "_op" in name:
                    ops.add(name.split("_op")[0])
    return frozenset(ops)


def _jit_cache(env: Mapping[str, str]) -> frozenset[str]:
    """Ops torch's JIT has already built (`~/.cache/torch_extensions/<py_cu>/<op>/<op>.so`)."""
    base = env.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions")
    found = set()
    for flavour in _listing(base):
        for op in _listing(os.path.join(base, flavour)):
            if os.path.exists(os.path.join(base, flavour, op, f"{op}.so")):
                found.add(op)
    return frozenset(found)


def summary(stack: Stack) -> str:
    """One line: Python, torch and its runtime, the ROCm / CUDA release, the GPUs, the packages that matter."""
    py = ".".join(map(str, stack.python))
    torch = stack.environment.version("torch")
    if torch is None:
        torch_text = "torch not installed"
    else:
        runtime = {"rocm": "ROCm/HIP", "cuda": "CUDA", "cpu": "CPU only"}.get(stack.torch_runtime, "?")
        torch_text = (
            f"torch {torch} ({runtime}{' ' + stack.torch_runtime_version if stack.torch_runtime_version else ''})"
        )
    system = [f"ROCm {stack.rocm_version}"] if stack.rocm_version else []
    system += [f"CUDA toolkit {stack.cuda_version}"] if stack.cuda_version else []
    gpus = f"{stack.gpu_count} x {stack.gpu_name}" if stack.gpu_models else "no GPU found"
    wanted = ("llamafactory", "transformers", "deepspeed", "peft", "trl", "flash_attn", "liger_kernel", "bitsandbytes")
    have = [f"{n.replace('_', '-')} {v}" for n in wanted if (v := stack.environment.version(n))]
    return "; ".join([f"Python {py}", torch_text, *system, gpus, ", ".join(have) or "no training packages"])
