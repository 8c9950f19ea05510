"""`cfgopt estimate CONFIG --target mi300x --gpus 8 [--format json]`: peak memory per GPU of a LLaMA-Factory
training config, broken down, and the largest micro-batch that fits (cfgopt.memory; docs/memory.md).

Exit codes: 0 the run fits, 1 it is predicted not to fit, 2 a usage error, an unreadable file, an unknown
model (no estimate is made for a model whose shape cfgopt cannot find) or a micro-batch / cutoff_len that is not
a positive integer the model can count with (NaN, `1e300`, a list). Imports stay light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cfgopt.argtypes import positive_int
from cfgopt.document import shown
from cfgopt.targets import ESTIMATE_TARGET, TARGETS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path, help="a LLaMA-Factory training YAML")
    parser.add_argument(
        "--target",
        default=ESTIMATE_TARGET,
        choices=sorted(TARGETS),
        help=f"hardware to estimate for (default: {ESTIMATE_TARGET})",
    )
    parser.add_argument(
        "--gpus", type=positive_int, default=1, help="GPUs (data-parallel ranks) of the run (default: 1)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument(
        "--fill",
        type=float,
        default=None,
        help="without packing: share of cutoff_len the longest batch reaches (default: 1.0, the worst batch)",
    )


def _text(est, best: int, config_path: Path, ds_path: str | None, target) -> str:
    from cfgopt.memory import HEADROOM

    zero = "no DeepSpeed" if est.zero_stage is None else f"ZeRO-{est.zero_stage} ({shown(str(ds_path))})"
    lines = [
        f"{shown(str(config_path))}: {shown(est.model)}, {est.finetuning_type} ({shown(est.stage)}), "
        f"{est.gpus} x {target.name} ({target.memory_gib:g} GiB each), {zero}",
        f"micro-batch {est.micro_batch} x accumulation {est.gradient_accumulation} x {est.gpus} GPU(s) = global "
        f"batch {est.global_batch}; {est.tokens} tokens per micro-batch ({est.seq_len} per sequence"
        f"{', packed' if est.packing else ''})",
        f"gradient checkpointing {'on' if est.gradient_checkpointing else 'off'}, attention {est.attention}, "
        f"Liger {'on' if est.liger else 'off'}"
        + (f", base weights {est.quantization_bit}-bit" if est.quantization_bit else ""),
        "",
        f"{'component':28} {'GiB':>8}  detail",
    ]
    for label, gib, detail in est.rows():
        lines.append(f"{label:28} {gib:8.1f}  {detail}")
    share = est.required_gib / target.memory_gib if target.memory_gib else 0.0
    lines += [
        "",
        f"fits: {'yes' if est.fits else 'NO'} ({share:.0%} of {target.memory_gib:g} GiB)",
        f"largest per_device_train_batch_size within {HEADROOM:.0%} of memory: {best} (now {est.micro_batch})",
    ]
    lines += [f"note: {shown(n)}" for n in est.notes]
    if est.unmodelled:
        lines.append(f"not modelled (lint rules stay silent): {shown(', '.join(est.unmodelled))}")
    lines.append(shown(est.confidence_line()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from cfgopt import memory
    from cfgopt.job_loader import JobError, load_job
    from cfgopt.settings import Settings

    if not 1 <= args.gpus <= memory.MAX_GPUS:
        sys.stderr.write(f"cfgopt estimate: error: --gpus must be from 1 to {memory.MAX_GPUS}\n")
        return 2
    if args.fill is not None and not 0 < args.fill <= 1:
        sys.stderr.write("cfgopt estimate: error: --fill must be in (0, 1]\n")
        return 2
    target = TARGETS[args.target]
    if not target.memory_gib:
        sys.stderr.write(f"cfgopt estimate: error: target {target.name} has no GPU memory to estimate against\n")
        return 2
    try:
        job = load_job(args.config, Settings(target_name=args.target, gpus=args.gpus))
    except JobError as exc:
        sys.stderr.write(f"cfgopt estimate: error: {shown(str(exc))}\n")
        return 2
    _, ds = job.deepspeed
    ref = job.data.get("deepspeed")
    ds_path = None if ds is None else ("inline" if isinstance(ref, dict) else str(job.deepspeed_source.document.path))
    if job.shape is None:
        sys.stderr.write(
            f"cfgopt estimate: unknown model {shown(repr(job.value('model_name_or_path')))}: no estimate "
            "(give a local folder with its config.json; "
            "cfgopt's table knows Llama 3/3.1 8B and 70B, Llama 3.2 1B/3B, Qwen2.5, Qwen3, Mistral 7B and Gemma 2)\n"
        )
        return 2
    config = job.values()
    unusable = memory.unusable_sizes(config)
    if unusable:  # no number to print: LLaMA-Factory itself stops on such a value (LF002 says how)
        what = shown(f"{args.config}: {'; '.join(unusable)}")
        sys.stderr.write(f"cfgopt estimate: error: {what}: no estimate\n")
        return 2
    est = memory.estimate(config, job.shape, target, args.gpus, ds, fill=args.fill)
    best = memory.max_micro_batch(config, job.shape, target, args.gpus, ds, fill=args.fill)
    from cfgopt.report import tolerant

    tolerant(sys.stdout)  # a model folder's name in a latin-1 terminal: an escape, not a UnicodeEncodeError
    if args.format == "json":
        out = {"config": str(args.config), "deepspeed": ds_path, "target": target.name, **est.as_dict()}
        out["max_micro_batch"] = best
        out["headroom"] = memory.HEADROOM
        out["confidence_line"] = est.confidence_line()
        print(json.dumps(out, indent=2))
    else:
        print(_text(est, best, args.config, ds_path, target))
    return 0 if est.fits else 1
