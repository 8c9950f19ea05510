"""`cfgopt doctor [CONFIG...]`: read the stack, find the training configs as `lint` finds them, check each."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cfgopt.doctor import checks
from cfgopt.environment.node import Stack, read_stack, summary
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import shown
from cfgopt.text.source import Kind
from cfgopt.text.timelimit import TimeLimitExceeded, time_limit
from cfgopt.text.timelimit import message as time_limit_message


def jobs_in(paths: list[Path], stack: Stack) -> tuple[list, list[str]]:
    """The training jobs under `paths` (YAML configs and `llamafactory-cli train` lines), judged for this node's
    GPUs, and one-line problems for files that could not be read."""
    from cfgopt.lint.engine import build_project
    from cfgopt.lint.project_config import CommandLine, Resolver

    target = stack.target.name if stack.target is not None else "none"
    gpus = checks.visible_gpus(stack) or None
    resolver = Resolver(CommandLine(target=target, gpus=gpus))
    project = build_project(paths, resolver)
    problems = [f"{p.path}: {p.message}" for p in project.problems]
    jobs = []
    for src in project.sources:
        if src.error is not None and src.kind.is_llamafactory:
            problems.append(
                f"{src.document.path}: not checked: it does not parse ({src.error.message}); run cfgopt lint"
            )
        if src.error is not None or src.kind not in (Kind.LF_TRAIN, Kind.LF_CLI):
            continue
        if src.kind == Kind.LF_CLI and (src.command.get("subcommand") != "train" or src.command.get("yaml")):
            continue  # a launch naming a YAML: the YAML is the job (loaded beside it)
        job = project.context(src).job
        if job.training:
            jobs.append(job)
    return jobs, problems


WALKED = (
    "cfgopt doctor: no config named: checking the training configs in the current folder and every folder below "
    "it (`cfgopt doctor CONFIG...` checks only those)"
)


def run(args: argparse.Namespace) -> int:
    root = args.root or os.environ.get("CFGOPT_SYSFS_ROOT", "/")
    try:  # the node's files (dist-info, /sys, a site-packages folder given) under the same watchdog as a config
        with time_limit():
            stack = read_stack(root, args.site_packages or None)
            diags: list[Diagnostic] = list(checks.environment_findings(stack))
    except TimeLimitExceeded as exc:
        sys.stderr.write(
            f"cfgopt doctor: error: reading this node's packages and GPUs took longer than {exc.seconds:g} s and "
            "was stopped (please report this; CFGOPT_FILE_TIMEOUT=SECONDS changes the limit)\n"
        )
        return 2
    if args.write_environment:
        written = _write_environment(stack, Path(args.write_environment))
        if written:
            sys.stderr.write(f"cfgopt doctor: {written}\n")
            return 2
    walked = not args.paths  # no path named: the current folder, recursively, said before the walk (it may be long)
    if walked:
        sys.stderr.write(WALKED + "\n")
    jobs, problems = jobs_in([Path(".")] if walked else args.paths, stack)
    for job in jobs:
        try:  # each job's checks read files its config names (dataset_info.json): one limit per job
            with time_limit():
                diags.extend(checks.job_findings(job, stack))
        except TimeLimitExceeded as exc:
            problems.append(f"{job.source.document.path}: {time_limit_message(exc, 'checking it')}")
    diags.sort(key=Diagnostic.sort_key)
    if args.statistics:
        from cfgopt.lint import report

        report.render_statistics(diags, sys.stdout, as_json=args.format == "json")
    else:
        _render(args.format, diags, problems, len(jobs), sys.stdout)
    machine = args.format in ("json", "json-lines", "sarif", "junit")
    text = sys.stderr if machine or args.format == "github" else sys.stdout
    text.write(f"stack: {summary(stack)}\n")
    if stack.torch_runtime:
        text.write("read from files only: nothing was imported (torch's build from torch/version.py)\n")
    for problem in problems:
        sys.stderr.write(shown(f"cfgopt doctor: {problem}") + "\n")  # a path may carry control characters
    counts = {s: sum(1 for d in diags if d.severity == s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)}
    text.write(
        f"Checked {len(jobs)} training config(s) against this environment: {counts[Severity.ERROR]} error(s), "
        f"{counts[Severity.WARNING]} warning(s), {counts[Severity.INFO]} info\n"
    )
    if problems:
        return 2
    fail_on = Severity.parse(args.fail_on) if args.fail_on else Severity.WARNING
    failed = any(d.severity >= fail_on for d in diags)
    return 1 if failed and not args.exit_zero else 0


# The packages a snapshot keeps: what decides a training job's findings and plans (cfgopt.environment.stated), not the
# whole site-packages, so the file stays small and changes only when the training stack does.
SNAPSHOT_PACKAGES = (
    "llamafactory",
    "torch",
    "transformers",
    "datasets",
    "accelerate",
    "peft",
    "trl",
    "deepspeed",
    "liger_kernel",
    "bitsandbytes",
    "flash_attn",
    "torchao",
    "unsloth",
    "vllm",
    "badam",
    "galore_torch",
    "apollo_torch",
    "adam_mini",
)


def snapshot(stack: Stack) -> dict:
    """The node's training packages as `cfgopt-environment.json` holds them (cfgopt.environment.stated reads it)."""
    packages = {name: version for name in SNAPSHOT_PACKAGES if (version := stack.environment.version(name))}
    return {
        "written_by": "cfgopt doctor --write-environment",
        "stack": summary(stack),
        "packages": dict(sorted(packages.items())),
    }


# Why no snapshot is written where LLaMA-Factory is not installed: lint would not take it as the node's (a machine
# that cannot train is no training node: cfgopt.environment.stated), and nothing else reads it.
NOT_A_TRAINING_NODE = (
    "{path}: not written: LLaMA-Factory is not installed here, so this is not the node the job trains on; run "
    "`cfgopt doctor --write-environment` on the training node (or point --site-packages DIR at its packages)"
)


def _write_environment(stack: Stack, path: Path) -> str | None:
    """Write the snapshot atomically; the reason it could not be written, else None."""
    import json

    from cfgopt.text.writer import atomic_write

    if not stack.environment.has("llamafactory"):
        return NOT_A_TRAINING_NODE.format(path=path)
    data = (json.dumps(snapshot(stack), indent=2) + "\n").encode()
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return f"{path}: not a regular file; the environment snapshot is not written through it"
    try:
        if path.exists():
            atomic_write(path, data)
        else:
            _create(path, data)
    except OSError as exc:
        return f"{path}: cannot write the environment snapshot: {exc.strerror or exc}"
    sys.stderr.write(f"cfgopt doctor: wrote {path} ({len(snapshot(stack)['packages'])} packages)\n")
    return None


def _create(path: Path, data: bytes) -> None:
    """A new file, whole or not at all (`writer.write_new`: written beside it, then moved into place)."""
    from cfgopt.text.writer import write_new

    write_new(path, data)


def _render(fmt: str, diags: list[Diagnostic], problems: list[str], files: int, stream) -> None:
    from cfgopt.lint import report
    from cfgopt.lint.engine import LintResult

    report.render(fmt, LintResult(diags, [], files), stream)
