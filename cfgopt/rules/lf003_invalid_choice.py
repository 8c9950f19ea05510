from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge import schema
from cfgopt.knowledge.targets import Target
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.choices import outside
from cfgopt.rules.support.llamafactory import fields_for, read_by_argparse, top_entries, yaml11_note
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Entry, Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Values whose meaning is certain: the mapping is safe.
SAFE_ALIASES: dict[str, dict[Any, str]] = {
    "flash_attn": {"flash_attention_2": "fa2", "eager": "disabled", "off": "disabled", "none": "disabled"},
    "quantization_method": {"bitsandbytes": "bnb"},
}

# Values that mean "use flash attention" without saying which: the target decides (unsafe).
FLASH_INTENT = {
    "true",
    "yes",
    "on",
    "fa",
    "flash",
    "flashattn",
    "flash_attn",
    "flash-attention",
    "flashattention",
}


def flash_attn_for(target: Target) -> str:
    """What `flash_attn: true` should become on this target.

    `sdpa`: PyTorch's scaled-dot-product attention dispatches to a flash kernel on CUDA (FlashAttention-2
    kernels inside PyTorch) and on ROCm (AOTriton/CK on MI200/MI300), with no extra package. `fa2` needs the
    `flash-attn` package (a ROCm build on AMD), and without it LLaMA-Factory silently falls back; measured on
    an H200, eager vs SDPA made no difference at Alpaca lengths (bench/h200/measurements.md). So `sdpa`
    is the one value that is valid and flash-backed on every GPU target; `auto` would pick it too, except
    for a few models LLaMA-Factory special-cases.
    """
    return "sdpa"


class InvalidChoice(Rule):
    code = "LF003"
    name = "invalid-choice"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = (
        "A value outside the field's choices (flash_attn, stage, optim, report_to, ...): an error where the run stops"
    )
    why = (
        "On the command line argparse rejects it at once. From YAML, `parse_dict` checks no `Literal` and "
        "converts no LLaMA-Factory `Enum`: the string reaches the code that reads the field, and what happens "
        "there differs per field (cfgopt/rules/support/choices.py, one test per field): `flash_attn: true` passes the "
        "parser and the run dies at model load, after the dataset has been tokenised; HF's own enums "
        "(`optim`, `lr_scheduler_type`, the strategies) fail at once; but `export_device: cuda` exports with "
        '`device_map="auto"` (every value but `cpu` means that) and `quantization_method: bitsandbytes` '
        "trains *unquantized* without a word. So the severity is an error only where the real run stops, and "
        "a warning where it goes on doing something else. `save_strategy: no` is the YAML 1.1 trap: OmegaConf "
        "reads an unquoted `no`/`off` as false and `yes`/`on` as true; the message says so. `report_to` has no "
        "choices in its dataclass, but the Trainer refuses, when it is built, every name that is no integration "
        "of the release's transformers: a typo (`tensorbord`), and `false`, `None` or `null` (transformers 5 "
        "reads null as `[None]`), which are meant as no reporting and only `none` says (the names and words come "
        "from the release's snapshot, which scripts/sync_schemas.py takes from the installed transformers)."
    )
    fails_when = (
        "Errors: at model load for `flash_attn` (measured 16.2 s into a run), at start-up for HF enums and "
        "`finetuning_type`, after start-up for `stage`, where the value is first used for the others "
        "(cfgopt/rules/support/choices.py); `report_to` when the Trainer is built, after the dataset is tokenised "
        "and the model loaded. Warnings: never; the run does something else than written."
    )
    evidence = (
        "llamafactory 0.9.5 model/model_utils/attention.py L86: `NotImplementedError: Unknown attention type`",
        "measured: `flash_attn: true` fails 16.2 s after start on an H200 (bench/h200/measurements.md)",
        "transformers 5.6.0 hf_argparser.py: choices for Enum/Literal fields (`invalid choice`, exit 2); "
        "`parse_dict` does not check them",
        'llamafactory 0.9.5 hparams/parser.py L561-567: every `export_device` but `cpu` is `device_map="auto"`',
        "llamafactory 0.9.5 model/model_utils/quantization.py: no branch for an unknown quantization_method",
        "llamafactory commit c3c0efbaa (2025-04-07): quantization_method `bitsandbytes` renamed `bnb`",
        "transformers 5.6.0 training_args.py L1560-1567 (`report_to` made a list; `none`/`all` first), trainer.py "
        "L550 and integrations/integration_utils.py L2658-2676 (`... is not supported, only ... are supported.`)",
    )
    example = (
        'flash_attn: true        ->  flash_attn: sdpa\nsave_strategy: no       ->  save_strategy: "no"\n'
        "--flash_attn Fa         ->  --flash_attn sdpa"
    )
    fix_safety = (
        'Safe: a different case of a valid value (`FA2`), quoting a YAML 1.1 boolean (`no` -> `"no"`), renamed '
        "values with the same meaning (`bitsandbytes` -> `bnb`, `flash_attention_2` -> `fa2`, `off`/`eager` -> "
        "`disabled`; `report_to: false`/`None`/`null` -> `none`), and the value the code already treats it as "
        "(`export_device: cuda` -> `auto`). Unsafe: "
        "`true`/`Fa` for flash_attn (-> `sdpa`, the flash-backed attention available on every target without "
        "an extra package; choose `fa2` yourself if a flash-attn build is installed), and did-you-mean guesses."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        fields = fields_for(ctx)
        for entry in top_entries(src):
            spec = fields.get(entry.key)
            if spec is not None and entry.key == "report_to":
                yield from self._report_to(ctx, entry)
            if spec is None or spec.choices is None:
                continue
            node = entry.node
            if read_by_argparse(src, entry):
                if node.raw is None:
                    continue
                ok, _, error = schema.argparse_convert(spec, node.raw)
                if ok:
                    continue
                message = f"argparse rejects `--{entry.key} {node.raw}` at once (exit 2): {error}"
                yield self.at_entry(ctx, entry, message, on="value", fix=self._fix(ctx, entry, spec, node.raw))
                continue
            value = node.value
            if value in spec.choices or (value is None and spec.nullable):
                continue
            if isinstance(value, list) and all(v in spec.choices for v in value):
                continue
            written = entry.argument.text.partition("=")[2] if entry.argument else None  # `key=value` after a YAML
            shown = written if written is not None else src.document.text[node.start : node.end] or repr(value)
            yield self._outside(ctx, entry, spec, shown)

    def _outside(self, ctx: Context, entry: Entry, spec: schema.FieldSpec, shown: str) -> Diagnostic:
        """A YAML value outside the choices: an error where the real run stops, else a warning saying what
        the run does instead."""
        audit = outside(entry.key)
        stops = audit.stops(ctx)
        choices = _listed(spec.choices or ())
        version = ctx.settings.lf_schema.version
        yaml11 = yaml11_note(entry.node, shown, [str(c) for c in spec.choices or ()])
        message = f"`{entry.key}: {shown}` is not one of {choices}{yaml11}; LLaMA-Factory {version} {audit.outcome}"
        if audit.fails and not stops:
            message += " (not read in this run, so nothing fails now)"
        fix = self._fix(ctx, entry, spec, shown, same_as=audit.same_as)
        return self.at_entry(
            ctx, entry, message, on="value", fix=fix, severity=Severity.ERROR if stops else Severity.WARNING
        )

    def _report_to(self, ctx: Context, entry: Entry) -> Iterator[Diagnostic]:
        """`report_to` outside the integrations the judged release's transformers knows: the Trainer stops when
        it is built (cfgopt/rules/support/report_to.py)."""
        # imported here, not with the rule: LF003 runs on every config, `report_to` is in few (lint start-up)
        from cfgopt.rules.support.report_to import (
            ppo_checks,
            ppo_refuses,
            refused,
            replacement_fix,
            trainer_error,
            written_value,
        )

        lf = ctx.settings.lf_schema
        node = entry.node
        by_argparse = read_by_argparse(ctx.source, entry)
        value = written_value(ctx, entry)
        if lf.report_to is None or (by_argparse and value is None):
            return  # a snapshot taken without the names, or a bare `--report_to` (argparse's own error)
        if ppo_checks(ctx) and ppo_refuses(value):
            return  # LLaMA-Factory's PPO check stops it at start-up, before the Trainer is built: LF017 says so
        why = refused(value, lf.report_to)
        if why is None:
            return
        shown = node.raw if by_argparse else ctx.source.document.text[node.start : node.end] or repr(value)
        subject = f"`report_to: {shown}`" + (f": `{why.item}`" if isinstance(value, list) else "")
        if why.off:
            meaning = (
                f"is read as `[None]` by transformers {lf.transformers}, not as no reporting"
                if value is None
                else "means no reporting, which TrainingArguments reads only as `none`"
            )
        elif why.item in lf.report_to.words:
            meaning = "stands only alone"
        else:
            meaning = f"names no integration transformers {lf.transformers} reports to"
        if why.exact and not why.off:
            meaning += f" (names are case-sensitive: `{why.exact}`)"
        elif why.guess:
            meaning += f" (did you mean `{why.guess}`?)"
        message = (
            f"{subject} {meaning}: the Trainer stops when it is built, after the dataset is tokenised and the model "
            f"loaded (`{trainer_error(why.item, lf.report_to)}`)"
        )
        yield self.at_entry(ctx, entry, message, on="value", fix=replacement_fix(self, ctx, entry, why))

    def _fix(self, ctx: Context, entry: Entry, spec: schema.FieldSpec, shown: str, same_as: str | None = None):
        src = ctx.source
        text = str(shown).strip().strip("'\"")
        choices = [str(c) for c in spec.choices or ()]
        low = text.lower()
        for choice in choices:
            if choice.lower() == low:
                described = f'Quote it: `"{choice}"`' if choice == text else f"Use `{choice}`"
                return self.fix(described, edits.replace_value(src, entry, choice), safe=True)
        if same_as is not None and same_as in choices:
            return self.fix(f"Use `{same_as}` (what it means now)", edits.replace_value(src, entry, same_as), safe=True)
        alias = SAFE_ALIASES.get(entry.key, {}).get(low)
        if alias is not None and alias in choices:
            return self.fix(f"Use `{alias}`", edits.replace_value(src, entry, alias), safe=True)
        if entry.key == "flash_attn":
            if low in FLASH_INTENT or low in ("fa3",):
                target = ctx.settings.target
                value = flash_attn_for(target)
                where = target.name if target.stated else "NVIDIA and AMD GPUs"
                # torch's own flash kernel needs sm80 too (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
                # `check_flash_attention_hardware_support`: "[sm80, sm121]" since torch 2.1, which LLaMA-Factory
                # 0.9.5's torch >= 2.4 is past): SDPA runs its memory-efficient kernel on V100 / T4
                older = target.is_cuda and not target.runs_fa2
                kernel, fa2 = ("memory-efficient", "Ampere or newer (LF049)") if older else ("flash-backed", "")
                return self.fix(
                    f"Use `{value}` ({kernel} SDPA on {where}; `fa2` needs {fa2 or 'the flash-attn package'})",
                    edits.replace_value(src, entry, value),
                    safe=False,
                )
            if low in ("false", "no"):
                return self.fix(
                    "Use `auto` (the default attention, SDPA)",
                    edits.replace_value(src, entry, "auto"),
                    safe=False,
                )
        from cfgopt.text.suggest import closest  # only for an unknown name (start-up)

        guess = closest(text, choices, cutoff=0.6)
        if guess:
            return self.fix(f"Use `{guess}`", edits.replace_value(src, entry, guess), safe=False)
        return None


def _listed(choices, most: int = 12) -> str:
    """The choices for a message: all of them when few, else the first ones and how many (optim has 42)."""
    names = [str(c) for c in choices]
    if len(names) <= most:
        return ", ".join(names)
    return f"{', '.join(names[:most])}, ... ({len(names)} choices)"
