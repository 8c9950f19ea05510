"""Prepare and launch verification runs (parent side; no torch import here).

A run gets a temporary work folder: the config with harmless overrides (max_steps, its own output_dir, no
checkpoints, no trackers), the offline assets when the model or data is not reachable, the child's log and
its measurements. The child runs in its own process group, killed as a whole on timeout or Ctrl-C.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfgopt.engine import resolve_reference
from cfgopt.model_shapes import ModelShape, shape_for

SYNTHETIC_DATASET = "synthetic_alpaca"
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
    notes: list[str] = field(default_factory=list)


def plan_assets(config: dict[str, Any], config_path: Path, mode: str, cache_dir: Path) -> Assets:
    """Real model/data when they are local (mode auto/real), synthetic stand-ins otherwise."""
    from cfgopt.verify.synthetic_meta import SUPPORTED_TEMPLATES

    assets = Assets()
    ref = str(config.get("model_name_or_path", ""))
    local = _model_is_local(ref, config_path.parent) if mode != "synthetic" else None
    if local is not None:
        assets.model_dir = local
    else:
        if mode == "real":
            raise ValueError(f"model `{ref}` is not a local folder with weights; --mode real needs one")
        local_config = None
        for base in (Path.cwd(), config_path.parent):
            if (base / ref / "config.json").exists():
                local_config = json.loads((base / ref / "config.json").read_text())
        if local_config is None:
            shape = shape_for(ref, config_path.parent)
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
    real_data = (
        mode != "synthetic"
        and info.exists()
        and all(d.strip() in json.loads(info.read_text()) for d in wanted if d.strip())
    )
    if not real_data:
        if mode == "real":
            raise ValueError(f"dataset `{config.get('dataset')}` is not in {info}; --mode real needs it")
        assets.dataset_dir = cache_dir / "data"
        assets.dataset = SYNTHETIC_DATASET
        assets.notes.append("synthetic Alpaca-like dataset (median ~150 tokens)")
    if assets.model_config is not None:
        template = str(config.get("template", "llama3"))
        if template not in SUPPORTED_TEMPLATES:
            assets.template = "llama3"
            assets.notes.append(f"template `{template}` replaced by `llama3` (the synthetic tokenizer's)")
    return assets


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
    distributed = nproc > 1 or bool(args.get("deepspeed"))
    cmd = [sys.executable, "-m", "cfgopt.verify.worker", "train", str(spec_path)]
    if distributed:  # LLaMA-Factory needs torchrun for DeepSpeed even on one GPU (FORCE_TORCHRUN)
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "cfgopt.verify.worker",
            "train",
            str(spec_path),
        ]
    start = time.perf_counter()
    result.returncode, result.log_tail = _run(cmd, work / f"{label}.log", timeout, on_line)
    result.wall_s = time.perf_counter() - start
    if metrics_path.exists():
        result.metrics = json.loads(metrics_path.read_text())
    return result


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
        spec["dataset_dir"] = str(assets.dataset_dir)
    if len(spec) == 1:
        return {}
    from cfgopt.verify.synthetic import remove_partial

    folders = [Path(spec[key]) for key in ("model_dir", "dataset_dir") if key in spec]
    for folder in folders:
        remove_partial(folder)
    (work / "prepare-spec.json").write_text(json.dumps(spec))
    cmd = [sys.executable, "-m", "cfgopt.verify.worker", "prepare", str(work / "prepare-spec.json")]
    code, tail = _run(cmd, work / "prepare.log", timeout, on_line)
    if code != 0:
        for folder in folders:  # a child killed outright (out of memory) could not clean up itself
            remove_partial(folder)
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), f"exit code {code}")
        if code < 0:  # SIGKILL is what the kernel's out-of-memory killer sends
            last = f"killed by signal {-code}" + (" (out of memory?)" if code == -9 else "")
        raise RuntimeError(f"building the offline assets failed: {last.strip()[:300]}")
    return json.loads((work / "prepare.json").read_text())


def _run(cmd: list[str], log_path: Path, timeout: float, on_line=None) -> tuple[int, str]:
    """Run in a new process group; stream its lines; kill the whole group on timeout or Ctrl-C."""
    env = dict(os.environ)
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

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            reader.join(timeout=10)
            return 124, "".join(tail) + f"\n[cfgopt verify: killed after the {timeout:.0f} s timeout]"
        except KeyboardInterrupt:
            _kill_group(proc)
            raise
        reader.join(timeout=30)
    return proc.returncode, "".join(tail)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def detect_target() -> str:
    """The cfgopt target matching this machine's accelerator (verify fixes for the hardware it runs on): the
    GPUs `lint` and `estimate` detect (`cfgopt.detect`, /proc and /sys), else what the vendor's tool names."""
    from cfgopt.detect import detect_gpus

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
