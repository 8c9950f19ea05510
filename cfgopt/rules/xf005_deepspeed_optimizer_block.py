from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import consumer_entry, lf_value
from cfgopt.rules.support.ds_blocks import (
    OPTIMIZER_TRAINER_KEYS,
    POSITIVE_WARMUP_FROM,
    WARMUP_SCHEDULERS,
    ignores_learning_rate,
    is_hf_shaped,
    optimizer_defaults,
    same_number,
    schedule_curve,
    trainer_warmup,
)
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.record import Record
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Entry, Kind, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A scheduler that never decays: a warning even for a DeepSpeed JSON judged alone, as is one that ignores the
# training config's learning rate (`ignores_learning_rate`); the others replace the Trainer's schedule with a
# similar one (info).
NEVER_DECAYS = ("WarmupLR", "LRRangeTest")


class Block(Record):
    """An `optimizer` / `scheduler` block as DeepSpeed reads it."""

    entry: Entry
    kind: str  # its `type` ("?" when it has none that is a string)
    params_entry: Entry | None
    params: dict[str, Any]


def _block(source: Source, name: str) -> Block | None:
    entry = source.root.get(name) if source.root is not None and source.root.is_mapping else None
    if entry is None or not entry.node.is_mapping:
        return None
    kind = entry.node.get("type")
    kind_text = kind.node.value if kind is not None and isinstance(kind.node.value, str) else "?"
    params_entry = entry.node.get("params")
    params = params_entry.node.value if params_entry is not None else None
    return Block(entry, kind_text, params_entry, params if isinstance(params, dict) else {})


class DeepspeedOptimizerBlock(Rule):
    code = "XF005"
    name = "deepspeed-optimizer-block"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"optimizer", "scheduler"})
    summary = (
        "An `optimizer` / `scheduler` block overrides the optimizer / LR schedule the training config sets, or "
        "leaves its learning rate at DeepSpeed's default"
    )
    why = (
        "Confidence: certain. When the DeepSpeed JSON has an `optimizer` block the HF Trainer hands DeepSpeed a "
        "placeholder (DummyOptim) and DeepSpeed builds the optimizer from the block: LLaMA-Factory's `optim` and its "
        "own optimizers (LoRA+, GaLore, BAdam, ...) are not used, and on ROCm DeepSpeed's FusedAdam must be "
        "JIT-built with hipcc. A `scheduler` block likewise replaces `lr_scheduler_type` / warmup, with DeepSpeed's "
        "curve: WarmupLR rises, then stays flat for the rest of the run (it never decays); OneCycle and "
        "LRRangeTest ignore `learning_rate`; the warm-up is logarithmic unless `warmup_type: linear`. The Trainer "
        'fills only keys that are present and "auto": an optimizer block without `lr` (or `betas`, `eps`, '
        "`weight_decay`) runs with the DeepSpeed class's default (lr 0.001 for Adam/AdamW/Lamb/Lion) whatever the "
        "training config says (reported where the two differ, with a safe fix that writes the key as "
        '"auto"); WarmupDecayLR without `warmup_max_lr` peaks at 0.001, as WarmupLR does up to DeepSpeed 0.17.1. '
        'Explicit values that differ are XF002\'s (the run stops). A `warmup_num_steps: "auto"` filled with 0 '
        "(no warm-up in the training config) stops DeepSpeed 0.19.3+ (an error). A DeepSpeed JSON judged alone "
        '(no LLaMA-Factory config names it) is judged when it holds an "auto" value (written for the HF '
        "Trainer / accelerate; a native DeepSpeed script's JSON configures its schedule with these blocks on "
        "purpose): WarmupLR, OneCycle, LRRangeTest and a missing `lr` are warnings, the other schedulers and a "
        "fixed `lr` (which the Trainer's `learning_rate` must then equal) are info. With ZeRO-3 and a frozen "
        "reference model (DPO/KTO/PPO) the blocks have crashed optimizer init (LLaMA-Factory #2546). "
        "LLaMA-Factory's own DeepSpeed configs have neither block."
    )
    fails_when = (
        "Silently: the run uses DeepSpeed's optimizer, schedule or default learning rate instead of the training "
        'config\'s. `warmup_num_steps: "auto"` with no warm-up: at `deepspeed.initialize` in DeepSpeed 0.19.3+ '
        "(`ValueError: warmup_num_steps must be a positive integer, got 0`)."
    )
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py:542-576 `deepspeed_optim_sched` (DummyOptim / DummyScheduler; "
        "4.41.2: L319-358, the same), L160-170 (only present keys are filled)",
        "deepspeed 0.19.8 runtime/lr_schedules.py:703-789 (WarmupLR: 'then fix at max lr'; `_get_gamma` returns 1.0 "
        "after the warm-up; `warmup_type` defaults to log), :791-839 (WarmupDecayLR, warmup_max_lr=0.001), "
        ":734 (ValueError for a warm-up that is not a positive integer, from 0.19.3: PR #8126); 0.17.2 "
        "(PR #7360) made WarmupLR's peak default to the optimizer's lr (0.001 before)",
        "deepspeed 0.19.8 ops/adam/fused_adam.py:76-83, ops/adam/cpu_adam.py:15-22 (lr=1e-3 defaults); "
        "runtime/engine.py `_configure_basic_optimizer`",
        "https://github.com/hiyouga/LlamaFactory/issues/2546, https://github.com/hiyouga/LlamaFactory/issues/1485",
        "https://github.com/deepspeedai/DeepSpeed/issues/6600 (FusedAdam build failure on ROCm, October 2024, a "
        "regression of that month fixed by PR #6587: the JIT build with hipcc is what remains)",
    )
    example = '"scheduler": {"type": "WarmupLR", ...}   ->  remove; lr_scheduler_type in the YAML applies'
    fix_safety = (
        "Removing a block is unsafe: it changes the optimizer or schedule that runs (to the training config's). "
        'Writing a missing or fixed optimizer key as "auto" is safe: the HF Trainer then fills it with the '
        "training config's value, which is what the config says (a fixed value that differs stops the run)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None or not src.root.is_mapping:
            return
        consumer = ctx.consumers[0] if ctx.consumers else None
        if consumer is None and not is_hf_shaped(src):
            return  # a native DeepSpeed script's JSON: the blocks are how it configures its schedule
        optimizer, scheduler = _block(src, "optimizer"), _block(src, "scheduler")
        if optimizer is not None:
            yield self._optimizer_replaced(ctx, optimizer, consumer)
            yield from self._optimizer_keys(ctx, optimizer, consumer)
        if scheduler is not None:
            yield self._scheduler(ctx, scheduler, consumer)

    # ------------------------------------------------------------------------------------------- optimizer

    def _optimizer_replaced(self, ctx: Context, block: Block, consumer: Source | None) -> Diagnostic:
        extra = ""
        if ctx.settings.target.is_rocm:
            extra = f"; on {ctx.settings.target.device} DeepSpeed's FusedAdam is JIT-built with hipcc"
        unused = "the training config's `optim`" if consumer is None else _said(ctx, consumer, "optim")
        return self.at_entry(
            ctx,
            block.entry,
            f"The `optimizer` block ({block.kind}) replaces the optimizer the HF Trainer would build: "
            f"{unused} is silently not used{extra}",
            severity=Severity.INFO if consumer is None else None,
            fix=self.fix("Remove the `optimizer` block", edits.delete_entry(ctx.source, block.entry), safe=False),
        )

    def _optimizer_keys(self, ctx: Context, block: Block, consumer: Source | None) -> Iterator[Diagnostic]:
        """The keys the Trainer fills: left out, DeepSpeed's default runs; fixed (alone), the Trainer's value
        must equal it."""
        defaults = optimizer_defaults(block.kind, block.params)
        lf = ctx.settings.lf_schema
        for key, fields in OPTIMIZER_TRAINER_KEYS.items():
            if key in block.params:
                if consumer is None and key == "lr" and block.params[key] != "auto":
                    yield self._fixed_lr(ctx, block)
                continue
            if key not in defaults:
                continue
            default = defaults[key]
            if consumer is None:
                if key != "lr":
                    continue  # the other defaults equal the Trainer's own (0.9/0.999, 1e-8, 0.0)
                said = "whatever learning_rate the training config sets"
            else:
                values = [lf_value(consumer, field, lf) for field in fields]
                trainer = values[0] if len(values) == 1 else values
                if same_number(default, trainer):
                    continue
                said = f"not {_said(ctx, consumer, '+'.join(fields), trainer)}"
            yield self.at_entry(
                ctx,
                block.params_entry or block.entry,
                f"The `optimizer` block sets no `{key}`: DeepSpeed's {block.kind} runs with its default {default}, "
                f"{said}",
                fix=self.fix(f'Add "{key}": "auto"', _insert_param(ctx.source, block, key), safe=True),
            )

    def _fixed_lr(self, ctx: Context, block: Block) -> Diagnostic:
        entry = block.params_entry.node.get("lr") if block.params_entry is not None else None
        value = block.params["lr"]
        return self.at_entry(
            ctx,
            entry or block.entry,
            f"`optimizer.params.lr` is fixed at {value!r}: under the HF Trainer the training config's "
            'learning_rate must equal it or the run stops at train start; "auto" takes the Trainer\'s',
            on="value",
            severity=Severity.INFO,
            fix=self.fix(
                'Set it to "auto"', edits.replace_value(ctx.source, entry, "auto") if entry else None, safe=True
            ),
        )

    # ------------------------------------------------------------------------------------------- scheduler

    def _scheduler(self, ctx: Context, block: Block, consumer: Source | None) -> Diagnostic:
        ds_version = ctx.settings.ds_schema.version
        curve = schedule_curve(block.kind, block.params, ds_version)
        remove = self.fix("Remove the `scheduler` block", edits.delete_entry(ctx.source, block.entry), safe=False)
        strict_warmup = version_key(ds_version) >= POSITIVE_WARMUP_FROM
        auto_warmup = block.kind in WARMUP_SCHEDULERS and block.params.get("warmup_num_steps") == "auto"
        if consumer is None:
            surprising = block.kind in NEVER_DECAYS or ignores_learning_rate(block.kind, block.params, ds_version)
            severity = Severity.WARNING if surprising else Severity.INFO
            if auto_warmup and strict_warmup:
                curve += (
                    f"; with no warm-up in the training config the Trainer fills 0 and {ctx.ds_label} stops "
                    "(`warmup_num_steps must be a positive integer`)"
                )
            return self.at_entry(
                ctx,
                block.entry,
                f"The `scheduler` block ({block.kind}) replaces the HF Trainer's LR schedule (`lr_scheduler_type`, "
                f"warm-up){': ' + curve if curve else ''}",
                severity=severity,
                fix=remove,
            )
        lf = ctx.settings.lf_schema
        warmup = trainer_warmup(lf_value(consumer, "warmup_steps", lf), lf_value(consumer, "warmup_ratio", lf))
        if auto_warmup and strict_warmup and warmup.steps == 0:
            return self.at_entry(
                ctx,
                block.entry,
                f'`scheduler.params.warmup_num_steps` is "auto" and {consumer.document.path.name} has '
                f"{warmup.said_by}: the HF Trainer fills 0 and {ctx.ds_label}'s {block.kind} stops when the engine "
                "starts (`ValueError: warmup_num_steps must be a positive integer, got 0`)",
                severity=Severity.ERROR,
                fix=remove,
            )
        return self.at_entry(
            ctx,
            block.entry,
            f"The `scheduler` block ({block.kind}) replaces the schedule the HF Trainer would build: "
            f"{_said(ctx, consumer, 'lr_scheduler_type')} is silently not used{': ' + curve if curve else ''}",
            fix=remove,
        )


def _said(ctx: Context, consumer: Source, keys: str, value: Any = None) -> str:
    """`key` ('value' in train.yaml), or, where the config does not set it, the default the Trainer takes."""
    name = consumer.document.path.name
    fields = keys.split("+")
    if value is None:
        value = lf_value(consumer, fields[0], ctx.settings.lf_schema)
    shown = " / ".join(f"`{field}`" for field in fields)
    if any(consumer_entry(consumer, field) is not None for field in fields):
        return f"{shown} ({value!r} in {name})"
    return f"{shown} (not set in {name}: its default {value!r})"


def _insert_param(source: Source, block: Block, key: str):
    """`"key": "auto"` added to the block's `params` (or a `params` holding it added to the block)."""
    if block.params_entry is not None and block.params_entry.node.is_mapping:
        if block.params_entry.node.entries:
            return edits.insert_entry(source, block.params_entry, key, "auto")
        return None
    if block.params_entry is not None:
        return None  # `params` is not a mapping: DS005's
    return edits.insert_entry(source, block.entry, "params", {key: "auto"})
