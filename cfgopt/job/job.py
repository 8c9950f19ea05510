"""The job model: one object per training job that answers every question about it.

A `Job` is a LLaMA-Factory config (YAML or a `llamafactory-cli` command line) with what decides how it runs:

- the values LLaMA-Factory sees (`value`): the config's, else the selected version's dataclass default;
- the DeepSpeed config it names (`deepspeed`), and that config as the HF Trainer and accelerate fill its
  "auto" values (`deepspeed_filled`);
- the hardware judged for (`hardware`): target and GPU count, from flags, the project config or the GPUs of
  this machine (`gpus.resolve_target`), saying when either is assumed;
- the versions judged (`lf_label`, `ds_label`: always the selected snapshots, never module constants);
- the environment it trains in (`environment`, `has_package`: the packages of the node, as the project states
  them or as assumed, never the machine cfgopt runs on; cfgopt.environment.stated).

Rules, `estimate`, the memory model's inputs, `fix` (through the planner), `verify` and `tune` read jobs; no
other module loads a YAML + DeepSpeed JSON pair or knows a LLaMA-Factory default. Nothing heavy is imported.
"""

from __future__ import annotations

from pathlib import Path

from cfgopt.knowledge import methods
from cfgopt.text.record import Record
from cfgopt.text.source import Kind, Source
from cfgopt.text.user_text import is_int
from cfgopt.text.writer import hard_linked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.environment import Environment
    from cfgopt.environment.stated import Fa2Outcome
    from cfgopt.job import data_location, data_profile
    from cfgopt.job.settings import Settings
    from cfgopt.knowledge import schema
    from cfgopt.knowledge.accelerate_plan import AcceleratePlan
    from cfgopt.knowledge.model_family import LocalModel
    from cfgopt.knowledge.model_shapes import ModelShape
    from cfgopt.knowledge.targets import Target
    from cfgopt.memory import estimate as memory

_MISSING = object()

# GPU counts assumed when `--gpus` is not stated: advice that spends memory must fit on one GPU (then it fits
# on any count); a warning of out-of-memory assumes a full node of 8 (ZeRO shards the most: fewer false alarms).
GPUS_IF_UNSTATED_SPEND = 1
GPUS_IF_UNSTATED_OOM = 8


# --------------------------------------------------------------------------- the values LLaMA-Factory sees


def lf_value(data: Any, key: str, lf: schema.LlamaFactorySchema, group: str = "train", default=_MISSING) -> Any:
    """A value as LLaMA-Factory works with it: the config's (unconverted, as its YAML path passes it on), else
    `default` when given, else the field's dataclass default in the selected version (None for unknown keys)."""
    if isinstance(data, dict) and key in data:
        return data[key]
    if default is not _MISSING:
        return default
    spec = lf.group(group).get(key) or lf.fields.get(key)
    return spec.default if spec is not None else None


def lf_values(data: dict[str, Any], lf: schema.LlamaFactorySchema, group: str = "train") -> dict[str, Any]:
    """Every field of the selected version with the config's value or its default, plus the config's own keys:
    the input of `cfgopt.memory.estimate`, which knows no default."""
    out = dict(_defaults(lf, group))
    out.update(data)
    return out


_DEFAULTS: dict[tuple[int, str], dict[str, Any]] = {}


def _defaults(lf: schema.LlamaFactorySchema, group: str) -> dict[str, Any]:
    """Every field's default of a subcommand, built once per snapshot (a sweep script asks for it per job and
    per memory estimate). Callers copy it."""
    key = (id(lf), group)
    if key not in _DEFAULTS:
        _DEFAULTS[key] = {name: spec.default for name, spec in lf.group(group).items()}
    return _DEFAULTS[key]


def group_of(source: Source) -> str:
    """The `llamafactory-cli` subcommand whose arguments a config holds: train, infer or eval."""
    if source.kind == Kind.LF_CLI:
        return source.command.get("group", "train")
    return "infer" if source.kind == Kind.LF_INFER else "train"


def lf_label(settings: Settings) -> str:
    """The LLaMA-Factory release judged, as messages name it (the selected snapshot, never a constant)."""
    return f"LLaMA-Factory {settings.llamafactory_version}"


def ds_label(settings: Settings) -> str:
    """The DeepSpeed release judged, as messages name it."""
    return f"DeepSpeed {settings.deepspeed_version}"


# --------------------------------------------------------------------------- hardware


class Hardware(Record):
    """The target and GPU count a job is judged for, and whether each was stated or assumed."""

    target: Target
    gpus: int
    gpus_stated: bool
    target_stated: bool = True

    def describe(self) -> str:
        if not self.target_stated:  # no target: say so, never a made-up one ("1 x unstated")
            count = f"{self.gpus} x " if self.gpus_stated else ""
            return f"{count}any GPU (no target stated: only what holds on every GPU; --target NAME)"
        return f"{self.gpus} x {self.target.name}" + ("" if self.gpus_stated else " (GPU count assumed)")


def judged_for(settings: Settings) -> str:
    """The end of `lint` / `fix` summaries: what the files were judged for and where that came from
    (`--target`, the project config file, `detected`), what was assumed, or, with no target, how many hardware
    checks were skipped and how to state one; then the environment the job trains in and where it came from."""
    return f"{_hardware_judged(settings)}; {settings.environment.describe()}"


def _hardware_judged(settings: Settings) -> str:
    if not settings.target_stated:
        return _no_target(settings)
    name = settings.target.name
    source = settings.target_source
    if settings.gpus:
        where = hardware_source(settings)
        return f"judged for {settings.gpus} x {name}" + (f" ({where})" if where else "")
    return (
        f"judged for {name}" + (f" ({source})" if source else "") + f"; GPU count not stated: advice assumes "
        f"{GPUS_IF_UNSTATED_SPEND}, out-of-memory warnings up to {GPUS_IF_UNSTATED_OOM} (--gpus)"
    )


def judged_for_run(file_settings: dict[Path, Settings], paths: list[Path], first: Settings) -> list[str]:
    """`judged_for` for a whole run, in the parts the summary prints a line each: one description when every file
    was judged alike (`judged for h100 (--target)`, `GPU count not stated: ...`, `environment: ...`), else one per
    settings group, each led by the command-line paths it covers (`fixtures/seed: no target stated ...`,
    `fixtures/clean: judged for 1 x mi300x (cfgopt.toml)`), the hardware and the environment grouped apart.
    `first`: the settings described when no file was read. Joined with "; " the parts read as one line."""
    if not file_settings:
        return [*_parts(_hardware_judged(first)), *_parts(first.environment.describe())]
    labels = _labels(list(file_settings), paths, file_settings)
    hardware = _grouped({labels[k]: _hardware_judged(s) for k, s in file_settings.items()})
    environment = _grouped({labels[k]: s.environment.describe() for k, s in file_settings.items()})
    return [*hardware, *environment]


def _parts(text: str) -> list[str]:
    """`text` split at each "; " outside parentheses and backquotes (`(--target NAME; docs/targets.md)` stays
    whole)."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == "`":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif char == ";" and depth <= 0 and not quoted and text.startswith("; ", i):
            parts.append(text[start:i])
            start = i + 2
    return [part for part in (*parts, text[start:]) if part]


def _labels(files: list[Path], paths: list[Path], file_settings: dict[Path, Settings]) -> dict[Path, str]:
    """Each file's label in a per-group summary: the command-line path it was found under when every file
    there was judged alike, else its own folder."""
    from cfgopt.text.document import display_path, real_path

    roots = [(real_path(p), p) for p in paths]

    def under(file: Path) -> Path | None:
        return next((given for root, given in roots if file == root or root in file.parents), None)

    described: dict[Path | None, set[str]] = {}
    for file in files:
        described.setdefault(under(file), set()).add(judged_for(file_settings[file]))
    labels = {}
    for file in files:
        given = under(file)
        alike = given is not None and len(described[given]) == 1
        labels[file] = display_path(given if alike and given is not None else file.parent) or "."
    return labels


def _grouped(by_label: dict[str, str]) -> list[str]:
    """`desc`'s parts when every label has the same one, else `label, label: desc` per group in first-seen order
    (a group's description whole, so that each line says whose it is)."""
    groups: dict[str, list[str]] = {}
    for label, desc in by_label.items():
        groups.setdefault(desc, [])
        if label not in groups[desc]:
            groups[desc].append(label)
    if len(groups) == 1:
        return _parts(next(iter(groups)))
    return [f"{', '.join(labels)}: {desc}" for desc, labels in groups.items()]


def judged_settings(settings: Settings) -> dict:
    """What one file was judged for (settings.Settings), as the machine formats carry it per file: the target
    (None: none), the GPU count (None: not stated), where they came from, the releases and the environment."""
    env = settings.environment
    return {
        "target": settings.target_name if settings.target_stated else None,
        "gpus": settings.gpus,
        "hardware_source": hardware_source(settings),
        "llamafactory_version": settings.llamafactory_version,
        "deepspeed_version": settings.deepspeed_version,
        "environment": env.source,
        "environment_assumed": env.assumed,
        "environment_passed_over": env.passed_over or None,  # a stated file not used, and why
    }


def files_judged(result) -> dict[str, dict]:
    """Each file the run read (engine.LintResult / fixer.FixResult), by its shown path: `judged_settings`."""
    from cfgopt.text.document import display_path

    return {display_path(path): judged_settings(s) for path, s in sorted(result.file_settings.items())}


def hardware_source(settings: Settings) -> str:
    """Where the target and GPU count came from: `detected`, `--target`, `pyproject.toml, --gpus` ("" for
    settings built by hand)."""
    sources = [settings.target_source, settings.gpus_source if settings.gpus is not None else ""]
    return ", ".join(dict.fromkeys(s for s in sources if s))


def _no_target(settings: Settings) -> str:
    from cfgopt.knowledge.targets import HARDWARE_CHECKS

    skipped = sum(1 for code in HARDWARE_CHECKS if settings.is_selected(code))
    # none selected (`--select LF001`): "0 checks skipped" would read as if the target had been judged
    checks = (
        f"{skipped} hardware check{'s' if skipped != 1 else ''} skipped" if skipped else "no hardware check selected"
    )
    source = settings.target_source
    if source:  # `--target none`, `--config target=none`, `target = "none"` in a project config
        said = {"--target": "--target none", "--config target": "--config target=none"}
        return f"no target ({said.get(source, f'target = none in {source}')}): {checks}"
    how = "--target NAME or target = in pyproject.toml"
    if settings.detected:
        return f"no target: this machine's {settings.detected} is not a known target: {checks} ({how}; docs/targets.md)"
    return f"no target stated: {checks} ({how})"


# --------------------------------------------------------------------------- the job


class Job:
    def __init__(
        self,
        source: Source,
        settings: Settings,
        deepspeed_source: Source | None = None,
        deepspeed_consumers: list[Source] | None = None,
    ) -> None:
        self.source = source
        self.settings = settings
        self.deepspeed_source = deepspeed_source  # the linked DeepSpeed JSON, when `deepspeed` names a file found
        # the configs of the run that read that JSON (a live list: the engine links them all before rules run)
        self.deepspeed_consumers = [] if deepspeed_consumers is None else deepspeed_consumers
        self.memo: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Job({self.path})"

    # -- identity and versions --------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.source.document.path

    @property
    def lf(self) -> schema.LlamaFactorySchema:
        return self.settings.lf_schema

    @property
    def lf_label(self) -> str:
        return lf_label(self.settings)

    @property
    def ds_label(self) -> str:
        return ds_label(self.settings)

    @property
    def group(self) -> str:
        return group_of(self.source)

    @property
    def data(self) -> dict[str, Any]:
        return self.source.data if isinstance(self.source.data, dict) else {}

    # -- values -----------------------------------------------------------------------------------
    def value(self, key: str, default=_MISSING) -> Any:
        return lf_value(self.data, key, self.lf, self.group, default)

    def is_set(self, key: str) -> bool:
        return key in self.data

    def on(self, key: str) -> bool:
        """Python truthiness of the value, as LLaMA-Factory's `if args.key:` sees it."""
        return bool(self.value(key))

    def values(self, **changes: Any) -> dict[str, Any]:
        """The values LLaMA-Factory sees, with `changes` applied (None: back to the default). A new dict each
        call (callers may change it), copied from one built once per job."""
        if "values" not in self.memo:
            self.memo["values"] = lf_values(self.data, self.lf, self.group)
        out = dict(self.memo["values"])
        for key, value in changes.items():
            if value is None:
                out.pop(key, None)
                default = self.lf.group(self.group).get(key)
                if default is not None:
                    out[key] = default.default
            else:
                out[key] = value
        return out

    @property
    def training(self) -> bool:
        return self.group == "train" and self.source.kind in (Kind.LF_TRAIN, Kind.LF_CLI) and self.on("do_train")

    @property
    def packing(self) -> bool:
        from cfgopt.knowledge.packing import packing_on  # here, not at import: most lints never ask (start-up)

        return packing_on(self.values())

    @property
    def liger_patches_model(self) -> bool:
        """Does `enable_liger_kernel` patch this model (its family: `model_family.liger_patches`)?"""
        from cfgopt.knowledge.model_family import liger_patches

        return liger_patches(self.value("model_name_or_path"), self.local_model)

    @property
    def soft_capped_attention(self) -> bool:
        """Does the model soft-cap its attention logits (Gemma 2: `model_family.soft_capped_attention`)? Then `fa2`
        without flash-attn runs eager attention, not SDPA, and SDPA would change what it computes."""
        from cfgopt.knowledge.model_family import soft_capped_attention

        return soft_capped_attention(self.value("model_name_or_path"), self.local_model)

    @property
    def overflows_fp16(self) -> bool:
        """Was the model trained in bf16, with activations that overflow fp16 (Qwen2 and later:
        `model_family.overflows_fp16`)? Then `fp16: true` trains nothing (LF050), and no fix or plan writes it."""
        from cfgopt.knowledge.model_family import overflows_fp16

        return overflows_fp16(self.value("model_name_or_path"), self.local_model)

    @property
    def fa2_fallback(self) -> str:
        """The `flash_attn` value `fa2` runs as without flash-attn: `disabled` (eager) for a soft-capped model, else
        `sdpa` (LLaMA-Factory leaves it to transformers: model/model_utils/attention.py L46-58, L77-82)."""
        return "disabled" if self.soft_capped_attention else "sdpa"

    def attention_run(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values` with the `flash_attn` that runs, for the memory model: `auto` on a soft-capped model is `fa2`
        (LLaMA-Factory turns it so, model/model_utils/attention.py L46-53), and `fa2` without flash-attn runs
        `fa2_fallback` (SDPA, or eager for Gemma 2): neat packing's 4D mask is then held."""
        attention = values.get("flash_attn")
        if attention == "auto" and self.soft_capped_attention:
            attention = "fa2"
        if attention == "fa2" and not self.has_package("flash_attn"):
            attention = self.fa2_fallback
        return values if attention == values.get("flash_attn") else {**values, "flash_attn": attention}

    @property
    def fa2_outcome(self) -> Fa2Outcome:
        """What `flash_attn: fa2` does in this job's environment on its target: FlashAttention-2 runs, falls back
        (`fa2_fallback`), or stops the job, with why (`cfgopt.environment.stated.fa2_outcome`): the one answer the
        speed plan ranks by and LF049 judges the YAML by."""
        from cfgopt.environment.stated import fa2_outcome

        return fa2_outcome(self.environment, self.settings.target)

    # -- DeepSpeed ----------------------------------------------------------------------------------
    @property
    def deepspeed(self) -> tuple[bool, dict[str, Any] | None]:
        """(known, the DeepSpeed config as a dict or None for no DeepSpeed). Not known: `deepspeed` names a file
        that was not found or does not parse."""
        ref = self.data.get("deepspeed")
        if not ref:
            return True, None
        if isinstance(ref, dict):
            return True, ref
        ds = self.deepspeed_source
        if ds is None or ds.error is not None or not isinstance(ds.data, dict):
            return False, None
        return True, ds.data

    @property
    def deepspeed_shared(self) -> bool:
        """Does another config of the run read this job's DeepSpeed JSON (an edit of it would change that job)? A
        JSON with other hard links counts as shared too: another config may read it under another name, and
        an edit written through one name changes them all (a 70B job's JSON, a hard link of an 8B job's)."""
        if any(c is not self.source for c in self.deepspeed_consumers):
            return True
        src = self.deepspeed_source
        return src is not None and hard_linked(src.document.path)

    def deepspeed_filled(self, gpus: int | None = None) -> dict[str, Any] | None:
        """The DeepSpeed config with the "auto" values the HF Trainer fills from the training arguments
        (transformers 5.6.0 `HfTrainerDeepSpeedConfig.trainer_config_process`): batch sizes, gradient clipping,
        precision. The ZeRO stage's "auto" (accelerate's plugin default) is left as it is."""
        _, ds = self.deepspeed
        if ds is None:
            return None
        micro = self.value("per_device_train_batch_size")
        accum = self.value("gradient_accumulation_steps")
        n = gpus or self.hardware(GPUS_IF_UNSTATED_SPEND).gpus
        fills = {
            "train_micro_batch_size_per_gpu": micro,
            "gradient_accumulation_steps": accum,
            "train_batch_size": micro * accum * n if isinstance(micro, int) and isinstance(accum, int) else None,
            "gradient_clipping": self.value("max_grad_norm"),
        }
        out = {k: (fills[k] if v == "auto" and fills.get(k) is not None else v) for k, v in ds.items()}
        for block, flag in (("bf16", "bf16"), ("fp16", "fp16")):
            section = out.get(block)
            if isinstance(section, dict) and section.get("enabled") == "auto":
                out[block] = {**section, "enabled": bool(self.value(flag))}
        return out

    @property
    def zero_stage(self) -> int | None:
        """The ZeRO stage (None: no DeepSpeed or not a literal stage)."""
        from cfgopt.knowledge.deepspeed_plan import deepspeed_plan

        _, ds = self.deepspeed
        return deepspeed_plan(ds, self.values()).stage if ds is not None else None

    @property
    def memory_deepspeed(self) -> tuple[bool, dict[str, Any] | None]:
        """The DeepSpeed config the run uses, as `deepspeed` gives it; without a `deepspeed` key, the one accelerate's
        DeepSpeed plugin builds from the accelerate config the launch line names (`distributed_type: DEEPSPEED`,
        `cfgopt.knowledge.accelerate_plan.plugin_deepspeed`). Memory only: the DeepSpeed rules judge a JSON."""
        known, ds = self.deepspeed
        plan = self.distributed
        if ds is not None or not known or plan is None:
            return known, ds
        from cfgopt.knowledge.accelerate_plan import plugin_deepspeed

        return True, plugin_deepspeed(plan, bool(self.value("fp16")), bool(self.value("bf16")))

    @property
    def distributed(self) -> AcceleratePlan | None:
        """How `accelerate launch --config_file X.yaml` runs the job (FSDP, DDP; `cfgopt.knowledge.accelerate_plan`),
        from the line that launches it (for a YAML: the one plan all its launches share); None: no such line."""
        return self.source.command.get("accelerate") if self.source.command else None

    # -- hardware and environment ------------------------------------------------------------------
    def hardware(self, unstated: int) -> Hardware:
        """The target and GPU count: `--gpus` (or the project config) first, else the count a script's launch
        states (before the count detected on this machine: `deepspeed --num_gpus 4`, `CUDA_VISIBLE_DEVICES=0,1`,
        docs/command-lines.md), else `unstated` (then the count is assumed)."""
        s = self.settings
        # this machine's GPU count says less about the job than the launch line that starts it
        stated = s.gpus is not None and s.gpus_source != "detected"
        launched = None if stated else self.source.command.get("launcher_gpus")
        if launched and launched[0] > 0:
            return Hardware(s.target, launched[0], True, s.target_stated)
        return Hardware(s.target, s.gpus or unstated, s.gpus is not None, s.target_stated)

    @property
    def environment(self) -> Environment:
        """The packages of the node the job trains on: as the project states them, else assumed (the output says
        which); never the machine cfgopt runs on (cfgopt.environment.stated)."""
        return self.settings.environment

    def has_package(self, name: str) -> bool:
        """Whether the job's environment has an optional package (`liger_kernel`, `flash_attn`, `bitsandbytes`)."""
        return self.environment.has(name)

    # -- the data -------------------------------------------------------------------------------------
    @property
    def data_location(self) -> data_location.LocalData | data_location.NotLocal | None:
        """The job's dataset names and the folder of the `dataset_info.json` listing them, with the other folders
        a run launched elsewhere reads one from (cfgopt.job.data_location); NotLocal says why none is found;
        None: no `dataset`. Looked up once per job."""
        if "data_location" not in self.memo:
            from cfgopt.job.data_location import local_data

            self.memo["data_location"] = local_data(self.value("dataset"), self.value("dataset_dir"), self.path)
        return self.memo["data_location"]

    @property
    def data_profile(self) -> data_profile.DataProfile | data_profile.NotLocal | None:
        """The training data measured where it is local (cfgopt.job.data_profile); NotLocal says why not; None: no
        `dataset`. Read once per job."""
        if "data_profile" not in self.memo:
            from cfgopt.job.data_location import LocalData

            found = self.data_location
            if isinstance(found, LocalData):  # local: only now the profile, its readers and tokenizer tables
                from cfgopt.job.data_profile import measure

                found = measure(found, self.value("model_name_or_path"), self.path)
            self.memo["data_profile"] = found
        return self.memo["data_profile"]

    def data_fill(self, values: dict[str, Any] | None = None) -> float | None:
        """The share of `cutoff_len` the longest sequence of the run reaches, measured on the job's local data:
        the memory peak without packing (packs fill `cutoff_len`). None: packing, or no profile (the estimate
        then pads every sequence to `cutoff_len`, and says so). `values`: the job's with a plan's changes."""
        from cfgopt.knowledge.packing import packing_on

        values = self.values() if values is None else values
        if packing_on(values) and methods.packing_applies(methods.stage_of(values)):
            return None
        from cfgopt.job.data_location import is_profiled

        profile, cutoff = self.data_profile, values.get("cutoff_len")
        if not is_profiled(profile) or not is_int(cutoff):
            return None
        key = f"data_fill:{cutoff}"  # the planner asks for every candidate: the profile is cut once per cutoff_len
        if key not in self.memo:
            from cfgopt.job.data_lengths import peak_fill

            self.memo[key] = peak_fill(profile, cutoff)
        return self.memo[key]

    def sequence_basis(self) -> str:
        """Where the memory estimate's sequence length comes from, in words (the output says what it assumed)."""
        from cfgopt.job.data_location import NotLocal, is_profiled

        profile = self.data_profile
        if self.packing and methods.packing_applies(methods.stage_of(self.values())):
            return "packs of cutoff_len tokens"
        if is_profiled(profile) and self.data_fill() is not None:
            return f"the longest sample of {', '.join(profile.datasets)} as measured"
        why = profile.reason if isinstance(profile, NotLocal) else "no local rows" if profile else "no `dataset`"
        return f"every sequence assumed cutoff_len long: data not profiled, {why}"

    # -- the model and its memory -------------------------------------------------------------------
    @property
    def local_model(self) -> LocalModel | None:
        """The model's folder and config.json where `model_name_or_path` is a local folder holding one (read
        once, by `cfgopt/loaders/model_config.py`; relative to this config's folder, then the current one). The
        model facts of knowledge/ (`model_family`, `model_shapes`) and the rules take it from here."""
        if "local_model" not in self.memo:
            from cfgopt.loaders.model_config import local_model

            self.memo["local_model"] = local_model(self.value("model_name_or_path"), self.path.parent)
        return self.memo["local_model"]

    @property
    def shape(self) -> ModelShape | None:
        if "shape" not in self.memo:
            from cfgopt.knowledge.model_shapes import shape_for

            name = self.value("model_name_or_path")
            self.memo["shape"] = shape_for(name, self.local_model) if isinstance(name, str) else None
        return self.memo["shape"]

    def estimate(
        self, gpus: int, deepspeed: Any = _MISSING, fill: float | None = None, **changes: Any
    ) -> memory.MemoryEstimate | None:
        """The memory estimate of this job on `gpus` GPUs (with `changes` to its keys; `deepspeed`: another
        DeepSpeed dict or None), or None where it is unsound: not a training run, unknown model, a target
        without memory, a DeepSpeed file not read, settings the model does not cover, or terms it counts only
        roughly (`rough_estimate`)."""
        est = self.rough_estimate(gpus, deepspeed, fill, **changes)
        # rules judge only what the model covers: not what it leaves out, nor what it counts only roughly (PPO)
        return None if est is None or est.approximate else est

    def rough_estimate(
        self, gpus: int, deepspeed: Any = _MISSING, fill: float | None = None, **changes: Any
    ) -> memory.MemoryEstimate | None:
        """`estimate`, also where it counts some terms only roughly (confidence "low": a mixture of experts'
        activations, PPO's rollout): its model states (`MemoryEstimate.states_gib`) are still counted exactly, which
        MEM001 judges alone. None where the estimate leaves something out or cannot be made."""
        target = self.settings.target
        if not target.memory_gib or not self.training:
            return None
        if deepspeed is _MISSING:
            known, deepspeed = self.memory_deepspeed
            if not known:
                return None
        values = self.attention_run(self.values(**changes))
        fill = self.data_fill(values) if fill is None else fill
        distributed = self.distributed
        key = f"mem:{gpus}:{fill}:{memo_text(deepspeed)}:{distributed!r}:{sorted(changes.items())!r}"
        if key in self.memo:
            return self.memo[key]
        est = None
        if self.shape is not None:
            est = _shared_estimate(values, self.shape, target, gpus, deepspeed, fill, distributed)
            if est.unmodelled or (deepspeed is not None and est.zero_stage is None):
                est = None
        self.memo[key] = est
        return est

    def estimate_gap(self, gpus: int) -> str:
        """Why the job as written has no memory estimate on `gpus` GPUs (`estimate` is None), in words; "" where it
        has one. The speed plan then keeps what spends memory as written, and says why."""
        target = self.settings.target
        if not self.training or self.estimate(gpus) is not None:
            return ""
        if not target.memory_gib:
            return f"{target.name}: no GPU memory to estimate against" if target.stated else "no target stated"
        known, deepspeed = self.memory_deepspeed
        if not known:
            return f"the DeepSpeed file {self.value('deepspeed')} was not read"
        if self.shape is None:
            return f"the size of {self.value('model_name_or_path')} is not known"
        values = self.attention_run(self.values())
        est = _shared_estimate(values, self.shape, target, gpus, deepspeed, self.data_fill(values), self.distributed)
        if est.unmodelled:
            return f"not modelled: {', '.join(est.unmodelled)}"
        if est.approximate:
            return f"counted only roughly: {', '.join(est.approximate)}"
        return "the DeepSpeed config's ZeRO stage is not known"


class _ReadKeys(dict):
    """A config dict that notes the keys read from it; iterating over it reads them all."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] | None = set()

    def __getitem__(self, key: str) -> Any:
        if self.read is not None:
            self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        if self.read is not None:
            self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if self.read is not None:
            self.read.add(key)  # type: ignore[arg-type]
        return super().__contains__(key)

    def _everything(self):
        self.read = None

    def __iter__(self):
        self._everything()
        return super().__iter__()

    def keys(self):  # type: ignore[override]
        self._everything()
        return super().keys()

    def items(self):  # type: ignore[override]
        self._everything()
        return super().items()

    def values(self):  # type: ignore[override]
        self._everything()
        return super().values()

    def copy(self) -> dict[str, Any]:
        self._everything()
        return dict(super().items())


# Estimates shared by the jobs of a run: `memory.estimate` is pure arithmetic over the config dict, so jobs that
# agree on every key it read (a sweep script's lines differ in `output_dir` and `learning_rate`) share the
# result. Keyed by model, target, GPUs, DeepSpeed and fill, then by the keys read, then by their values.
_SHARED: dict[tuple, dict[tuple[str, ...], dict[tuple[str, ...], Any]]] = {}
_SHARED_MAX = 65536


def _shared_estimate(
    values: dict[str, Any], shape: Any, target: Any, gpus: int, deepspeed: Any, fill: Any, distributed: Any = None
) -> Any:
    from cfgopt.memory import estimate as memory  # only where an estimate can be made: most lint runs never load it

    by_keys = _SHARED.setdefault((shape, id(target), gpus, memo_text(deepspeed), fill, distributed), {})
    for keys, found in by_keys.items():
        est = found.get(_signature(values, keys))
        if est is not None:
            return est
    recording = _ReadKeys(values)
    est = memory.estimate(recording, shape, target, gpus, deepspeed, fill=fill, distributed=distributed)
    if recording.read is not None and sum(len(f) for f in by_keys.values()) < _SHARED_MAX:
        keys = tuple(sorted(map(str, recording.read)))
        by_keys.setdefault(keys, {})[_signature(values, keys)] = est
    return est


def _signature(values: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, ...]:
    """The values of `keys` as exact text (type and repr: `1` and `1.0` and `True` differ)."""
    return tuple(f"{type(v).__name__}:{v!r}" for v in (values.get(k, _MISSING) for k in keys))


def memo_text(value: Any) -> str:
    """A DeepSpeed dict as a memo key: canonical JSON, else its repr where JSON cannot sort it (an inline
    `deepspeed: {1: a, b: c}` mixes int and str keys), else its identity (nested past the recursion limit)."""
    import json

    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        try:
            return repr(value)
        except (RecursionError, ValueError):
            return f"id:{id(value)}"
    except RecursionError:
        return f"id:{id(value)}"
