from __future__ import annotations

from collections.abc import Iterator

from cfgopt.project.launch_jobs import launch_line, starts_torchrun
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import consumer_entry
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind, Source

STOPS = "LLaMA-Factory stops with `Please use FORCE_TORCHRUN=1 to launch DeepSpeed training`"


class DeepspeedNeedsTorchrun(Rule):
    code = "XF003"
    name = "deepspeed-needs-torchrun"
    severity = Severity.INFO
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    triggers = frozenset({"deepspeed"})
    summary = "DeepSpeed on one GPU (`--gpus 1`): `llamafactory-cli` needs FORCE_TORCHRUN=1"
    why = (
        "Confidence: certain for the code, unknown for the launch. `llamafactory-cli train` starts torchrun only "
        "when FORCE_TORCHRUN is set or more than one GPU is visible; otherwise it runs one plain process, and "
        "LLaMA-Factory refuses DeepSpeed without a distributed launch. cfgopt does not see the node's environment, "
        "so with `--gpus 1` it reminds, unless a launch it sees decides: quiet for a launch line that sets "
        "FORCE_TORCHRUN on (its prefix or the script's `export`; a value known only at run time counts) or starts "
        "`deepspeed`, `torchrun` or `accelerate launch`, and for a YAML that every launch line of the same run "
        "starts so; at a YAML launched without, the finding names the line. "
        "On one GPU DeepSpeed shards nothing; see PF050/PF051 for what it costs."
    )
    fails_when = "At argument parsing (seconds): `Please use `FORCE_TORCHRUN=1` to launch DeepSpeed training.`"
    evidence = (
        "llamafactory 0.9.5 launcher.py:60-61 (torchrun only with FORCE_TORCHRUN or > 1 device), "
        "extras/misc.py:258-260 (`is_env_enabled`: on for `true`, `y` or `1`, any case)",
        "llamafactory 0.9.5 hparams/parser.py:353-354 (G12 in docs/evidence/llamafactory.md §1.6)",
        "https://github.com/ROCm/gpuaidev/pull/119",
    )
    example = "llamafactory-cli train cfg.yaml   ->  FORCE_TORCHRUN=1 llamafactory-cli train cfg.yaml"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if ctx.settings.gpus != 1 or not isinstance(src.data, dict) or not src.data.get("deepspeed"):
            return
        entry = consumer_entry(src, "deepspeed")
        if entry is None:
            return
        if src.kind == Kind.LF_CLI:
            if starts_torchrun(src) is False:
                yield self.at_entry(ctx, entry, _unlaunched(src))
            return
        launches = (src.command or {}).get("launched_by") or []  # the lines of this run that launch the YAML
        plain = [line for line in launches if starts_torchrun(line) is False]
        if launches and not plain:
            return  # every launch of it starts torchrun (or may: a value known only at run time)
        yield self.at_entry(ctx, entry, _launched_plain(plain[0]) if plain else _unlaunched(None))


def _unlaunched(line: Source | None) -> str:
    """The reminder for a launch line's own `deepspeed`, or a YAML whose launch this run does not see."""
    if line is not None and line.command.get("launcher_kind") != "cli":
        return (
            f"`deepspeed` on 1 GPU: `{line.command.get('launcher')}` trains in one process (only "
            f"`llamafactory-cli` reads FORCE_TORCHRUN): launch with torchrun, else {STOPS}"
        )
    return f"`deepspeed` on 1 GPU: launch with FORCE_TORCHRUN=1 (or torchrun), else {STOPS}"


def _launched_plain(line: Source) -> str:
    """The finding at a YAML that a launch line of this run starts in one process."""
    where = f"{line.document.path.name} line {launch_line(line)}"
    if line.command.get("launcher_kind") != "cli":
        how = f"runs it in one process (`{line.command.get('launcher')}` reads no FORCE_TORCHRUN; launch with torchrun)"
    else:
        how = "launches it without FORCE_TORCHRUN=1 (or torchrun)"
    return f"`deepspeed` on 1 GPU: {where} {how}, so {STOPS}"
