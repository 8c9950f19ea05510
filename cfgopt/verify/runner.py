"""Prepare and launch verification runs (parent side; no torch import here).

A run gets a temporary work folder: the config with harmless overrides (max_steps, its own output_dir, no
checkpoints, no trackers), the offline assets when the model or data is not reachable, the child's log and
its measurements. The child runs in its own process group; it and everything below it are killed on timeout,
Ctrl-C, SIGTERM or SIGHUP (cfgopt.verify.processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cfgopt.knowledge.model_shapes import ModelShape, shape_for
from cfgopt.loaders.model_config import local_model, model_config
from cfgopt.project.project import resolve_reference
from cfgopt.text.user_files import read_bounded
from cfgopt.verify.processes import kill_tree

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HARMLESS = {
    "save_strategy": "no",
    "report_to": "none",
    "logging_steps": 1,
    "overwrite_output_dir": True,
    "disable_tqdm": True,
    "plot_loss": False,
    "do_train": True,
    "do_eval": False,
    "do_predict": False,
    "eval_strategy": "no",
    "push_to_hub": False,
    "load_best_model_at_end": False,
    "resume_from_checkpoint": None,
}
DROP = ("eval_dataset", "val_size", "eval_steps", "save_steps", "save_total_limit", "hub_model_id")


@dataclass
class RunResult:
    label: str
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    returncode: int = 0
    wall_s: float = 0.0
    log_tail: str = ""

    @property
    def error(self) -> str | None:
        if self.metrics.get("error"):
            return self.metrics["error"]
        if self.returncode != 0:
            return f"exited with code {self.returncode}"
        if not self.metrics.get("steps"):
            return "no training step was measured"
        return None


def shape_config(shape: ModelShape) -> dict[str, Any]:
    """A transformers config.json for a random-init model of this shape."""
    return {
        "model_type": "llama",
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "vocab_size": shape.vocab_size,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "head_dim": shape.head_size,
        "rope_theta": 500000.0,
        "max_position_embeddings": 8192,
        "bos_token_id": 0,
        "eos_token_id": 1,
    }


def _model_is_local(ref: str, config_dir: Path) -> Path | None:
    for base in (Path.cwd(), config_dir):
        folder = base / ref
        if folder.is_dir() and any(folder.glob("*.safetensors")) and (folder / "config.json").exists():
            return folder
    return None


@dataclass
class Assets:
    """Where the run's model and data come from, and how to build what is missing."""

    model_dir: Path | None = None
    dataset_dir: Path | None = None
    dataset: str | None = None
    template: str | None = None
    model_config: dict[str, Any] | None = None
    parameters: int | None = None  # of the model to build, where its shape is known
    on_cpu: bool = False  # the runs go to the CPU (no GPU here)
    notes: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)  # applied to every run (a CPU cannot train in bf16)
    override_notes: list[str] = field(default_factory=list)
    cache_dir: Path | None = None  # cfgopt's cache folder: the children's own caches go there too (cache.child_env)


# Half precision a CPU run cannot use: transformers refuses bf16 / fp16 without a GPU ("Your setup doesn't
# support bf16/gpu"), after the model was built. LLaMA-Factory's pure_bf16 loads the weights in bf16.
HALF_PRECISION = ("bf16", "fp16", "pure_bf16")


def cpu_overrides(config: dict[str, Any]) -> dict[str, Any]:
    """What a CPU run must change: half precision off (fp32), the same for the original and the fixed run."""
    return {key: False for key in HALF_PRECISION if config.get(key) not in (None, False)}


def bytes_to_build(assets: Assets) -> int:
    """Disk the missing stand-ins take: fp32 weights on a CPU (bf16 on a GPU), and ~50 MB of tokenizer and
    data; 0 for what is cached already."""
    total = 0
    if (
        assets.model_config is not None
        and assets.model_dir is not None
        and not (assets.model_dir / "config.json").exists()
    ):
        total += (assets.parameters or 0) * (4 if assets.on_cpu else 2) + 20 * 1000**2
    if assets.dataset_dir is not None and not (assets.dataset_dir / "dataset_info.json").exists():
        total += 30 * 1000**2
    return total


def plan_assets(config: dict[str, Any], config_path: Path, mode: str, cache_dir: Path, on_cpu: bool = False) -> Assets:
    """Real model/data when they are local (mode auto/real), synthetic stand-ins otherwise; `on_cpu`: the runs
    go to the CPU, so half precision is turned off (`cpu_overrides`) and the notes say so."""
    from cfgopt.verify.synthetic_meta import SUPPORTED_TEMPLATES, data_kind, stage_of

    kind = data_kind(config)  # ValueError (one line) for a stage verify cannot run
    assets = Assets(on_cpu=on_cpu, cache_dir=cache_dir)
    if stage_of(config) == "rm":  # worker.value_head_dropout_off
        assets.override_notes.append(
            "stage: rm: the value head's dropout (0.1, trl's ValueHead) is off in every run, so that runs with "
            "other batch splits compute the same loss from the same samples"
        )
    if on_cpu and (overrides := cpu_overrides(config)):
        assets.overrides = overrides
        keys = ", ".join(f"{key}: false" for key in overrides)
        assets.override_notes.append(
            f"no GPU here: {keys} for every run (fp32; a CPU cannot train in half precision), so the runs show "
            "whether the config trains, not its GPU speed"
        )
    ref = str(config.get("model_name_or_path", ""))
    local = _model_is_local(ref, config_path.parent) if mode != "synthetic" else None
    if local is not None:
        assets.model_dir = local
    else:
        if mode == "real":
            raise ValueError(f"model `{ref}` is not a local folder with weights; --mode real needs one")
        found = model_config(ref, config_path.parent)  # config_path's folder first, then the current one
        local_config = found[1] if found is not None and isinstance(found[1], dict) else None
        shape = shape_for(ref, local_model(ref, config_path.parent))
        assets.parameters = shape.num_parameters if shape is not None else None
        if local_config is None:
            if shape is None:
                raise ValueError(
                    f"model `{ref}` is not local and its shape is unknown; give a local folder with its config.json"
                )
            local_config = shape_config(shape)
            assets.notes.append(f"random-init weights with the shape of {shape.name}")
        else:
            assets.notes.append(f"random-init weights from {ref}/config.json")
        digest = hashlib.sha256(json.dumps(local_config, sort_keys=True).encode()).hexdigest()[:12]
        assets.model_dir = cache_dir / f"model-{digest}"
        assets.model_config = local_config
    dataset_dir = config.get("dataset_dir", "data")
    info = Path(dataset_dir) / "dataset_info.json"
    wanted = str(config.get("dataset", "")).split(",")
    known = _dataset_info(info) if mode != "synthetic" else {}
    real_data = bool(known) and all(d.strip() in known for d in wanted if d.strip())
    if not real_data:
        if mode == "real":
            raise ValueError(f"dataset `{config.get('dataset')}` is not in {info}; --mode real needs it")
        assets.dataset_dir = cache_dir / kind.folder  # one folder a kind: each holds its own dataset_info.json
        assets.dataset = kind.dataset
        assets.notes.append(kind.description)
    if assets.model_config is not None:
        template = str(config.get("template", "llama3"))
        if template not in SUPPORTED_TEMPLATES:
            assets.template = "llama3"
            assets.notes.append(f"template `{template}` replaced by `llama3` (the synthetic tokenizer's)")
        if real_data:
            assets.notes.append(OWN_DATA_SYNTHETIC_TOKENIZER)
    return assets


# The job's own data under the stand-in tokenizer: a byte-level BPE trained on pseudo-words (synthetic.py) splits real
# text into more, shorter tokens than the model's own tokenizer would; what each run trains on is the same text.
OWN_DATA_SYNTHETIC_TOKENIZER = (
    "the job's own data, tokenized by the synthetic tokenizer (trained on pseudo-words, not the model's "
    "vocabulary): each sample is more tokens than under the model's own tokenizer, so tokens/s, step times and "
    "memory are those of a job with longer samples; the comparison between the runs holds"
)


def run_config(
    config: dict[str, Any],
    assets: Assets,
    steps: int,
    label: str,
    work: Path,
    config_path: Path,
    gpus: int | None,
    timeout: float,
    on_line=None,
) -> RunResult:
    """One short run through LLaMA-Factory's own entry point; never touches the user's output_dir."""
    args = {k: v for k, v in config.items() if k not in DROP}
    args.update(HARMLESS)
    args.update(assets.overrides)
    if assets.on_cpu:  # every half-precision key off, also one the original has not (a fixed run's pure_bf16)
        args.update(dict.fromkeys(HALF_PRECISION, False))
    args["max_steps"] = steps
    args["output_dir"] = str(work / f"{label}-output")
    if assets.model_config is not None or assets.model_dir is not None:
        args["model_name_or_path"] = str(assets.model_dir)
    if assets.dataset:
        args["dataset"] = assets.dataset
        args["dataset_dir"] = str(assets.dataset_dir)
        args.pop("max_samples", None)
    if assets.template:
        args["template"] = assets.template
    if isinstance(args.get("deepspeed"), str):
        found, _ = resolve_reference(args["deepspeed"], config_path)
        if found is not None:
            args["deepspeed"] = str(found)
    spec_path = work / f"{label}.json"
    metrics_path = work / f"{label}-metrics.json"
    spec_path.write_text(json.dumps({"args": args, "metrics_path": str(metrics_path)}, indent=1))
    result = RunResult(label=label, config=args)
    nproc = gpus or 1
    # LLaMA-Factory needs torchrun for DeepSpeed even on one GPU (FORCE_TORCHRUN)
    torchrun = nproc if nproc > 1 or bool(args.get("deepspeed")) else None
    cmd = worker_command("train", spec_path, torchrun)
    start = time.perf_counter()
    result.returncode, result.log_tail = _run(cmd, work / f"{label}.log", timeout, on_line, assets.cache_dir)
    result.wall_s = time.perf_counter() - start
    if metrics_path.exists():
        result.metrics = json.loads(metrics_path.read_text())
    return result


def worker_command(mode: str, spec_path: Path, torchrun_processes: int | None = None) -> list[str]:
    """The child's command line: `cfgopt.verify.worker MODE SPEC`, under torchrun when it gets a process count."""
    worker = ["-m", "cfgopt.verify.worker", mode, str(spec_path)]
    if torchrun_processes is None:
        return [sys.executable, *worker]
    torchrun = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun_processes}"]
    return [sys.executable, *torchrun, *worker]


def prepare_assets(assets: Assets, work: Path, timeout: float, on_line=None) -> dict[str, Any]:
    """Build the missing synthetic model and dataset once; they are cached across runs and invocations."""
    spec: dict[str, Any] = {"metrics_path": str(work / "prepare.json")}
    if (
        assets.model_config is not None
        and assets.model_dir is not None
        and not (assets.model_dir / "config.json").exists()
    ):
        spec["model_dir"], spec["model_config"] = str(assets.model_dir), assets.model_config
    if assets.dataset and assets.dataset_dir is not None and not (assets.dataset_dir / "dataset_info.json").exists():
        spec["dataset_dir"], spec["dataset"] = str(assets.dataset_dir), assets.dataset
    if len(spec) == 1:
        return {}
    from cfgopt.verify.synthetic import remove_partial

    folders = [Path(spec[key]) for key in ("model_dir", "dataset_dir") if key in spec]
    for folder in folders:
        remove_partial(folder)
    (work / "prepare-spec.json").write_text(json.dumps(spec))
    try:
        prepare = worker_command("prepare", work / "prepare-spec.json")
        code, tail = _run(prepare, work / "prepare.log", timeout, on_line, assets.cache_dir)
    except BaseException:  # interrupted or terminated: the killed child could not remove its half-built folders
        for folder in folders:
            remove_partial(folder)
        raise
    if code != 0:
        for folder in folders:  # a child killed outright (out of memory) could not clean up itself
            remove_partial(folder)
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), f"exit code {code}")
        if code < 0:  # SIGKILL is what the kernel's out-of-memory killer sends
            last = f"killed by signal {-code}" + (" (out of memory?)" if code == -9 else "")
        raise RuntimeError(f"building the offline assets failed: {last.strip()[:300]}")
    return json.loads((work / "prepare.json").read_text())


def _run(
    cmd: list[str], log_path: Path, timeout: float, on_line=None, cache_dir: Path | None = None
) -> tuple[int, str]:
    """Run in a new process group; stream its lines; kill it and every process below it on timeout, Ctrl-C,
    SIGTERM or SIGHUP. The caches the child writes go under `cache_dir` (`cache.child_env`)."""
    from cfgopt.verify.cache import child_env

    env = child_env(dict(os.environ), cache_dir)
    env.setdefault("DISABLE_VERSION_CHECK", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["FORCE_TORCHRUN"] = env.get("FORCE_TORCHRUN", "1")
    project_root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (project_root, env.get("PYTHONPATH", "")) if p)
    tail: list[str] = []
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )

        def pump() -> None:  # a thread, so a silent child cannot block the timeout
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                tail.append(line)
                del tail[:-60]
                if on_line is not None:
                    on_line(line.rstrip("\n"))

        try:  # from the child's start on: an interrupt at any point kills it
            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            proc.wait(timeout=timeout)
            reader.join(timeout=30)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            reader.join(timeout=10)
            return 124, "".join(tail) + f"\n[cfgopt verify: killed after the {timeout:.0f} s timeout]"
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM / SIGHUP (termination.interrupt_on_termination)
            kill_tree(proc)
            raise
    return proc.returncode, "".join(tail)


def detect_target() -> str:
    """The cfgopt target matching this machine's accelerator (verify fixes for the hardware it runs on): the
    GPUs `lint` and `estimate` detect (`cfgopt.environment.gpus`, /proc and /sys), else what the vendor's tool names."""
    from cfgopt.environment.gpus import detect_gpus

    found = detect_gpus()
    if found is not None and found.target is not None:
        return found.target.name
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            names = subprocess.run(
                [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            ).stdout.upper()
        except (OSError, subprocess.SubprocessError):
            names = ""
        for name in ("H200", "H100", "A100"):
            if name in names:
                return name.lower()
        return "h100" if names.strip() else "cpu"
    if Path("/dev/kfd").exists():
        rocm = shutil.which("rocm-smi")
        if rocm:
            try:
                out = subprocess.run([rocm, "--showproductname"], capture_output=True, text=True, timeout=20).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
            for name in ("MI325X", "MI250X", "MI300X"):
                if name in out.upper():
                    return name.lower()
        return "mi300x"
    return "cpu"


def new_workdir() -> Path:
    """A fresh work folder; the caller removes it unless the user asked to keep it (`--keep-temp`)."""
    return Path(tempfile.mkdtemp(prefix="cfgopt-verify-"))


def _dataset_info(info: Path) -> dict[str, Any]:
    """The datasets a `dataset_info.json` names ({} when it is missing, unreadable or not an object): read bounded,
    as every file a config names."""
    try:
        data = json.loads(read_bounded(info))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
