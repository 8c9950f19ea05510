from __future__ import annotations

from collections.abc import Iterator

import yaml

from cfgopt.knowledge import schema
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import fields_for, read_by_argparse, top_entries, yaml11_note
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.patterns import lazy
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Entry, Kind

_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0")
# From 0.9.2 FinetuningArguments.__post_init__ adds the three switches up: `int(self.use_galore) +
# int(self.use_apollo) + (self.use_badam) > 1` (finetuning_args.py L598 in 0.9.5, L483 in 0.9.2). A string in
# use_badam is `int + str` (TypeError); one in use_galore / use_apollo crashes in int() unless it reads as one.
FIRST_ADDING_SWITCHES = (0, 9, 2)
ADDED_SWITCHES = ("use_galore", "use_apollo", "use_badam")


def _string_switch_crashes(key: str, value: str, version: str) -> bool:
    """Does LLaMA-Factory `version` stop at start-up on this string in a GaLore / APOLLO / BAdam switch?"""
    if key not in ADDED_SWITCHES or version_key(version)[:3] < FIRST_ADDING_SWITCHES:
        return False
    try:
        int(value)  # the real check's own conversion, mirrored
    except ValueError:
        return True
    return key == "use_badam"


# Fields LLaMA-Factory's `__post_init__` runs through `split_arg`, which splits a string on commas and returns
# anything else unchanged (0.9.5 hparams/finetuning_args.py L561-573, data_args.py L148-154, L169; the same in
# 0.9.3 and 0.9.4): a YAML list there is the list the code wants, not a wrong type.
SPLIT_ON_COMMAS = frozenset(
    {
        "dataset",
        "eval_dataset",
        "interleave_probs",
        "freeze_trainable_modules",
        "freeze_extra_modules",
        "lora_target",
        "oft_target",
        "additional_target",
        "galore_target",
        "apollo_target",
    }
)


# PyYAML's YAML 1.1 float needs a dot and a signed exponent, so to a release that read YAML with it
# (`schema.reads_yaml_with_pyyaml`) `1e-4` was the string '1e-4'; OmegaConf's float resolver takes it.
_EXPONENT = lazy(r"([-+]?)([0-9][0-9_]*)(?:\.([0-9_]*))?([eE])([-+]?)([0-9]+)")


def _pyyaml_string(text: str) -> bool:
    """Does PyYAML's safe loader read this plain scalar as a string (where OmegaConf reads a float)?"""
    try:
        return isinstance(yaml.safe_load(text), str)
    except yaml.YAMLError:
        return False


def _yaml11_float(text: str) -> str | None:
    """`1e-4` as both readers take it for a float: `1.0e-4` (None where the text is not of that form)."""
    m = _EXPONENT.fullmatch(text)
    if m is None:
        return None
    sign, whole, fraction, e, exp_sign, exponent = m.groups()
    return f"{sign}{whole}.{fraction or '0'}{e}{exp_sign or '+'}{exponent}"


def _as_number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


class WrongValueType(Rule):
    code = "LF002"
    name = "wrong-value-type"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "A value of the wrong type: LLaMA-Factory's YAML path passes it through unconverted"
    why = (
        '`HfArgumentParser.parse_dict` does no type conversion: a quoted `"1e-4"` stays a string and crashes '
        'where it is used (optimizer creation, the data loader, model load), and a quoted `"false"` is a '
        "non-empty string, so the feature is silently switched *on*. An integral float in an int field "
        "(`lora_rank: 8.0`, or `max_steps: 1e4`, which OmegaConf reads as a float) is passed on as a float too: an "
        "error where the code that uses it needs a real int (`range()`, a slice, a DataLoader's batch size, "
        "PEFT's layer shapes) and the job gets there, a warning where it is converted or harmless. A list in a "
        "field LLaMA-Factory splits on commas (`dataset`, `eval_dataset`, `lora_target`, `additional_target`, "
        "`freeze_trainable_modules`, ...: `split_arg` returns a list unchanged) is used as that list and not "
        "reported. On the command line argparse converts and rejects a bad value at once (`invalid int value`, "
        "`Truthy value expected`)."
    )
    fails_when = (
        "Quoted numbers: when the value is first used, often after tokenisation and model load "
        "(LLaMA-Factory #4149: `TypeError: '<=' not supported`). Strings for booleans: never; the run is wrong. "
        "Integral floats, where the code that needs the int is reached: at start-up (`seed`, "
        "`torch_empty_cache_steps`); loading and tokenising the data (`max_samples` for a dataset with at least "
        "that many rows, `preprocessing_num_workers` unless streaming, `preprocessing_batch_size`; `cutoff_len` "
        "at the first batch when packing SFT or pre-training, else at the first example that reaches it); at model "
        "load (`lora_rank`, `pissa_iter`, `oft_rank`, `oft_block_size` for a new adapter, "
        "`freeze_trainable_layers`); at train start (`per_device_train_batch_size`, `gradient_accumulation_steps`, "
        "`max_steps` > 0, `dataloader_num_workers` > 0, `dataloader_prefetch_factor`, `data_seed`) or the first "
        "evaluation (`per_device_eval_batch_size`). A list in a numeric field: where it is first used "
        "(`num_train_epochs: [3]`: `math.ceil` in the Trainer's loop, at train start). "
        "Command line: at once, argparse exit 2. From 0.9.2, a string in `use_badam` (or one that is no integer "
        "in `use_galore` / `use_apollo`) stops the start-up checks: they add the three switches up. Up to 0.9.3, "
        "an unquoted `1e-4` too: those releases read YAML with PyYAML, for which it is a string."
    )
    evidence = (
        "transformers 5.6.0 hf_argparser.py `parse_dict`: `obj = dtype(**inputs)`, no conversion",
        "https://github.com/hiyouga/LlamaFactory/issues/4149 (learning_rate read as a string)",
        "docs/evidence/llamafactory.md §1.4, reproduced with the real 0.9.5 parser",
        "llamafactory 0.9.5 hparams/finetuning_args.py L598 (0.9.2 L483): "
        "`int(self.use_galore) + int(self.use_apollo) + (self.use_badam) > 1`",
        "llamafactory 0.9.3 hparams/parser.py L65 `yaml.safe_load(...)` (0.9.0-0.9.2: transformers "
        "`HfArgumentParser.parse_yaml_file`, also `yaml.safe_load`); 0.9.4 L75 `OmegaConf.load`: PyYAML reads "
        "`1e-4` as a string, OmegaConf as a float",
        "llamafactory 0.9.5 hparams/parser.py L529 (`transformers.set_seed`); data/loader.py L157-159 "
        "(`select(range(min(max_samples, len(dataset))))`), L250, L258 (`map(num_proc=..., batch_size=...)`); "
        "data/processor/supervised.py L218-220 (packed padding), pretrain.py L37, L43-47, processor_utils.py "
        "L76-88 (truncation by `cutoff_len`); model/adapter.py L80-92 (freeze layers), L235, L245-246 (LoRA / OFT "
        "rank), L265-270 (PiSSA)",
        "transformers 5.6.0 training_args.py L1681-1684 (`torch_empty_cache_steps` must be an int), trainer.py "
        "L2324, L2336 (`math.ceil(num_train_epochs)`); torch utils/data/sampler.py L323 (batch size must be an "
        "int); peft 0.18.1 tuners/lora/layer.py L334-336 (`int()` of the PiSSA iterations), tuners/oft/layer.py "
        "L446-466",
        "tests/oracle/test_integral_floats.py raises each integral-float failure with the real libraries on the "
        "CPU (a Trainer with `gradient_accumulation_steps=2.0`: `TypeError: 'float' object cannot be interpreted "
        "as an integer`)",
        "llamafactory 0.9.5 hparams/finetuning_args.py L561-573, data_args.py L148-154: `split_arg` splits a "
        "string on commas and returns anything else unchanged",
    )
    example = (
        'learning_rate: "1e-4"  ->  learning_rate: 1.0e-4\nbf16: "false"          ->  bf16: false\n'
        "max_steps: 1e4         ->  max_steps: 10000"
    )
    fix_safety = (
        "Safe: unquoting a quoted number, `1e-4` written `1.0e-4` for a release that reads YAML with PyYAML (the "
        "same float to every reader), an integral float written as the integer, or a quoted GaLore / APOLLO / "
        "BAdam switch that stops the start-up (it can only crash as it is). Unsafe: another quoted boolean, "
        "because the run currently behaves as `true` and the fix changes that to what the text says."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        fields = fields_for(ctx)
        for entry in top_entries(src):
            spec = fields.get(entry.key)
            if spec is None or spec.choices is not None or "any" in spec.types:
                continue
            node = entry.node
            if read_by_argparse(src, entry):
                yield from self._command_line_value(ctx, entry, spec)
                continue
            value = node.value
            if isinstance(value, (list, dict)) and not {"list", "dict", "any"} & set(spec.types):
                if not (isinstance(value, list) and entry.key in SPLIT_ON_COMMAS):
                    yield self._container_value(ctx, entry, spec)
                continue
            if spec.numeric_only and isinstance(value, float) and not node.style and self._read_as_string(ctx, node):
                yield self._pyyaml_float(ctx, entry)
            elif spec.is_bool and isinstance(value, str):
                yield self._string_boolean(ctx, entry, value)
            elif spec.numeric_only and isinstance(value, str):
                yield self._string_number(ctx, entry, spec, value)
            elif spec.numeric_only and isinstance(value, bool):
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{entry.key}` must be a number but is the boolean {str(value).lower()} (counted as {int(value)})",
                    on="value",
                    severity=Severity.WARNING,
                )
            elif "int" in spec.types and "float" not in spec.types and isinstance(value, float):
                yield self._float_for_integer(ctx, entry, value)
            elif value is None and not spec.nullable and spec.default is not None:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{entry.key}` is empty (null), which {ctx.lf_label} passes on as None "
                    f"instead of using its default {spec.default!r}",
                    on="key",
                    severity=Severity.WARNING,
                )
            elif (
                spec.types in (("str",), ("null", "str"), ("str", "null"))
                and isinstance(value, (bool, int, float))
                and not (isinstance(value, float) and not node.style and self._read_as_string(ctx, node))
            ):
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{entry.key}` expects text but is {value!r} ({type(value).__name__})"
                    f"{yaml11_note(node, src.document.text[node.start : node.end], [])}; quote it",
                    on="value",
                    severity=Severity.WARNING,
                    fix=self.fix(
                        "Quote the value",
                        [edits.Edit(node.start, node.end, '"' + src.document.text[node.start : node.end] + '"')],
                        safe=True,
                    ),
                )

    @staticmethod
    def _read_as_string(ctx: Context, node) -> bool:
        """A plain float that LLaMA-Factory's YAML reader of the judged release takes for a string."""
        if not schema.reads_yaml_with_pyyaml(ctx.settings.lf_schema.version):
            return False
        return _pyyaml_string(ctx.source.document.text[node.start : node.end])

    def _pyyaml_float(self, ctx: Context, entry: Entry) -> Diagnostic:
        """`learning_rate: 1e-4` under a release that read YAML with PyYAML: the string '1e-4'."""
        node = entry.node
        text = ctx.source.document.text[node.start : node.end]
        written = _yaml11_float(text)
        edit = [edits.Edit(node.start, node.end, written)] if written else None
        fix = self.fix(f"Write `{written}`", edit, safe=True) if written else None
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.key}: {text}` is the string {text!r} to {ctx.lf_label}, which reads YAML with PyYAML (YAML "
            f"1.1: a float needs a dot and a signed exponent{f', `{written}`' if written else ''}; OmegaConf reads "
            "it as a float from 0.9.4): it passes the string on unconverted and the run crashes where it is first "
            "used",
            on="value",
            fix=fix,
        )

    def _string_number(self, ctx: Context, entry: Entry, spec: schema.FieldSpec, value: str) -> Diagnostic:
        """A number written as a string (`"1e-4"`): unquoted when it reads as the field's type."""
        node = entry.node
        number = _as_number(value.strip())
        fix = None
        if number is not None and ("float" in spec.types or isinstance(number, int)):
            text = value.strip()
            fix = self.fix(
                f"Unquote: `{text}`",
                [edits.Edit(node.start, node.end, text)] if node.style in ("'", '"') else None,
                safe=True,
            )
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.key}` must be a number but is the string {value!r}; {ctx.lf_label} "
            "passes it on unconverted and the run crashes where it is first used",
            on="value",
            fix=fix,
        )

    def _float_for_integer(self, ctx: Context, entry: Entry, value: float) -> Diagnostic:
        """A float in an int field: an error where it is no whole number, or where the code that uses it needs
        a real int and the job gets there (`integer_fields`); else a warning (converted or harmless there)."""
        from cfgopt.rules.support.integer_fields import integer_use  # here: few configs hold a float int (start-up)

        said = f"`{entry.key}` must be an integer but is the float {value!r}"
        if not value.is_integer():
            return self.at_entry(ctx, entry, said, on="value")
        fix = self.fix(f"Write `{int(value)}`", edits.replace_value(ctx.source, entry, int(value)), safe=True)
        where = integer_use(ctx, entry.key, value)
        if where is None:
            return self.at_entry(ctx, entry, said, on="value", severity=Severity.WARNING, fix=fix)
        return self.at_entry(
            ctx, entry, f"{said}, which {ctx.lf_label} passes on unconverted: {where}", on="value", fix=fix
        )

    def _command_line_value(self, ctx: Context, entry: Entry, spec: schema.FieldSpec) -> Iterator[Diagnostic]:
        """A `--key value` argparse converts before LLaMA-Factory sees it: a bad one is exit 2 at once."""
        raw = entry.node.raw
        if raw is not None:
            ok, _, error = schema.argparse_convert(spec, raw)
            if not ok:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"argparse rejects `--{entry.key} {raw}` at once (exit 2): {error}",
                    on="value",
                )

    def _container_value(self, ctx: Context, entry: Entry, spec: schema.FieldSpec) -> Diagnostic:
        """A list or mapping where the field takes a single value."""
        value = entry.node.value
        # The GaLore/APOLLO/BAdam switches are added up at start-up (finetuning_args.py L598); a number crashes
        # where it is first used (`num_train_epochs: [3]`: `math.ceil` in the Trainer's loop); both TypeError.
        # A boolean is just truthy; what other code makes of a list is not judged.
        switch = entry.key in ADDED_SWITCHES
        crashes = spec.numeric_only or switch
        if switch:
            consequence = " and its start-up check, which adds the three switches up, crashes on it (TypeError)"
        elif crashes:
            consequence = " and the run crashes where it is first used (TypeError)"
        else:
            consequence = ": a non-empty one counts as true" if spec.is_bool else ""
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.key}` must be a single {'/'.join(spec.types)} value but is a "
            f"{type(value).__name__}; {ctx.lf_label} passes it on unconverted{consequence}",
            on="value",
            severity=Severity.ERROR if crashes else Severity.WARNING,
        )

    def _string_boolean(self, ctx: Context, entry: Entry, value: str) -> Diagnostic:
        """A boolean field given a string: any non-empty string is true."""
        src = ctx.source
        low = value.strip().lower()
        meant = True if low in _TRUE_WORDS else False if low in _FALSE_WORDS else None
        crashes = _string_switch_crashes(entry.key, value, ctx.settings.lf_schema.version)
        fix = None
        if meant is not None:
            fix = self.fix(
                f"Write the boolean `{str(meant).lower()}`",
                edits.replace_value(src, entry, meant),
                safe=crashes,  # as it is the run can only crash; else it runs as `true`, which the fix may change
            )
        if crashes:
            return self.at_entry(
                ctx,
                entry,
                f"`{entry.key}` is the string {value!r}, which {ctx.lf_label} does not convert; its start-up "
                "check adds the GaLore / APOLLO / BAdam switches up and stops on it (TypeError or ValueError)",
                on="value",
                fix=fix,
            )
        return self.at_entry(
            ctx,
            entry,
            f"`{entry.key}` is the string {value!r}, which {ctx.lf_label} does not convert: "
            "any non-empty string counts as true"
            + (f", so this is silently ON although it reads `{value}`" if meant is False else ""),
            on="value",
            severity=Severity.WARNING,
            fix=fix,
        )
