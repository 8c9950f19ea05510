"""The doctor's findings: the node (`Stack`, its packages an `Environment`) against each training job, one line
each with a code.

Codes (docs/doctor.md): DOC001 attention, DOC002 Liger, DOC003 DeepSpeed CPU Adam, DOC004 FORCE_TORCHRUN,
DOC005 visible devices, DOC006 datasets, DOC007 model path, DOC008 disk space, DOC009 Python, DOC010 torch's
runtime against the GPUs, DOC011 ROCm / allocator variables, DOC012 bitsandbytes, DOC013 LLaMA-Factory itself.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from cfgopt.environment.node import GFX_OF, Stack, flash_attn_archs
from cfgopt.knowledge.rocm_env import judge_variable
from cfgopt.project.launch_jobs import FORCE_TORCHRUN_ON, starts_torchrun
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import Document
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Source
from cfgopt.text.user_files import parse_json, read_bounded
from cfgopt.text.user_text import integer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ENVIRONMENT = Document(Path("<environment>"), "")
NAMES = {
    "DOC001": "attention-unavailable",
    "DOC002": "liger-unavailable",
    "DOC003": "deepspeed-or-cpu-adam-unavailable",
    "DOC004": "deepspeed-without-torchrun",
    "DOC005": "visible-devices-mismatch",
    "DOC006": "dataset-missing",
    "DOC007": "model-path-missing",
    "DOC008": "disk-space-low",
    "DOC009": "python-too-old",
    "DOC010": "torch-runtime-mismatch",
    "DOC011": "launcher-variable",
    "DOC012": "bitsandbytes-unavailable",
    "DOC013": "llamafactory-missing",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# LLaMA-Factory's `requires-python` / `python_requires` at each release tag (setup.py v0.9.0-v0.9.3,
# pyproject.toml v0.9.4-v0.9.5)
PYTHON_FLOOR = {"0.9.0": (3, 8), "0.9.1": (3, 8), "0.9.2": (3, 9), "0.9.3": (3, 9), "0.9.4": (3, 11), "0.9.5": (3, 11)}
FLASH_ATTN_FLOOR = (2, 3, 3)  # transformers 5.6.0 utils/import_utils.py:957-959


def finding(code: str, severity: Severity, message: str, source: Source | None = None, key: str = "") -> Diagnostic:
    """A finding on `key` of a config (its key's span; the file's start when the key is not written), or on the
    environment itself."""
    entry = source.find((key,)) if source is not None and source.root is not None and key else None
    doc = source.document if source is not None else ENVIRONMENT
    start, end = (entry.key_start, entry.key_end) if entry is not None else (0, 0)
    return Diagnostic(doc, start, end, code, NAMES[code], severity, message, key=key)


def _version_tuple(text: str | None) -> tuple[int, ...]:
    """A package's release as the first three numbers (`2.5.1+rocm6.2` -> (2, 5, 1)); () when not installed."""
    return version_key(text)[:3] if text else ()


# ------------------------------------------------------------------------------------------ the environment
def environment_findings(stack: Stack) -> Iterator[Diagnostic]:
    yield from _torch_runtime(stack)
    yield from _visible_devices(stack)
    lf = stack.environment.version("llamafactory")
    floor = PYTHON_FLOOR.get(".".join(lf.split(".")[:3])) if lf else None
    if floor and stack.python[:2] < floor:
        yield finding(
            "DOC009",
            Severity.ERROR,
            f"Python {'.'.join(map(str, stack.python))} is older than LLaMA-Factory {lf} requires (>= "
            f"{'.'.join(map(str, floor))}): use an image with a newer Python",
        )
    yield from _expandable_segments(stack)
    for name, value in stack.env.items():
        judged = judge_variable(name, value, stack.target)
        if judged is not None:
            severity, message = judged
            yield finding("DOC011", severity, f"{name}={value} in this environment: {message}")


def _expandable_segments(stack: Stack) -> Iterator[Diagnostic]:
    """LLaMA-Factory's launcher sets `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` for its torchrun launches
    (launcher.py, `OPTIM_TORCH` on by default); ROCm builds of torch honour it only from 2.11 (pytorch PR #177974,
    backported to release/2.11 by ROCm/pytorch PR #3106) and warn `expandable_segments not supported on this
    platform` before."""
    packages = stack.environment
    if stack.torch_runtime != "rocm" or not packages.has("llamafactory") or stack.env.get("OPTIM_TORCH") == "0":
        return
    version = _version_tuple(packages.version("torch"))
    if version and version < (2, 11):
        yield finding(
            "DOC011",
            Severity.INFO,
            f"LLaMA-Factory's launcher sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for torchrun launches, "
            f"which ROCm torch {packages.version('torch')} ignores (expandable segments came to ROCm in torch 2.11): "
            "memory fragments as without it; OPTIM_TORCH=0 leaves the variable unset",
        )


def _torch_runtime(stack: Stack) -> Iterator[Diagnostic]:
    if not stack.gpu_models or not stack.torch_runtime:
        return
    vendor = "amd" if any(m.startswith(("target:", "AMD")) for m in stack.gpu_models) else "nvidia"
    wanted = "rocm" if vendor == "amd" else "cuda"
    if stack.torch_runtime != wanted:
        build = {"rocm": "a ROCm build", "cuda": "a CUDA build", "cpu": "a CPU-only build"}[stack.torch_runtime]
        torch = stack.environment.version("torch")
        yield finding(
            "DOC010",
            Severity.ERROR,
            f"torch {torch} is {build}, and this node's GPUs are {stack.gpu_name} ({vendor.upper()}):"
            f" torch will find no GPU; install the {wanted.upper()} build (ENV001 lists where it comes from)",
        )


def _visible_devices(stack: Stack) -> Iterator[Diagnostic]:
    if not stack.gpu_models:
        return
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = stack.env.get(name)
        if value is None:
            continue
        entries = [e.strip() for e in value.split(",") if e.strip()]
        beyond = [e for e in entries if (index := integer(e)) is not None and index >= stack.gpu_count]
        if not entries:
            yield finding(
                "DOC005", Severity.ERROR, f"{name} is empty: the job sees no GPU of this node's {stack.gpu_count}"
            )
        elif beyond:
            yield finding(
                "DOC005",
                Severity.ERROR,
                f"{name}={value} names device(s) {', '.join(beyond)}, but this node has {stack.gpu_count} GPU(s) "
                f"(0-{stack.gpu_count - 1}): the runtime stops the list there",
            )


def visible_gpus(stack: Stack) -> int:
    """The GPUs a job launched here sees: the OS's count, cut by the visible-devices lists as the runtimes cut it."""
    count = stack.gpu_count
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = stack.env.get(name)
        if value is not None:
            valid = 0
            for entry in value.split(","):
                if not entry.strip() or entry.strip().startswith("-"):
                    break
                valid += 1
            count = min(count, valid)
    return count


# ------------------------------------------------------------------------------------------------- per job
def job_findings(job: Any, stack: Stack) -> Iterator[Diagnostic]:
    """The findings for one training job (`cfgopt.job.job.Job`)."""
    yield from _llamafactory(job, stack)
    yield from _attention(job, stack)
    yield from _liger(job, stack)
    yield from _bitsandbytes(job, stack)
    yield from _deepspeed(job, stack)
    yield from _datasets(job)
    yield from _model(job)
    yield from _disk(job)


def _llamafactory(job: Any, stack: Stack) -> Iterator[Diagnostic]:
    """The trainer itself: a node image with torch and transformers but no LLaMA-Factory (the H200's image, say)
    runs nothing of the config (bench/h200/doctor.md)."""
    if not stack.environment.has("llamafactory"):
        message = (
            "LLaMA-Factory is not installed in this environment: `llamafactory-cli` is not found "
            "(pip install llamafactory, or run doctor in the environment the job starts in)"
        )
        yield finding("DOC013", Severity.ERROR, message, job.source, "stage")


def _attention(job: Any, stack: Stack) -> Iterator[Diagnostic]:
    if job.value("flash_attn") != "fa2":
        return
    src = job.source
    version = stack.environment.version("flash_attn")
    if version is None or _version_tuple(version) < FLASH_ATTN_FLOOR:
        why = "not installed" if version is None else f"{version}, below the 2.3.3 transformers accepts"
        yield finding(
            "DOC001",
            Severity.WARNING,
            f"`flash_attn: fa2` but flash-attn is {why}: LLaMA-Factory logs 'FlashAttention-2 is not installed.' "
            "and trains with SDPA",
            src,
            "flash_attn",
        )
        return
    build, runtime = stack.flash_attn_build, stack.torch_runtime
    if build in ("rocm", "cuda") and runtime in ("rocm", "cuda") and build != runtime:
        yield finding(
            "DOC001",
            Severity.ERROR,
            f"flash-attn {version} is a {build.upper()} build and torch is {runtime.upper()}: transformers selects "
            "it (it checks only that the package exists) and the model fails to load; install the matching build",
            src,
            "flash_attn",
        )
    elif build == "rocm" and runtime == "rocm" and stack.target is not None and stack.target.arch in GFX_OF:
        yield from _flash_attn_arch(job, stack, version)
    elif build == "triton" and stack.env.get("FLASH_ATTENTION_TRITON_AMD_ENABLE", "").upper() != "TRUE":
        yield finding(
            "DOC001",
            Severity.WARNING,
            f"flash-attn {version} is the Triton (AMD) build and FLASH_ATTENTION_TRITON_AMD_ENABLE is not TRUE: "
            "releases before its automatic Triton fallback (flash-attention PR #2343) fail to import it",
            src,
            "flash_attn",
        )


def _flash_attn_arch(job: Any, stack: Stack, version: str) -> Iterator[Diagnostic]:
    """A CK build compiled for other GPUs (`GPU_ARCHS`) has no kernel for this one: HIP stops at the first
    attention call."""
    wanted = GFX_OF[stack.target.arch]
    archs = flash_attn_archs(stack.site_dirs)
    if archs and wanted not in archs:
        yield finding(
            "DOC001",
            Severity.ERROR,
            f"flash-attn {version} was built for {', '.join(sorted(archs))}, not for this node's {wanted} "
            f"({stack.gpu_name}): the first attention call finds no kernel; rebuild with GPU_ARCHS={wanted}",
            job.source,
            "flash_attn",
        )


def _liger(job: Any, stack: Stack) -> Iterator[Diagnostic]:
    if not job.on("enable_liger_kernel"):
        return
    if not stack.environment.has("liger_kernel"):
        yield finding(
            "DOC002",
            Severity.ERROR,
            "`enable_liger_kernel: true` but liger-kernel is not installed: LLaMA-Factory stops at start-up "
            "(`check_version('liger-kernel', mandatory=True)`)",
            job.source,
            "enable_liger_kernel",
        )
        return
    triton = [n for n in ("pytorch_triton_rocm", "triton", "pytorch_triton") if stack.environment.has(n)]
    pypi_triton = stack.environment.version("triton")
    if not triton:
        message = "liger-kernel is installed without Triton: its kernels cannot compile"
        yield finding("DOC002", Severity.ERROR, message, job.source, "enable_liger_kernel")
    elif stack.torch_runtime == "rocm" and triton == ["triton"] and pypi_triton and "+rocm" not in pypi_triton:
        yield finding(
            "DOC002",
            Severity.WARNING,
            f"liger-kernel on ROCm with PyPI's triton {pypi_triton} (a CUDA build): Liger's kernels need "
            "the ROCm Triton (pytorch-triton-rocm, installed with ROCm torch)",
            job.source,
            "enable_liger_kernel",
        )


def _bitsandbytes(job: Any, stack: Stack) -> Iterator[Diagnostic]:
    """bitsandbytes for a config that quantizes with it or uses its optimizers: installed, and with ROCm support
    (0.47+) on a ROCm torch (cfgopt.knowledge.bitsandbytes)."""
    from cfgopt.knowledge.bitsandbytes import ROCM_FIRST, uses_bitsandbytes

    why = uses_bitsandbytes({k: job.value(k) for k in ("quantization_bit", "quantization_method", "optim")})
    if not why:
        return
    key = why.partition(":")[0]
    version = stack.environment.version("bitsandbytes")
    if version is None:
        message = f"`{why}` needs bitsandbytes, which is not installed"
        yield finding("DOC012", Severity.ERROR, message, job.source, key)
    elif stack.torch_runtime == "rocm" and _version_tuple(version)[:2] < ROCM_FIRST:
        yield finding(
            "DOC012",
            Severity.ERROR,
            f"`{why}` on ROCm torch with bitsandbytes {version}: releases before 0.47 have no ROCm library; "
            "install bitsandbytes>=0.47 (0.50+ for official AMD support)",
            job.source,
            key,
        )


def _offload_device(ds: dict | None) -> str:
    zero = ds.get("zero_optimization") if isinstance(ds, dict) else None
    block = zero.get("offload_optimizer") if isinstance(zero, dict) else None
    device = block.get("device") if isinstance(block, dict) else None
    return device if device in ("cpu", "nvme") else ""


def _deepspeed(job: Any, stack: Stack) -> Iterator[Diagnostic]:
    known, ds = job.deepspeed
    if not known or ds is None:
        return
    src = job.source
    if not stack.environment.has("deepspeed"):
        yield finding("DOC003", Severity.ERROR, "the config uses DeepSpeed, which is not installed", src, "deepspeed")
        return
    if _offload_device(ds) and "cpu_adam" not in stack.deepspeed_prebuilt | stack.jit_cache:
        if stack.compiler and stack.ninja:
            yield finding(
                "DOC003",
                Severity.INFO,
                f"optimizer offload uses DeepSpeed's CPU Adam, not prebuilt: it is JIT-compiled at start-up "
                f"({stack.compiler} and ninja found), a minute or more before the first step",
                src,
                "deepspeed",
            )
        else:
            missing = " and ".join(
                n for n, ok in (("a C++ compiler", stack.compiler), ("ninja", stack.ninja)) if not ok
            )
            yield finding(
                "DOC003",
                Severity.ERROR,
                f"optimizer offload needs DeepSpeed's CPU Adam, which is not prebuilt and cannot be JIT-built here "
                f"(no {missing}): install them, or DeepSpeed with DS_BUILD_CPU_ADAM=1",
                src,
                "deepspeed",
            )
    forced = stack.env.get("FORCE_TORCHRUN", "").lower() in FORCE_TORCHRUN_ON
    if visible_gpus(stack) == 1 and not forced and not _launched_with_torchrun(src):
        launcher = (src.command or {}).get("launcher_kind")
        if launcher in (None, "cli"):
            yield finding(
                "DOC004",
                Severity.WARNING,
                "DeepSpeed on the one GPU this node shows, and FORCE_TORCHRUN is not set: `llamafactory-cli train` "
                "then runs without torchrun; set FORCE_TORCHRUN=1 (XF003)",
                src,
                "deepspeed",
            )


def _launched_with_torchrun(src: Source) -> bool:
    """Does the job's launch, where the run sees it, start torchrun whatever the node's FORCE_TORCHRUN: its own
    line, or every line of the run that launches its YAML (`FORCE_TORCHRUN=1 llamafactory-cli train cfg.yaml`)?
    A value known only at run time counts, as in XF003."""
    command = src.command or {}
    lines = [src] if command.get("launcher_kind") else command.get("launched_by") or []
    return bool(lines) and all(starts_torchrun(line) is not False for line in lines)


def _dataset_names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    return [str(n) for n in value] if isinstance(value, list) else []


def _datasets(job: Any) -> Iterator[Diagnostic]:
    folder = job.value("dataset_dir")
    if not isinstance(folder, str) or folder == "ONLINE" or folder.startswith("REMOTE:"):
        return
    for key in ("dataset", "eval_dataset"):
        names = _dataset_names(job.value(key))
        if not names:
            continue
        info_path = Path(folder) / "dataset_info.json"
        try:
            info = parse_json(read_bounded(info_path))
        except (OSError, ValueError, RecursionError) as exc:
            why = "not found" if isinstance(exc, FileNotFoundError) else f"unreadable ({type(exc).__name__})"
            yield finding(
                "DOC006",
                Severity.ERROR,
                f"{info_path} {why} (dataset_dir {folder!r}, relative to the folder the job starts in): "
                f"LLaMA-Factory stops with `Cannot open {info_path}`",
                job.source,
                key,
            )
            return
        yield from _dataset_entries(job, key, names, info, folder)


def _dataset_entries(job: Any, key: str, names: list[str], info: Any, folder: str) -> Iterator[Diagnostic]:
    for name in names:
        entry = info.get(name) if isinstance(info, dict) else None
        if not isinstance(entry, dict):
            message = f"dataset {name!r} is not in {folder}/dataset_info.json: `Undefined dataset {name}`"
            yield finding("DOC006", Severity.ERROR, message, job.source, key)
        elif not ({"hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name"} & set(entry)):
            file_name = entry.get("file_name")
            if isinstance(file_name, str) and not (Path(folder) / file_name).exists():
                message = f"dataset {name!r}: {Path(folder) / file_name} does not exist"
                yield finding("DOC006", Severity.ERROR, message, job.source, key)


def _model(job: Any) -> Iterator[Diagnostic]:
    name = job.value("model_name_or_path")
    if not isinstance(name, str) or not name:
        return
    path = Path(os.path.expanduser(name))
    local = name.startswith(("/", "./", "../", "~")) or path.exists()
    if local and not path.exists():
        message = f"model_name_or_path {name!r} is a local path that does not exist here"
        yield finding("DOC007", Severity.ERROR, message, job.source, "model_name_or_path")
    elif local and path.is_dir() and not (path / "config.json").exists():
        message = f"model_name_or_path {name!r} has no config.json: transformers cannot load it"
        yield finding("DOC007", Severity.ERROR, message, job.source, "model_name_or_path")
    elif not local and not _HUB_ID.match(name):
        message = f"model_name_or_path {name!r} is neither a folder here nor a hub id (`org/name`)"
        yield finding("DOC007", Severity.WARNING, message, job.source, "model_name_or_path")


def _disk(job: Any) -> Iterator[Diagnostic]:
    out = job.value("output_dir")
    shape = job.shape if job.value("finetuning_type") == "full" else None
    if not isinstance(out, str) or shape is None:
        return  # LoRA / freeze checkpoints are small; an unknown model has no size to compare
    folder = Path(out).resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    # one checkpoint: bf16 weights (2 bytes per parameter) and Adam's two fp32 moments (8), plus DeepSpeed's fp32
    # master weights (4) under DeepSpeed; `save_only_model` keeps the weights alone
    per_param = 2 if job.on("save_only_model") else 2 + 8 + (4 if job.deepspeed[1] is not None else 0)
    need = shape.num_parameters * per_param
    if free < need:
        yield finding(
            "DOC008",
            Severity.WARNING,
            f"one checkpoint of this full fine-tune needs about {need / 2**30:.0f} GiB; {folder} has "
            f"{free / 2**30:.0f} GiB free (save_only_model: true saves the weights alone)",
            job.source,
            "output_dir",
        )
