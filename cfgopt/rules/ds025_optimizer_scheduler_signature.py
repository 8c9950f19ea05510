from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache

from cfgopt.knowledge.schema import SCHEMA_DIR
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import zero_stage
from cfgopt.rules.support.ds_blocks import POSITIVE_WARMUP_FROM, REQUIRED_SCHEDULER_PARAMS, WARMUP_SCHEDULERS
from cfgopt.text import suggest
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Entry, Kind
from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ONE_BIT = ("onebitadam", "zerooneadam", "onebitlamb")


@cache
def _snapshot() -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / "ds-optimizers.json").read_text(encoding="utf-8"))


def _release(version: str) -> dict[str, Any]:
    """The snapshot of `version`, else of the newest release before it (else the oldest)."""
    releases = _snapshot()["releases"]
    older = [v for v in releases if version_key(v) <= version_key(version)]
    return releases[max(older, key=version_key) if older else min(releases, key=version_key)]


class OptimizerSchedulerSignature(Rule):
    code = "DS025"
    name = "optimizer-scheduler-signature"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"optimizer", "scheduler"})
    summary = "An `optimizer` / `scheduler` block whose `type` or `params` the class DeepSpeed builds does not take"
    why = (
        "Confidence: certain for the names. DeepSpeed builds an `optimizer` block as `Class(params, **params)`: "
        "its own optimizers by name, case-insensitive (`adam`, `adamw`, `lamb`, `lion`, ...), any other type as "
        "`getattr(torch.optim, type)`, case-sensitive; a `scheduler` block as a class of its lr_schedules "
        "(`WarmupLR`, ...) or of `torch.optim.lr_scheduler`. A type it cannot find (`AdamWW`, `WarmupLRR`) or "
        "a parameter the class does not take (`betaz`) stops the run when the engine starts, as do "
        "`max_grad_norm` in the optimizer params and the 1-bit optimizers with ZeRO, a scheduler argument without a "
        "default left out (`total_num_steps` of WarmupDecayLR / WarmupCosineLR, OneCycle's `cycle_min_lr` / "
        "`cycle_max_lr`), and a `warmup_num_steps` that is not a positive integer (null in every release; 0, a "
        "negative number or a float from 0.19.3). A type only another supported "
        "release has (the 1-bit optimizers, removed in 0.19) is a warning naming those releases. The names and "
        "signatures are snapshots of each DeepSpeed release (cfgopt/knowledge/schemas/ds-optimizers.json, "
        "scripts/sync_ds_optimizers.py; torch's from the torch it was made with)."
    )
    fails_when = "At `deepspeed.initialize` (after the model is loaded): AttributeError, TypeError or ValueError."
    evidence = (
        "deepspeed 0.19.8 runtime/engine.py `_configure_basic_optimizer`, `_scheduler_from_config`",
        "deepspeed 0.19.8 runtime/lr_schedules.py:734, :875 (warmup_num_steps must be a positive integer, "
        "from 0.19.3: PR #8126), :814-820, :865-872, :483-487 (arguments without a default)",
        "the audit table, tests/data/startup-audit.json",
    )
    example = '"optimizer": {"type": "AdamW", "params": {"betaz": [0.9, 0.999]}}   ->  "betas"'
    fix_safety = "No fix: the message names the closest name, which is a guess."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        release = _release(ctx.settings.ds_schema.version)
        torch = _snapshot()["torch"]
        for block in ("optimizer", "scheduler"):
            entry = ctx.source.find((block,))
            if entry is None or not entry.node.is_mapping:
                continue
            yield from self._block(ctx, block, entry, release, torch)

    def _block(self, ctx: Context, block: str, entry: Entry, release: dict, torch: dict) -> Iterator[Diagnostic]:
        type_entry = entry.node.get("type")
        kind = type_entry.node.value if type_entry is not None else None
        if not isinstance(kind, str) or kind == "auto":
            return
        params_entry = entry.node.get("params")
        if block == "optimizer":
            known, accepted = self._optimizer(kind, release, torch)
        else:
            known = kind in release["schedulers"] or kind in torch["schedulers"]
            accepted = release["schedulers"].get(kind, torch["schedulers"].get(kind))
        if not known:
            yield self._unknown_type(ctx, block, kind, type_entry, release, torch)
            return
        if block == "scheduler":
            yield from self._scheduler_rules(ctx, kind, entry, params_entry)
        if params_entry is None or not params_entry.node.is_mapping:
            return
        if block == "optimizer":
            yield from self._optimizer_rules(ctx, kind, params_entry)
        if accepted is None:
            return
        for param in params_entry.node.entries:
            if param.key in accepted or (block == "optimizer" and param.key == "max_grad_norm"):
                continue
            guess = suggest.closest(param.key, accepted, cutoff=0.6)
            hint = f"; did you mean `{guess}`?" if guess else ""
            yield self.at_entry(
                ctx,
                param,
                f"`{param.key}` is not a parameter of the {kind} {block} ({ctx.ds_label}): the engine stops with a "
                f"TypeError when it starts{hint}",
            )

    def _unknown_type(
        self, ctx: Context, block: str, kind: str, type_entry: Entry, release: dict, torch: dict
    ) -> Diagnostic:
        """A type this release cannot find: an error, or a warning where another supported release has it (the
        config was written for that release; judged with this one, the engine stops)."""
        plural = f"{block}s"
        names = sorted(release[plural]) + sorted(torch[plural])
        guess = self._guess(kind, names)
        hint = f"; did you mean `{guess}`?" if guess else ""
        article = "an" if block == "optimizer" else "a"
        message = (
            f"`{block}.type: {kind}` is not {article} {block} {ctx.ds_label} (or torch {torch['version']}) knows: the "
            "engine stops when it starts"
        )
        key = kind.lower() if block == "optimizer" else kind
        others = [version for version, table in _snapshot()["releases"].items() if key in table[plural]]
        if others:
            return self.at_entry(
                ctx,
                type_entry,
                f"{message}; valid in DeepSpeed {others[0]}-{others[-1]} "
                "(`--deepspeed-version` judges another release)",
                on="value",
                severity=Severity.WARNING,
            )
        return self.at_entry(ctx, type_entry, message + hint, on="value")

    @staticmethod
    def _optimizer(kind: str, release: dict, torch: dict) -> tuple[bool, list[str] | None]:
        """Whether DeepSpeed finds the optimizer, and the parameters it takes (None: not known)."""
        if kind.lower() in release["optimizers"]:
            listed = release["optimizers"][kind.lower()]
            if listed is None:
                return True, None
            accepted: set[str] = set()
            for name in listed:
                if name.startswith("torch:"):
                    torch_params = torch["optimizers"].get(name[6:])
                    if torch_params is None:
                        return True, None
                    accepted.update(torch_params)
                else:
                    accepted.add(name)
            return True, sorted(accepted)
        if kind in torch["optimizers"]:
            return True, torch["optimizers"][kind]
        return False, None

    @staticmethod
    def _guess(kind: str, names: list[str]) -> str | None:
        lowered = {name.lower(): name for name in names}
        guess = suggest.closest(kind.lower(), lowered, cutoff=0.6)
        return lowered[guess] if guess else None

    def _scheduler_rules(
        self, ctx: Context, kind: str, entry: Entry, params_entry: Entry | None
    ) -> Iterator[Diagnostic]:
        """A constructor argument without a default left out (TypeError), and a warm-up that is not a positive
        integer (ValueError from DeepSpeed 0.19.3); "auto" is the Trainer's to fill (XF005 judges its value)."""
        params = params_entry.node.value if params_entry is not None else {}
        if not isinstance(params, dict):
            return
        missing = [name for name in REQUIRED_SCHEDULER_PARAMS.get(kind, ()) if name not in params]
        if missing:
            yield self.at_entry(
                ctx,
                params_entry or entry,
                f"the {kind} scheduler needs {', '.join(f'`{name}`' for name in missing)} (no default; "
                f'"auto" lets the HF Trainer fill it): the engine stops with a TypeError when it starts',
            )
        warmup = params_entry.node.get("warmup_num_steps") if params_entry is not None else None
        if warmup is None or kind not in WARMUP_SCHEDULERS or warmup.node.value == "auto":
            return
        value = warmup.node.value
        if value is None:  # `max(2, None)` before 0.19.3, the positive-integer check after
            yield self.at_entry(
                ctx,
                warmup,
                f"`warmup_num_steps` is null: the {kind} scheduler stops when the engine starts",
                on="value",
            )
            return
        strict = version_key(ctx.settings.ds_schema.version) >= POSITIVE_WARMUP_FROM
        if not strict or (is_int(value) and value > 0):
            return
        yield self.at_entry(
            ctx,
            warmup,
            f"`warmup_num_steps` {value!r} is not a positive integer: {ctx.ds_label}'s {kind} stops when the engine "
            "starts (`ValueError: warmup_num_steps must be a positive integer`; releases before 0.19.3 took it)",
            on="value",
        )

    def _optimizer_rules(self, ctx: Context, kind: str, params_entry: Entry) -> Iterator[Diagnostic]:
        clipping = params_entry.node.get("max_grad_norm")
        if clipping is not None:
            yield self.at_entry(
                ctx,
                clipping,
                "`max_grad_norm` is not an optimizer parameter: DeepSpeed stops when the engine starts; use the "
                "top-level `gradient_clipping` (or LLaMA-Factory's `max_grad_norm`)",
            )
        stage = zero_stage(ctx.source)
        version = ctx.settings.ds_schema.version
        if kind.lower() == "muon" and stage == 3 and version_key(version)[:2] == (0, 17):
            yield self.at_entry(
                ctx,
                params_entry,
                f"the Muon optimizer is not compatible with ZeRO stage 3 in DeepSpeed {version}: the engine stops "
                "when it starts (0.18 dropped the check)",
                on="key",
            )
        if kind.lower() in ONE_BIT and stage:
            yield self.at_entry(
                ctx,
                params_entry,
                f"the {kind} optimizer is not compatible with ZeRO (stage {stage}): DeepSpeed stops when the engine "
                "starts",
                on="key",
            )
