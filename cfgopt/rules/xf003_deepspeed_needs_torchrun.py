from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import consumer_entry
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

# A launch through these starts the distributed processes itself (`deepspeed src/train.py ...`).
DISTRIBUTED_LAUNCHERS = ("deepspeed", "torchrun", "accelerate")


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
        "LLaMA-Factory refuses DeepSpeed without a distributed launch. cfgopt sees neither the environment nor "
        "the launcher, so with `--gpus 1` it only reminds (skipped for a shell script that sets FORCE_TORCHRUN "
        "or launches through `deepspeed`, `torchrun` or `accelerate launch`). "
        "On one GPU DeepSpeed shards nothing; see PF050/PF051 for what it costs."
    )
    fails_when = "At argument parsing (seconds): `Please use `FORCE_TORCHRUN=1` to launch DeepSpeed training.`"
    evidence = (
        "llamafactory 0.9.5 launcher.py:60-61 (torchrun only with FORCE_TORCHRUN or > 1 device)",
        "llamafactory 0.9.5 hparams/parser.py:353-354 (G12 in docs/evidence/llamafactory.md §1.6)",
        "https://github.com/ROCm/gpuaidev/pull/119",
    )
    example = "llamafactory-cli train cfg.yaml   ->  FORCE_TORCHRUN=1 llamafactory-cli train cfg.yaml"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if ctx.settings.gpus != 1 or not isinstance(src.data, dict) or not src.data.get("deepspeed"):
            return
        if src.kind == Kind.LF_CLI and (
            "FORCE_TORCHRUN" in src.document.text or src.command.get("launcher_kind") in DISTRIBUTED_LAUNCHERS
        ):
            return
        entry = consumer_entry(src, "deepspeed")
        if entry is None:
            return
        yield self.at_entry(
            ctx,
            entry,
            "`deepspeed` on 1 GPU: launch with FORCE_TORCHRUN=1 (or torchrun), else LLaMA-Factory stops with "
            "`Please use FORCE_TORCHRUN=1 to launch DeepSpeed training`",
        )
