"""`cfgopt estimate CONFIG --target mi300x --gpus 8 [--format json]`: peak memory per GPU of a LLaMA-Factory
training config, broken down, and the largest micro-batch that fits (cfgopt.memory.estimate; docs/memory.md).

The target is resolved as `lint` resolves it (`--target` > the project config's > the GPUs of this machine,
`cfgopt.environment.gpus.resolve_target`) and named with where it came from; with none, `estimate` says it needs one
(exit 2).

Exit codes: 0 the run fits (within 90% of the GPU's memory: the margin MEM001 and tune use too), 1 it is tight
(above 90%) or predicted not to fit, 2 a usage error, an unreadable file, an unknown model (no estimate is made
for a model whose shape cfgopt cannot find) or a micro-batch / cutoff_len that is not a positive integer the model
can count with (NaN, `1e300`, a list). Imports stay light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cfgopt.commands.common import add_format_argument, add_target_arguments
from cfgopt.text.document import display_path, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.job import Job
    from cfgopt.job.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path, help="a LLaMA-Factory training YAML")
    add_target_arguments(parser)  # GPUs: data-parallel ranks; 1 when neither stated nor detected
    add_format_argument(parser, ("full", "json"), "full", "full (default: the breakdown as a table) or json")
    parser.add_argument(
        "--fill",
        type=float,
        default=None,
        help="without packing: share of cutoff_len the longest batch reaches (default: the local dataset's "
        "longest sample, else 1.0, the worst batch)",
    )
    parser.add_argument(
        "--data", action="store_true", help="print the local dataset's profile (cfgopt.job.data_profile)"
    )
    parser.add_argument("--plot", type=Path, default=None, help="write a length histogram (PNG; needs matplotlib)")


def _deepspeed_path(job, ds, ref) -> str | None:
    """Where the DeepSpeed config comes from: the JSON `deepspeed` names, "inline", or the accelerate config whose
    DeepSpeed plugin builds it."""
    if ds is None:
        return None
    if isinstance(ref, dict):
        return "inline"
    if ref:
        return display_path(job.deepspeed_source.document.path)  # relative, as every report shows a path
    return f"accelerate's DeepSpeed plugin, {job.distributed.config}"


def _distributed(plan, est) -> str | None:
    """The accelerate plan the estimate counted (`FSDP FULL_SHARD over 8 GPU(s) (fsdp.yaml)`), None for none."""
    if plan is None or plan.kind not in ("fsdp", "ddp") or est.zero_stage is not None:
        return None
    return plan.describe(est.gpus)


def _text(
    est, best: int, config_path: Path, ds_path: str | None, target, where: str, distributed: str | None = None
) -> str:
    from cfgopt.memory.estimate import HEADROOM

    zero = "no DeepSpeed" if est.zero_stage is None else f"ZeRO-{est.zero_stage} ({shown(str(ds_path))})"
    zero = f"{distributed}, {zero}" if distributed else zero
    lines = [
        f"{shown(str(config_path))}: {shown(est.model)}, {est.finetuning_type} ({shown(est.stage)}), "
        f"{est.gpus} x {target.name} ({target.memory_gib:g} GiB each; {where}), {zero}",
        f"micro-batch {est.micro_batch} x accumulation {est.gradient_accumulation} x {est.gpus} GPU(s) = global "
        f"batch {est.global_batch}; {est.tokens} tokens per micro-batch ({est.seq_len} per sequence"
        f"{', packed' if est.packing else ''})",
        f"gradient checkpointing {'on' if est.gradient_checkpointing else 'off'}, attention {est.attention}, "
        f"Liger {'on' if est.liger else 'off'}"
        + (f", base weights {est.quantization_bit}-bit" if est.quantization_bit else ""),
        "",
        f"{'component':28} {'GiB':>8}  {'lives':22} detail",
    ]
    lives = {c.name: " + ".join(c.phases) for c in est.components}  # states, or the phases of a transient
    for label, gib, detail in est.rows():
        lines.append(f"{label:28} {gib:8.1f}  {lives.get(label, ''):22} {detail}".rstrip())
    share = est.required_gib / target.memory_gib if target.memory_gib else 0.0
    lines += [
        "",
        f"fits: {_VERDICT_WORDS[est.verdict]} ({share:.0%} of {target.memory_gib:g} GiB)",
        f"largest per_device_train_batch_size within {HEADROOM:.0%} of memory: {best} (now {est.micro_batch})",
    ]
    lines += [f"note: {shown(n)}" for n in est.notes]
    if est.unmodelled:
        lines.append(f"not modelled (lint rules stay silent): {shown(', '.join(est.unmodelled))}")
    lines.append(est.confidence_line())
    return "\n".join(map(shown, lines))  # each line escaped whole: what it names from input stays on it


def hardware_for(config: Path, target: str | None, gpus: int | None) -> tuple[Settings, str]:
    """The settings `estimate` judges with (the target and GPU count resolved as `lint` resolves them, for the
    config's folder) and where they came from; raises ConfigError / VersionError, or UsageError without a
    target with memory."""
    from cfgopt.commands import UsageError
    from cfgopt.lint.project_config import CommandLine, Resolver

    settings = Resolver(CommandLine(target=target, gpus=gpus)).settings_for(config)
    if not settings.target_stated:
        found = f" (this machine's {settings.detected} is not a known target)" if settings.detected else ""
        raise UsageError(
            f"no target{found}: the estimate needs the GPU's memory; give --target NAME (e.g. --target h100) or "
            "target = in pyproject.toml [tool.cfgopt] (docs/targets.md)"
        )
    if not settings.target.memory_gib:
        raise UsageError(f"target {settings.target.name} has no GPU memory to estimate against")
    from cfgopt.job.job import hardware_source

    where = hardware_source(settings) or "stated"
    if settings.gpus is None:
        where += "; 1 GPU assumed: --gpus N"
    return settings, where


# The same margin as MEM001 and tune's pruning (memory.HEADROOM): one verdict everywhere.
_VERDICT_WORDS = {
    "fits": "yes",
    "tight": "TIGHT: above 90% of the GPU, inside the margin the estimate's error needs (MEM001 warns)",
    "over": "NO",
}


def _why_unknown(job: Job) -> str:
    """Why the job's model has no shape: its local config.json says what cfgopt cannot count, else no folder."""
    if job.local_model is not None:
        from cfgopt.knowledge.model_shapes import uncountable

        return uncountable(job.local_model)
    return (
        "give a local folder with its config.json; "
        "cfgopt's table knows Llama 3/3.1 8B and 70B, Llama 3.2 1B/3B, Qwen2.5, Qwen3, Mistral 7B and Gemma 2"
    )


def run(args: argparse.Namespace) -> int:
    from cfgopt.commands import UsageError
    from cfgopt.knowledge.versions import VersionError
    from cfgopt.lint.project_config import ConfigError
    from cfgopt.memory import estimate as memory
    from cfgopt.project.loader import JobError, load_job

    if args.fill is not None and not 0 < args.fill <= 1:
        sys.stderr.write("cfgopt estimate: error: --fill must be in (0, 1]\n")
        return 2
    try:
        settings, where = hardware_for(args.config, args.target, args.gpus)
    except (UsageError, ConfigError, VersionError) as exc:
        sys.stderr.write(f"cfgopt estimate: error: {shown(str(exc))}\n")
        return 2
    target = settings.target
    try:
        job = load_job(args.config, settings)
    except JobError as exc:
        sys.stderr.write(f"cfgopt estimate: error: {shown(str(exc))}\n")
        return 2
    # the GPU count lint judges: --gpus, else the launch line's (`torchrun --nproc_per_node 8`), else 1
    gpus = job.hardware(1).gpus
    if settings.gpus is None and job.source.command.get("launcher_gpus"):
        where = where.replace("; 1 GPU assumed: --gpus N", f"; {gpus} GPU(s) from the launch line")
    settings.gpus = gpus
    if not job.training:
        what = (
            "a chat / export / eval config" if job.group != "train" else "a config that does not train (do_train off)"
        )
        sys.stderr.write(
            f"cfgopt estimate: {shown(str(args.config))}: {what}: `estimate` models the memory of training only "
            "(weights, gradients, optimizer states, activations); give the training YAML\n"
        )
        return 2
    _, ds = job.memory_deepspeed
    ref = job.data.get("deepspeed")
    ds_path = _deepspeed_path(job, ds, ref)
    if job.shape is None:
        sys.stderr.write(
            f"cfgopt estimate: unknown model {shown(repr(job.value('model_name_or_path')))}: no estimate "
            f"({_why_unknown(job)})\n"
        )
        return 2
    config = job.values()
    unusable = memory.unusable_sizes(config)
    if unusable:  # no number to print: LLaMA-Factory itself stops on such a value (LF002 says how)
        what = shown(f"{args.config}: {'; '.join(unusable)}")
        sys.stderr.write(f"cfgopt estimate: error: {what}: no estimate\n")
        return 2
    from cfgopt.commands import estimate_data

    data = estimate_data.data_of(job)
    fill = args.fill if args.fill is not None else job.data_fill()
    plan = job.distributed  # `accelerate launch --config_file fsdp.yaml ...`: FSDP or DDP (docs/memory.md)
    est = memory.estimate(config, job.shape, target, gpus, ds, fill=fill, distributed=plan)
    best = memory.max_micro_batch(config, job.shape, target, gpus, ds, fill=fill, distributed=plan)
    if args.plot is not None and not estimate_data.plot(data, job, args.plot):
        return 2
    from cfgopt.lint.report import tolerant

    tolerant(sys.stdout)  # a model folder's name in a latin-1 terminal: an escape, not a UnicodeEncodeError
    if args.format == "json":
        out = {"config": str(args.config), "deepspeed": ds_path, "target": target.name, "target_source": where}
        out["distributed"] = _distributed(plan, est)
        out.update(est.as_dict())
        out["max_micro_batch"] = best
        out["headroom"] = memory.HEADROOM
        out["confidence_line"] = est.confidence_line()
        out["data"] = estimate_data.as_dict(data, job, fill)
        print(json.dumps(out, indent=2))
    else:
        print(_text(est, best, args.config, ds_path, target, where, _distributed(plan, est)))
        # each line escaped whole: a `dataset_dir` or dataset name with ESC or \n stays on its line
        lines = estimate_data.lines(data, job, fill, full=args.data, given=args.fill is not None)
        print("\n".join(map(shown, lines)))
    return 0 if est.verdict == "fits" else 1
