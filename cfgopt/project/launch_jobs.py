"""A launch line that names a YAML (`llamafactory-cli train cfg.yaml key=value`) is one job: the YAML's keys, then
the line's overrides, merged as `read_args` merges them (`OmegaConf.merge`: an override replaces a key, a mapping
is merged key by key), with the GPU count the line launches (docs/command-lines.md).

The YAML is also linted as its own file. What the line's job shares with the YAML's is reported once, at the
YAML: a finding of the line is dropped when the YAML has the same one (`drop_repeated`). The YAML's own job
is judged for the GPU count its launches state, when they all state the same (`launched_gpus`). Used by the
engine (`Project.link`, `Project.diagnostics`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from cfgopt.text.source import Kind, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from cfgopt.job.settings import Settings
    from cfgopt.knowledge.accelerate_plan import AcceleratePlan
    from cfgopt.text.diagnostics import Diagnostic


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`OmegaConf.merge(yaml, overrides)`, then `to_container`: overrides win; two mappings merge key by key."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def missing_message(config: str, searched: list[str]) -> str:
    where = (
        searched[0] if len(searched) == 1 else "the current directory, the script's folder and every folder above it"
    )
    return (
        f"`{config}` not found (looked in {where}): LLaMA-Factory stops at once (`FileNotFoundError` when "
        "`read_args` opens it)"
    )


# The rules that judge an HF-Trainer script's launch (`torchrun train.py --deepspeed ds.json --bf16 ...`, another
# project's script): only what TrainingArguments and its DeepSpeed JSON decide; the script's other arguments, its
# data and its model loading are its own (docs/command-lines.md).
HF_TRAINER_RULES = frozenset({"LF004", "LF005", "LF007", "LF008", "LF053", "LF050", "PF001"})


def judged_as_hf_trainer(source: Source, code: str) -> bool:
    """Does the rule `code` judge this source? Every rule judges a LLaMA-Factory source; an HF-Trainer launch
    only by HF_TRAINER_RULES."""
    return source.command.get("trainer") != "hf" or code in HF_TRAINER_RULES


def written_by_script(config: str, written: Iterable[str]) -> bool:
    """Does the script write the YAML before launching it (`cat > cfg.yaml <<EOF`, `sed ... > cfg.yaml`, `cp
    base.yaml cfg.yaml`)? Then its absence now says nothing: the job is open (its keys are known when it runs)."""
    wanted = posixpath.normpath(config)
    return any(posixpath.normpath(path) == wanted for path in written if path)


def attach(line: Source, yaml_sources: list[Source]) -> None:
    """The line's job becomes the YAML's keys under its overrides; unknown (open) when the YAML did not parse."""
    base = next((s for s in yaml_sources if s.kind.is_llamafactory), None)
    if base is None or base.error is not None or not isinstance(base.data, dict):
        line.command["open"] = True
        return
    line.command["base"] = base
    line.root.value = merged(base.data, line.command.get("overrides", {}))
    base.command.setdefault("launched_by", []).append(line)


def launched_gpus(sources: list[Source]) -> None:
    """A YAML launched by lines that all state one GPU count is judged for it (`Job.hardware`)."""
    for src in sources:
        lines = src.command.get("launched_by") if src.kind != Kind.LF_CLI else None
        if not lines:
            continue
        counts = {line.command.get("launcher_gpus") for line in lines}
        counts = {c[0] if c else None for c in counts}
        if len(counts) == 1 and None not in counts:
            src.command["launcher_gpus"] = lines[0].command["launcher_gpus"]


# `llamafactory-cli train` starts torchrun when FORCE_TORCHRUN is on or more than one GPU is visible, else it trains
# in one plain process (llamafactory 0.9.5 launcher.py:57-62). "On" as 0.9.5's `is_env_enabled` reads it
# (extras/misc.py:258-260: "true", "y" or "1", any case); 0.9.0's cli.py took "true" or "1" only, so a "y" there
# is taken as on: never a reminder where the launch may be right. Only the CLI reads the variable: `python
# src/train.py` is one process whatever it says. These launchers start the processes themselves.
FORCE_TORCHRUN_ON = ("true", "y", "1")
DISTRIBUTED_LAUNCHERS = ("deepspeed", "torchrun", "accelerate")


def starts_torchrun(line: Source) -> bool | None:
    """Does the launch line start LLaMA-Factory distributed whatever the GPU count? True: a distributed launcher,
    or `llamafactory-cli` with FORCE_TORCHRUN on (the line's prefix or the script's `export`); False: one plain
    process where one GPU is visible; None: FORCE_TORCHRUN's value is known only at run time."""
    kind = line.command.get("launcher_kind")
    if kind in DISTRIBUTED_LAUNCHERS:
        return True
    env = line.command.get("env") or {}
    if kind != "cli" or "FORCE_TORCHRUN" not in env:
        return False
    value = env["FORCE_TORCHRUN"]
    return None if value is None else value.lower() in FORCE_TORCHRUN_ON


def launch_line(line: Source) -> int:
    """The 1-based line of the script where the launch's command word stands (`llamafactory-cli`)."""
    return line.document.position(line.command.get("start", 0))[0]


_CONFIG_FILE = ("--config_file", "--config-file")


def accelerate_config(line: Source) -> tuple[bool, str | None]:
    """(does the line name an accelerate config file, its path as written or None where known only at run time).
    accelerate's default config (~/.cache/huggingface/accelerate/default_config.yaml) is never read: it is the
    machine's, not the job's."""
    options = line.command.get("launcher_options") or {}
    for option in _CONFIG_FILE:
        if option in options:
            return True, options[option]
    return False, None


def with_accelerate_plan(line: Source, plan: AcceleratePlan) -> None:
    """The line's job runs as its accelerate config says (`Job.distributed`); its GPU count, where the line states
    none (`--num_processes`), is the config's `num_processes` (every machine's processes together)."""
    line.command["accelerate"] = plan
    if line.command.get("launcher_gpus") is None and plan.processes:
        where = f"`num_processes: {plan.processes}` in {posixpath.basename(plan.config) or plan.config}"
        line.command["launcher_gpus"] = (plan.processes, where)


def launched_plans(sources: list[Source]) -> None:
    """A YAML launched by lines that all run it under one accelerate plan is judged with it; launched under several
    (an FSDP line and a DDP line), its own memory is no one job's: the plan is unknown and each line judges its
    own job (the memory rules report at the lines)."""
    for src in sources:
        lines = src.command.get("launched_by") if src.kind != Kind.LF_CLI else None
        if not lines:
            continue
        plans = {line.command.get("accelerate") for line in lines}
        if len(plans) == 1 and None not in plans:
            src.command["accelerate"] = lines[0].command["accelerate"]
        elif len(plans) > 1 and plans != {None}:
            from cfgopt.knowledge.accelerate_plan import AcceleratePlan  # only where accelerate launches a YAML

            src.command["accelerate"] = AcceleratePlan("unknown", problem="its launches run it under different plans")


def gpus_by_file(sources: list[Source]) -> dict[Path, tuple[int, str]]:
    """Each file whose launches all state one GPU count (a script's lines, a YAML they launch): the count and
    where it comes from (`NPROC_PER_NODE=8` (line 2), `run.sh: --nproc_per_node 8` for a YAML)."""
    found: dict[Path, set[tuple[int, str]]] = {}
    for src in sources:
        launched = src.command.get("launcher_gpus") if src.command else None
        lines = src.command.get("launched_by") if src.command else None
        if src.kind == Kind.LF_CLI:
            where = (launched[0], f"{src.document.path.name}: {launched[1]}") if launched else (0, "")
            found.setdefault(src.document.path, set()).add(where)
        elif launched and lines:
            found.setdefault(src.document.path, set()).add(
                (launched[0], f"{lines[0].document.path.name}: {launched[1]}")
            )
    return {path: min(counts) for path, counts in found.items() if len({c for c, _ in counts}) == 1 and min(counts)[0]}


def with_launched_gpus(settings: Settings, count: int, where: str) -> Settings:
    """The file's settings with the GPU count its launches state."""
    launched = settings.copied()
    launched.gpus, launched.gpus_source = count, where
    return launched


def drop_repeated(diags: list[Diagnostic], owners: dict[int, Source], real_path) -> list[Diagnostic]:
    """The findings of a launch line's job that its YAML reports too (same code and message) are the YAML's."""
    at_yaml: dict[Path, set[tuple[str, str]]] = {}
    for d in diags:
        at_yaml.setdefault(real_path(d.path), set()).add((d.code, d.message))
    out = []
    for d in diags:
        base = getattr(owners.get(id(d)), "command", {}).get("base")
        if base is not None and (d.code, d.message) in at_yaml.get(real_path(base.document.path), set()):
            continue
        out.append(d)
    return out


def about_unknown(diag: Diagnostic, source: Source) -> bool:
    """Is the finding about a value known only when the script runs (`--template ${template}`)? Such a value is
    unknown, never an error."""
    return any(start <= diag.start and diag.end <= end for start, end in source.command.get("unknown", ()))
