"""Shared facts about LLaMA-Factory configs for the LF rules: which field table applies to a source, and
short names for the job model's answers (cfgopt.job.job) in rule bodies. The version judged is `ctx.lf_label`."""

from __future__ import annotations

import math

from cfgopt.job.job import _MISSING, group_of
from cfgopt.knowledge import schema
from cfgopt.rules.base import Context
from cfgopt.text.source import Entry, Kind, Node, Source


def fields_for(ctx: Context) -> dict[str, schema.FieldSpec]:
    return ctx.settings.lf_schema.group(group_of(ctx.source))


def top_entries(source: Source):
    return list(source.root.entries or []) if source.root is not None else []


# --------------------------------------------------------------------------- effective values
# Helpers for the cross-field rules (LF006+, PF001+), answered by the job model (cfgopt.job.job): a key absent
# from the config has its dataclass default in the selected version; a present key has the value the consumer
# sees (YAML: unconverted, so a quoted "false" is a truthy string exactly as in LLaMA-Factory; command line:
# argparse-converted).


def entry_of(ctx: Context, key: str):
    """The entry the consumer uses for a top-level key (the last one when repeated), or None."""
    root = ctx.source.root
    return root.get(key) if root is not None and root.is_mapping else None


def value_of(ctx: Context, key: str, default=_MISSING):
    """The value LLaMA-Factory works with: the config's, else the field's default (`Job.value`)."""
    return ctx.job.value(key, default)


def is_set(ctx: Context, key: str) -> bool:
    return ctx.job.is_set(key)


def on(ctx: Context, key: str) -> bool:
    """Python truthiness of the effective value, as LLaMA-Factory's `if args.key:` sees it."""
    return ctx.job.on(key)


def is_train_group(ctx: Context) -> bool:
    return group_of(ctx.source) == "train"


def training(ctx: Context) -> bool:
    """A training run: the train subcommand's arguments with `do_train` on."""
    return is_train_group(ctx) and on(ctx, "do_train")


def as_list(value) -> list:
    """`dataset`/`adapter_name_or_path`-style values: LLaMA-Factory splits strings on commas."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if v is not None and str(v).strip()]
    return [part.strip() for part in str(value).split(",") if part.strip()]


def number(value) -> float | None:
    """A value as Python arithmetic in transformers/LLaMA-Factory sees it (True is 1); None for non-numbers. An
    integer beyond the float range (a 400-digit YAML integer) is the infinity of its sign, which compares with
    every finite threshold as the integer does; NaN stays NaN (every comparison false, as in Python)."""
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return None


def deepspeed_zero3(ctx: Context) -> tuple[bool, bool]:
    """(ZeRO-3 is on, that is certain). Read from the linked DeepSpeed JSON when it was found, from an
    inline dict, else guessed from the file name (`ds_z3_config.json`, `zero3.json`): not certain."""
    import re

    value = value_of(ctx, "deepspeed")
    if not value:
        return False, True
    if ctx.deepspeed is not None and ctx.deepspeed.root is not None:
        from cfgopt.rules.support.deepspeed import zero_stage

        stage = zero_stage(ctx.deepspeed)
        return stage == 3, stage is not None
    if isinstance(value, dict):
        zero = value.get("zero_optimization")
        stage = zero.get("stage") if isinstance(zero, dict) else None
        return stage == 3, isinstance(stage, int)
    name = str(value).replace("\\", "/").rsplit("/", 1)[-1].lower()
    return bool(re.search(r"(?:^|[^a-z0-9])(?:ds_)?z(?:ero)?[_-]?(?:stage)?[_-]?3(?:[^0-9]|$)", name)), False


def distributed(ctx: Context) -> bool | None:
    """True when the run is surely multi-process (DeepSpeed, FSDP, or `--gpus` > 1), False when `--gpus 1`
    and neither is set, None when it cannot be told (LLaMA-Factory starts torchrun over every visible GPU)."""
    if on(ctx, "deepspeed") or on(ctx, "fsdp"):
        return True
    gpus = ctx.settings.gpus
    if gpus is None:
        return None
    return gpus > 1


def model_params_billion(name) -> float | None:
    """Parameter count (billions) read from a model name such as `Meta-Llama-3-8B-Instruct`, `Qwen3-0.6B`,
    `Qwen3-30B-A3B` (total, 30), `Mixtral-8x7B` (56, an upper bound); None when the name does not say."""
    import re

    if not isinstance(name, str):
        return None
    base = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    m = re.search(r"(?<![A-Za-z0-9.])(\d+)x(\d+(?:\.\d+)?)[bB](?![A-Za-z0-9])", base)
    if m:
        return float(m.group(1)) * float(m.group(2))
    sizes = re.findall(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)[bB](?![A-Za-z0-9])", base)
    if not sizes:
        return None
    return float(sizes[0])


def first_entry(ctx: Context, *keys: str):
    """The first of `keys` present in the config (where a diagnostic about them should point)."""
    for key in keys:
        entry = entry_of(ctx, key)
        if entry is not None:
            return entry
    return None


def report(rule, ctx: Context, keys: tuple[str, ...], message: str, **kwargs):
    """A diagnostic at the first of `keys` present in the config, else at the top of the file (a default
    value is the cause)."""
    entry = first_entry(ctx, *keys)
    if entry is not None:
        return rule.at_entry(ctx, entry, message, **kwargs)
    kwargs.pop("on", None)
    return rule.at_node(ctx, ctx.source.root, message, key=keys[0] if keys else "", **kwargs)


TRAIN_KINDS = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})


def read_by_argparse(source: Source, entry: Entry) -> bool:
    """Did the value go through argparse (`--key value` on a launch line without a YAML), rather than reach
    `parse_dict` unconverted (a YAML, or `key=value` after a YAML on a launch line, read by OmegaConf)?"""
    return source.kind == Kind.LF_CLI and not (entry.argument is not None and entry.argument.dotlist)


def tokens_per_micro_batch(ctx: Context) -> float | None:
    """`per_device_train_batch_size x cutoff_len`: the most tokens one micro-batch holds (all of them when
    packing), twice that for the pairwise stages (chosen and rejected: the count the memory model and MEM004
    use, `methods.PAIRED_STAGES`); None when either is no number or the product is not finite (NaN, an
    infinity, `1e300 x 1e300`: LLaMA-Factory stops on such a value before any speed matters)."""
    from cfgopt.knowledge.methods import PAIRED_STAGES

    bsz, cutoff = number(value_of(ctx, "per_device_train_batch_size")), number(value_of(ctx, "cutoff_len"))
    if bsz is None or cutoff is None:
        return None
    stage = value_of(ctx, "stage")  # any YAML value: a list or a mapping is no stage (LF002 says so)
    tokens = bsz * cutoff * (2 if isinstance(stage, str) and stage in PAIRED_STAGES else 1)
    return tokens if math.isfinite(tokens) else None


def fa2_written(ctx: Context) -> str | None:
    """The `flash_attn` value with which LLaMA-Factory requests FlashAttention-2: `fa2`, or `auto` (written or left
    as the default) on a model that soft-caps its attention (Gemma 2: model/model_utils/attention.py L46-53 turns it
    into fa2 where flash-attn is installed, eager where not); None for any other value."""
    value = value_of(ctx, "flash_attn")
    if value == "fa2":
        return "fa2"
    return "auto" if value == "auto" and ctx.job.soft_capped_attention else None


def fa2_words(written: str) -> str:
    """`fa2_written`'s value in a message: `fa2`, or `auto` with what it becomes."""
    return "`fa2`" if written == "fa2" else "`flash_attn: auto` (fa2 for Gemma 2)"


def neat_fa2_one_row(ctx: Context) -> bool:
    """Must the micro-batch stay at one row (LF019)? Neat packing with `fa2` where flash-attn is in the job's
    environment (without it `fa2` runs SDPA and nothing asserts) and a release judged asserts it (0.9.5, not 0.9.3
    or 0.9.4: `methods.neat_fa2_checked_in`), on a model that runs fa2 (not gpt-oss: `methods.fa3_kernel_model`):
    the micro-batch advice (PF007, MEM005) stays silent there."""
    from cfgopt.knowledge.methods import fa3_kernel_model, neat_fa2_checked_in

    if not (value_of(ctx, "neat_packing") and fa2_written(ctx)):
        return False
    if fa3_kernel_model(value_of(ctx, "model_name_or_path")):
        return False
    return ctx.job.has_package("flash_attn") and bool(neat_fa2_checked_in(ctx.settings.llamafactory_releases))


def checking_releases(ctx: Context, checked: tuple[str, ...]) -> str:
    """Which of the releases judged (`Settings.llamafactory_releases`) make a check that exists in some releases
    only (`checked`, not empty), as a message names them: "" where every one does (the one release selected), else
    " under LLaMA-Factory 0.9.5 (0.9.3 and 0.9.4, which requirements.txt also allows, do not check)"."""
    from cfgopt.knowledge.versions import release_spans

    judged = ctx.settings.llamafactory_releases
    if checked == judged:
        return ""
    others = [v for v in judged if v not in checked]
    rng = ctx.settings.llamafactory_range
    allows = f", which {rng.origin} also allows," if rng is not None else ""
    return f" under LLaMA-Factory {release_spans(list(checked))} ({release_spans(others)}{allows} do not check)"


def packing_on(ctx: Context) -> bool:
    """LLaMA-Factory packs (`Job.packing`)."""
    return ctx.job.packing


# Unquoted YAML 1.1 words that OmegaConf reads as booleans (`save_strategy: no` is False, not "no").
YAML11_BOOLEANS = {"yes", "no", "on", "off", "y", "n"}


def yaml11_note(node: Node, shown: str, choices: list[str]) -> str:
    """Why a plain `no`/`off`/`yes`/`on` is a boolean: said in the message where that causes the finding."""
    word = shown.strip()
    if not (isinstance(node.value, bool) and not node.style and word.lower() in YAML11_BOOLEANS):
        return ""
    quote = f'; quote it: `"{word}"`' if word in choices else ""
    return (
        f" (YAML 1.1, which LLaMA-Factory's OmegaConf follows, reads an unquoted `{word}` as the boolean "
        f"{str(node.value).lower()}{quote})"
    )


# Tokens per micro-batch at or below which a big GPU idles (PF007; MEM005 does not suggest going below it).
SMALL_TOKENS = 4096  # docs/evidence/rocm_perf.md R08: tokens per micro-batch <~ 4k leaves a big GPU idle
