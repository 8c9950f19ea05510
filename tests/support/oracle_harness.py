"""The real tools' verdict on a config: LLaMA-Factory 0.9.5 / transformers 5.6.0 / DeepSpeed 0.19.8,
run in-process.

Importable helper for the oracle tests (no pytest dependency). Everything heavy is imported lazily, once per
process (`_lf()` is cached: importing llamafactory takes ~5 s).

- `lf_verdict(cfg, group, target)`: LLaMA-Factory's own `get_train_args` / `get_infer_args` (which run
  `HfArgumentParser.parse_dict(cfg, allow_extra_keys=False)` and every start-up check that needs no GPU),
  with the device probes answering for the *target* (bf16: every GPU target yes, `cpu` no; TF32: CUDA targets
  only, so `tf32: true` fails on ROCm as it does there), a simulated 1-process distributed launch (env vars +
  gloo, as `llamafactory-cli` under torchrun would give), a fresh empty working directory (so the
  `output_dir` resume check does not depend on where the tests run), and `check_version(..., mandatory=True)`
  failures for optional packages this host lacks recorded as *host issues* instead of verdicts. Then the
  enum-typed fields are checked the way model load / `run_exp` would: `flash_attn` through LLaMA-Factory's
  own `configure_attn_implementation` (so `fa3` fails as it does in 0.9.5 for non-gpt_oss models), every other
  field whose annotation is an Enum or Literal against that annotation (read from the dataclasses).
- `ds_verdict(cfg, training_args, world_size, target)`: strict `json.loads` (the HF path), DeepSpeed's
  duplicate-key load (`hjson` + `dict_raise_error_on_duplicate_keys`), "auto" filled by transformers' real
  `HfTrainerDeepSpeedConfig.trainer_config_process` / `trainer_config_finalize` (a fake model with
  hidden_size 4096, 100 training steps), accelerate's `DeepSpeedPlugin` when `training_args` is given (the HF
  path: missing `zero_optimization` is an error there), then `deepspeed.runtime.config.DeepSpeedConfig`.
- `cfgopt_errors(paths, *args)`: cfgopt's error-severity diagnostics (CLI, subprocess);
  `cfgopt_errors_inprocess` does the same through `cfgopt.lint.engine.lint_paths` (fast, for hypothesis).

Known limits (also in docs/oracle-differences.md): mismatches of `scheduler.params.total_num_steps` /
`warmup_num_steps` are not judged (the real step count is unknown before the dataset is loaded); without
`training_args` only the "auto" filling is applied, not the value cross-check (there is nothing to check
against), which is how the corpus verdicts were produced.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import json
import os
import socket
import subprocess
import sys
import tempfile
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from repo_paths import ROOT

# The real-config corpus (177 configs and the real parsers' verdicts) is the project's shared test material,
# not part of the repository: it is found beside the checkout (shared/corpus) or where CFGOPT_CORPUS says.
CORPUS = Path(os.environ.get("CFGOPT_CORPUS") or ROOT.parent / "shared" / "corpus")
CORPUS_SKIP = "needs the real-config corpus: shared/corpus beside the checkout, or CFGOPT_CORPUS=<folder>"
VERDICTS = CORPUS / "oracle-verdicts.jsonl"

# Target -> (platform, what transformers' bf16 check answers, what its TF32 check answers) on that device. The
# same facts as cfgopt/knowledge/targets.py, kept here so the oracle does not take its device model from the code under
# test (tests/oracle/test_oracle_seed.py checks the two agree). The bf16 check is `torch.cuda.is_bf16_supported()`,
# which since torch 2.3 says yes on every CUDA or ROCm GPU (emulated on V100 / T4: LF008 warns there); the TF32
# check needs CUDA and compute capability >= 8.0.
_NVIDIA = ("b200", "h200", "h100", "h100-pcie", "h800", "h20", "a100", "a100-40gb", "a800", "l40s", "l4", "a10")
_AMD = ("mi300x", "mi325x", "mi300a", "mi355x", "mi250x", "mi210")
TARGETS: dict[str, tuple[str, bool, bool]] = {
    **{name: ("rocm", True, False) for name in _AMD},
    **{name: ("cuda", True, True) for name in (*_NVIDIA, "a10g", "rtx4090", "rtx3090")},
    **{name: ("cuda", True, False) for name in ("v100", "v100-16gb", "t4")},
    "cpu": ("cpu", False, False),
}
HIDDEN_SIZE = 4096
NUM_TRAINING_STEPS = 100
# Mismatches that depend on the real number of training steps (unknown before the dataset is loaded).
UNJUDGED_MISMATCH_KEYS = ("scheduler.params.total_num_steps", "scheduler.params.warmup_num_steps")


@dataclass
class Verdict:
    ok: bool
    error: str = ""
    stage: str = ""  # where it failed: parse / enum / load / process / plugin / finalize / deepspeed
    host_issues: list[str] = field(default_factory=list)  # optional packages missing on this host

    def pair(self) -> tuple[bool, str]:
        return self.ok, self.error


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------------------------- environment


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_RANK_VARS = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def _prepare_env() -> None:
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    os.environ.setdefault("LLAMAFACTORY_VERBOSITY", "ERROR")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.pop("ALLOW_EXTRA_ARGS", None)  # it would turn every unknown key into a silent no-op
    os.environ.pop("USE_MCA", None)
    if "MASTER_PORT" not in os.environ:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))


@contextlib.contextmanager
def _launch(torchrun: bool) -> Iterator[None]:
    """torchrun=True: a 1-process torchrun launch (what `llamafactory-cli train` does with FORCE_TORCHRUN=1,
    required for DeepSpeed); gloo on this host, so ZeRO-dependent checks fire on CPU. torchrun=False: plain
    `llamafactory-cli train` on one GPU (no process group; accelerate reads these variables afresh each time
    TrainingArguments set up their devices)."""
    saved = {k: os.environ.get(k) for k in _RANK_VARS}
    if torchrun:
        os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    else:
        for k in _RANK_VARS:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@cache
def _lf() -> types.SimpleNamespace:
    """Import the real tools once per process."""
    _prepare_env()
    import warnings

    warnings.filterwarnings("ignore")
    import accelerate.utils
    import deepspeed.runtime.config as ds_config
    import deepspeed.runtime.config_utils as ds_config_utils
    import deepspeed.runtime.swap_tensor.aio_config as ds_aio
    import hjson
    import llamafactory.hparams.parser as parser
    import transformers.integrations.deepspeed as hf_ds
    import transformers.training_args as hf_ta
    from llamafactory.hparams import (
        DataArguments,
        FinetuningArguments,
        GeneratingArguments,
        ModelArguments,
    )
    from llamafactory.hparams.training_args import TrainingArguments
    from llamafactory.model.model_utils import attention
    from transformers import HfArgumentParser

    _no_shared_memory_op()
    return types.SimpleNamespace(
        accelerate_utils=accelerate.utils,
        ds_config=ds_config,
        ds_config_utils=ds_config_utils,
        ds_aio=ds_aio,
        hjson=hjson,
        hf_ds=hf_ds,
        hf_ta=hf_ta,
        HfArgumentParser=HfArgumentParser,
        parser=parser,
        attention=attention,
        ModelArguments=ModelArguments,
        DataArguments=DataArguments,
        TrainingArguments=TrainingArguments,
        FinetuningArguments=FinetuningArguments,
        GeneratingArguments=GeneratingArguments,
    )


def _no_shared_memory_op() -> None:
    """A DeepSpeed config with a 1-process torchrun launch makes TrainingArguments set up a process group; on a
    CPU, DeepSpeed's TorchBackend first JIT-compiles its shared-memory collective op (about a minute, into
    ~/.cache/torch_extensions). The verdicts never run a collective, and without the op DeepSpeed uses gloo's
    (its own fallback where the op cannot be built), so the harness skips the build."""
    import importlib

    # by name: the package's `torch` attribute is the torch library (deepspeed.comm re-exports its imports)
    backend = importlib.import_module("deepspeed.comm.torch")
    backend.build_shm_op = lambda: None


@cache
def _training_arguments_parser() -> Any:
    """One parser for every verdict: building it (one argparse option per TrainingArguments field) costs
    more than the parse, and parse_dict leaves it unchanged."""
    lf = _lf()
    return lf.HfArgumentParser([lf.TrainingArguments])


def train_arg_classes() -> list[type]:
    return list(_lf().parser._TRAIN_ARGS)


def infer_arg_classes() -> list[type]:
    return list(_lf().parser._INFER_ARGS)


@cache
def training_field_names() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(_lf().TrainingArguments) if f.init)


def lf_group(cfg: dict[str, Any]) -> str:
    """`train` when the config sets any TrainingArguments field, else `infer` (chat/export/api configs)."""
    return "train" if any(k in training_field_names() for k in cfg) else "infer"


@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def _device(target: str) -> Iterator[None]:
    """The device probes answer for the target, not for this (CPU-only) host."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (one of {sorted(TARGETS)})")
    _, bf16, tf32 = TARGETS[target]
    lf = _lf()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(lf.hf_ta, "is_torch_bf16_gpu_available", lambda: bf16))
        stack.enter_context(_patched(lf.parser, "is_torch_bf16_gpu_available", lambda: bf16))
        # transformers: TF32 needs torch.version.cuda, which is None on ROCm (and on CPU).
        stack.enter_context(_patched(lf.hf_ta, "is_torch_tf32_available", lambda: tf32))
        stack.enter_context(_patched(lf.hf_ta, "enable_tf32", lambda *_a, **_k: None))
        yield


@contextlib.contextmanager
def _host_issues_recorded(issues: list[str]) -> Iterator[None]:
    """`_check_extra_dependencies` raises ImportError for optional packages missing *here* (unsloth, jieba,
    kt-kernel, ...): a fact about this host, not about the config. Record it; the other checks still run."""
    parser = _lf().parser
    real = parser.check_version

    def check_version(requirement: str, mandatory: bool = False) -> None:
        try:
            real(requirement, mandatory=mandatory)
        except ImportError as exc:
            issues.append(f"{requirement}: {exc}".splitlines()[0])

    with _patched(parser, "check_version", check_version):
        yield


@contextlib.contextmanager
def _in_empty_dir() -> Iterator[None]:
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="oracle-cwd-") as tmp:
        os.chdir(tmp)
        try:
            yield
        finally:
            os.chdir(old)


def _reset_hf_deepspeed() -> None:
    _lf().hf_ds.unset_hf_deepspeed_config()


# --------------------------------------------------------------------------------------------- enum checks


def _choices(annotation: Any) -> list[Any] | None:
    """The allowed values of an Enum / Literal annotation (None allowed when Optional); None if the field
    takes free values (any union with str, int, ...), which the dataclass itself converts or checks."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return list(args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return list(annotation)
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in args:
            if arg is type(None):
                out.append(None)
                continue
            sub = _choices(arg)
            if sub is None:
                return None
            out.extend(sub)
        return out
    return None


def _is_member(value: Any, choices: list[Any]) -> bool:
    for choice in choices:
        if choice is None:
            if value is None:
                return True
            continue
        if isinstance(value, bool) != isinstance(choice.value if isinstance(choice, enum.Enum) else choice, bool):
            continue
        if isinstance(choice, enum.Enum):
            if value is choice or value == choice.value:
                return True
        elif value == choice and type(value) is type(choice):
            return True
    return False


# Literal/Enum fields whose out-of-choice value the consuming code lets through (LLaMA-Factory 0.9.5 /
# transformers 5.6.0, read in the code): the run goes on, so the real tool accepts the config.
PROCEEDS = {
    "export_device": "hparams/parser.py L561-567: every value but 'cpu' is device_map='auto'",
    "quantization_method": "model/model_utils/quantization.py: no branch matches, no else; loads unquantized",
    "init_special_tokens": "model/model_utils/embedding.py L145-147: falls back to noise_init",
    "quantization_device_map": "hparams/parser.py L374: only 'auto' is acted on",
    "mixture_of_depths": "model/loader.py L157/L176: neither branch, no else",
    "reward_model_type": "train/trainer_utils.py L155-170: the else (full) branch",
    "train_sampling_strategy": "transformers trainer.py L1014-1036: the else (random) branch",
    # passed unchecked to an optional package that this host does not have; not judged
    "badam_switch_mode": "badam",
    "badam_mask_mode": "badam",
    "galore_proj_type": "galore-torch",
    "apollo_proj": "apollo-torch",
    "apollo_proj_type": "apollo-torch",
    "apollo_scale_type": "apollo-torch",
    "quantization_type": "bitsandbytes",
    "sglang_lora_backend": "sglang",
    "swanlab_mode": "swanlab",
}


def _several(value: Any) -> bool:
    if value is None:
        return False
    return len(value if isinstance(value, list) else [v for v in str(value).split(",") if v.strip()]) > 1


def _read_in_this_run(name: str, objs: dict[str, Any]) -> bool:
    """Fields the code reads only in some runs (the line that raises is only reached then)."""
    args = {
        k: getattr(o, k)
        for o in objs.values()
        for k in ("stage", "use_badam", "do_train", "dataset", "eval_dataset")
        if hasattr(o, k)
    }
    if name == "pref_loss":  # train/dpo/trainer.py L195-201
        return args.get("stage") == "dpo"
    if name == "mix_strategy":  # data/data_utils.py L58-82, merge_dataset of several datasets
        return _several(args.get("dataset")) or _several(args.get("eval_dataset"))
    if name == "badam_mode":  # train/trainer_utils.py L432-470: UnboundLocalError
        return bool(args.get("use_badam"))
    if name in ("infer_dtype", "infer_backend"):  # model/patcher.py L322 / chat/chat_model.py L75
        return not args.get("do_train")
    return True


def _enum_errors(cfg: dict[str, Any], parsed: tuple[Any, ...]) -> str:
    """Enum/Literal-typed fields checked as the code that reads them would check them."""
    lf = _lf()
    objs = {type(o).__name__: o for o in parsed}
    for obj in parsed:
        hints = typing.get_type_hints(type(obj))
        for f in dataclasses.fields(obj):
            if not f.init or f.name not in cfg or f.name in PROCEEDS:
                continue
            value = getattr(obj, f.name)
            if f.name == "flash_attn":
                try:  # LLaMA-Factory's own check, on a plain (llama) model config
                    lf.attention.configure_attn_implementation(types.SimpleNamespace(model_type="llama"), obj)
                except NotImplementedError as exc:
                    return _err(exc)
                continue
            choices = _choices(hints.get(f.name, f.type))
            if choices is not None and not _is_member(value, choices) and _read_in_this_run(f.name, objs):
                allowed = ", ".join(str(c.value if isinstance(c, enum.Enum) else c) for c in choices)
                where = "Unknown task" if f.name == "stage" else "not a valid value"
                return f"ValueError: {where}: {f.name}={value!r} (allowed: {allowed})"
    return ""


@cache
def chat_templates() -> frozenset[str]:
    """LLaMA-Factory's template registry: `TEMPLATES` when importable, else the `register_template(name=...)`
    calls of the installed data/template.py (its import needs torchaudio, which a CPU host may lack)."""
    try:
        from llamafactory.data.template import TEMPLATES
    except ImportError:
        import importlib.util

        sys.path.insert(0, str(ROOT / "scripts"))
        from sync_schemas import templates_in_source

        spec = importlib.util.find_spec("llamafactory")
        assert spec is not None and spec.submodule_search_locations
        source = Path(spec.submodule_search_locations[0], "data", "template.py").read_text(encoding="utf-8")
        return frozenset(templates_in_source(source))
    return frozenset(TEMPLATES)


def _template_error(parsed: tuple[Any, ...]) -> str:
    """data/template.py L638-639, reached by every workflow once the tokenizer is loaded."""
    for obj in parsed:
        name = getattr(obj, "template", None)
        if type(obj).__name__ == "DataArguments" and name is not None and name not in chat_templates():
            return f"ValueError: Template {name} does not exist."
    return ""


# --------------------------------------------------------------------------------------------- LLaMA-Factory


def load_lf_yaml(path: str | Path) -> Any:
    """The YAML as LLaMA-Factory 0.9.5 reads it (`read_args`): OmegaConf.load + to_container, not resolved."""
    _prepare_env()
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(Path(path).absolute()))


def lf_verdict_detail(
    cfg: dict[str, Any],
    group: str = "train",
    target: str = "mi300x",
    *,
    follow_deepspeed: bool = False,
    base_dir: str | Path | None = None,
    torchrun: bool | None = None,
) -> Verdict:
    """`torchrun`: launch mode; default: torchrun exactly when the followed config uses DeepSpeed
    (LLaMA-Factory requires it then), else a plain single-GPU launch."""
    lf = _lf()
    if not isinstance(cfg, dict):
        return Verdict(False, f"TypeError: the config is a {type(cfg).__name__}, not a mapping", "parse")
    cfg = copy.deepcopy(cfg)
    ds_path: Path | None = None
    if "deepspeed" in cfg and group == "train":
        if follow_deepspeed and isinstance(cfg["deepspeed"], str):
            ref = Path(os.path.expanduser(cfg["deepspeed"]))
            ds_path = ref if ref.is_absolute() else Path(base_dir or os.getcwd()) / ref
            cfg["deepspeed"] = str(ds_path.absolute())
        elif not follow_deepspeed:
            cfg.pop("deepspeed")  # corpus mode: the `deepspeed:` key is not followed (oracle README)
    if torchrun is None:
        torchrun = ds_path is not None
    issues: list[str] = []
    _reset_hf_deepspeed()
    try:
        with _device(target), _launch(torchrun), _host_issues_recorded(issues), _in_empty_dir():
            try:
                parsed = lf.parser.get_train_args(cfg) if group == "train" else lf.parser.get_infer_args(cfg)
            except Exception as exc:  # noqa: BLE001 - whatever the real start-up raises is its verdict
                return Verdict(False, _err(exc), "parse", issues)
            enum_error = _enum_errors(cfg, parsed)
            if enum_error:
                return Verdict(False, enum_error, "enum", issues)
            template_error = _template_error(parsed)
            if template_error:
                return Verdict(False, template_error, "template", issues)
    finally:
        _reset_hf_deepspeed()
    if ds_path is not None:
        ds = ds_verdict_detail(ds_path, training_args=cfg, world_size=1, target=target)
        if not ds.ok:
            return Verdict(False, ds.error, f"deepspeed/{ds.stage}", issues)
    return Verdict(True, "", "", issues)


def lf_verdict(
    cfg: dict[str, Any],
    group: str = "train",
    target: str = "mi300x",
    *,
    follow_deepspeed: bool = False,
    base_dir: str | Path | None = None,
) -> tuple[bool, str]:
    """(ok, error) for a LLaMA-Factory config dict (as OmegaConf gives it)."""
    return lf_verdict_detail(cfg, group, target, follow_deepspeed=follow_deepspeed, base_dir=base_dir).pair()


def parse_cli(
    argv: list[str],
    group: str = "train",
    target: str = "mi300x",
    *,
    cwd: str | Path | None = None,
    torchrun: bool | None = None,
) -> tuple[tuple[Any, ...], list[str]]:
    """LLaMA-Factory's command-line path (`llamafactory-cli train --k v ...`): argparse over the dataclasses,
    run from `cwd` (a `--deepspeed` path is relative to it). Raises SystemExit(2) on an argparse error, as the
    real CLI exits, and whatever TrainingArguments raise."""
    lf = _lf()
    classes = train_arg_classes() if group == "train" else infer_arg_classes()
    parser = lf.HfArgumentParser(classes)
    if torchrun is None:
        torchrun = any(a == "--deepspeed" or a.startswith("--deepspeed=") for a in argv)
    old = os.getcwd()
    _reset_hf_deepspeed()
    try:
        with _device(target), _launch(torchrun):
            if cwd is not None:
                os.chdir(cwd)
            *parsed, remaining = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    finally:
        os.chdir(old)
        _reset_hf_deepspeed()
    return tuple(parsed), list(remaining)


def flash_attn_error(model_args: Any) -> str:
    """'' when `model_args.flash_attn` passes LLaMA-Factory's model-load check."""
    try:
        _lf().attention.configure_attn_implementation(types.SimpleNamespace(model_type="llama"), model_args)
    except NotImplementedError as exc:
        return _err(exc)
    return ""


# --------------------------------------------------------------------------------------------- DeepSpeed


class _ArgsView:
    """A real TrainingArguments seen with another world size (trainer_config_process reads `world_size`)."""

    def __init__(self, args: Any, world_size: int) -> None:
        self._args = args
        self.world_size = world_size

    def __getattr__(self, name: str) -> Any:
        return getattr(self._args, name)


def _training_arguments(training_args: dict[str, Any] | None, target: str) -> Any:
    """A real (LLaMA-Factory) TrainingArguments from the config's TrainingArguments keys, built as parse_dict
    builds it (no conversion), without `deepspeed` (that is the file being judged)."""
    names = training_field_names()
    values = {k: copy.deepcopy(v) for k, v in (training_args or {}).items() if k in names and k != "deepspeed"}
    values.setdefault("output_dir", "oracle-output")
    with _device(target), _launch(False), _in_empty_dir():
        (args,) = _training_arguments_parser().parse_dict(values, allow_extra_keys=True)
    return args


@contextlib.contextmanager
def _ds_world(world_size: int, target: str) -> Iterator[None]:
    """DeepSpeedConfig asks deepspeed.comm for rank and world size; GDS asks the accelerator's name.
    World size 1 is DeepSpeedConfig with no process group (its `except` branch: rank 0, world 1, whatever
    `sequence_parallel_size` says), as the corpus verdicts were produced; otherwise rank 0 of `world_size`."""
    lf = _lf()
    platform, _, _ = TARGETS[target]

    def no_group(*_a: Any, **_k: Any) -> int:
        raise RuntimeError("no process group")

    dist = types.SimpleNamespace(get_rank=lambda *_a, **_k: 0, get_world_size=lambda *_a, **_k: world_size)
    if world_size == 1:
        dist = types.SimpleNamespace(get_rank=no_group, get_world_size=no_group)
    real_accel = lf.ds_aio.get_accelerator()
    accel = types.SimpleNamespace(device_name=lambda *_a: "cuda" if platform == "cuda" else real_accel.device_name())
    with _patched(lf.ds_config, "dist", dist), _patched(lf.ds_aio, "get_accelerator", lambda: accel):
        yield


class _FakeModel:
    def __init__(self) -> None:
        self.config = types.SimpleNamespace(hidden_size=HIDDEN_SIZE)


def load_ds_text(text: str) -> Any:
    """The DeepSpeed JSON as the HF path reads it (strict json), after DeepSpeed's duplicate-key check.
    Raises what either loader raises."""
    lf = _lf()
    data = json.loads(text)  # HF / accelerate: json.load -> comments, trailing commas, BOM are errors
    lf.hjson.loads(text, object_pairs_hook=lf.ds_config_utils.dict_raise_error_on_duplicate_keys)
    return data


def ds_verdict_detail(
    cfg: str | bytes | Path | dict[str, Any],
    training_args: dict[str, Any] | None = None,
    world_size: int = 1,
    target: str = "mi300x",
    *,
    cross_check: bool | None = None,
    build_scheduler: bool = False,
) -> Verdict:
    """`cross_check` (default: whether `training_args` is given): the HF path in full, i.e. explicit values
    must match TrainingArguments and accelerate's DeepSpeedPlugin is built. Without it `training_args` (or
    the TrainingArguments defaults) only fill the "auto" values, as for the corpus verdicts.
    `build_scheduler`: then build the filled `scheduler` block's class of DeepSpeed's lr_schedules, as
    `deepspeed.initialize` does (`_scheduler_from_config`), on a CPU optimizer (its constructor checks)."""
    lf = _lf()
    if cross_check is None:
        cross_check = training_args is not None
    if isinstance(cfg, Path):
        try:
            cfg = cfg.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return Verdict(False, _err(exc), "load")
    if isinstance(cfg, bytes):
        try:
            cfg = cfg.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Verdict(False, _err(exc), "load")
    if isinstance(cfg, str):
        try:
            data = load_ds_text(cfg)
        except Exception as exc:  # noqa: BLE001 - JSONDecodeError, hjson errors, duplicate keys
            return Verdict(False, _err(exc), "load")
    else:
        data = copy.deepcopy(cfg)
    if not isinstance(data, dict):
        return Verdict(False, f"TypeError: a DeepSpeed config must be an object, not {type(data).__name__}", "load")

    _reset_hf_deepspeed()
    try:
        try:
            args = _training_arguments(training_args, target)
        except Exception as exc:  # noqa: BLE001 - the training config itself is refused
            return Verdict(False, f"TrainingArguments: {_err(exc)}", "process")
        view = _ArgsView(args, world_size)
        try:
            hf = lf.hf_ds.HfTrainerDeepSpeedConfig(data)
            hf.trainer_config_process(view, auto_find_batch_size=bool(getattr(args, "auto_find_batch_size", False)))
        except Exception as exc:  # noqa: BLE001
            return Verdict(False, _err(exc), "process")
        if cross_check:
            try:  # TrainingArguments.__post_init__ builds the plugin right after processing
                lf.accelerate_utils.DeepSpeedPlugin(hf_ds_config=hf)
            except Exception as exc:  # noqa: BLE001
                return Verdict(False, _err(exc), "plugin")
        else:
            hf.mismatches = []  # nothing to compare explicit values with: only "auto" is filled
        try:
            hf.trainer_config_finalize(view, _FakeModel(), NUM_TRAINING_STEPS)
        except ValueError as exc:
            judged = [m for m in hf.mismatches if not any(f"ds {k}=" in m for k in UNJUDGED_MISMATCH_KEYS)]
            if judged or "mismatch" not in str(exc):
                return Verdict(
                    False,
                    _err(exc)
                    if not judged
                    else "ValueError: DeepSpeed config values mismatch TrainingArguments values:\n" + "\n".join(judged),
                    "finalize",
                )
        except Exception as exc:  # noqa: BLE001
            return Verdict(False, _err(exc), "finalize")
        filled = hf.config
    finally:
        _reset_hf_deepspeed()
    try:
        with _ds_world(world_size, target):
            lf.ds_config.DeepSpeedConfig(filled)
    except Exception as exc:  # noqa: BLE001 - pydantic ValidationError, AssertionError, DeepSpeedConfigError
        return Verdict(False, _err(exc), "deepspeed")
    if build_scheduler:
        return _scheduler_verdict(filled)
    return Verdict(True)


def _scheduler_verdict(filled: dict[str, Any]) -> Verdict:
    """DeepSpeed's own scheduler class built from the filled block (`Class(optimizer, **params)`, engine.py
    `_scheduler_from_config`); a type that is not one of DeepSpeed's is left alone (torch's, or a typo DS025
    cites)."""
    import torch
    from deepspeed.runtime import lr_schedules

    block = filled.get("scheduler")
    kind = block.get("type") if isinstance(block, dict) else None
    scheduler = getattr(lr_schedules, kind, None) if isinstance(kind, str) else None
    if not isinstance(scheduler, type):
        return Verdict(True)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    try:
        scheduler(optimizer, **(block.get("params") or {}))
    except Exception as exc:  # noqa: BLE001 - TypeError (an argument left out or unknown), ValueError
        return Verdict(False, _err(exc), "scheduler")
    return Verdict(True)


def ds_verdict(
    cfg_text_or_dict: str | bytes | Path | dict[str, Any],
    training_args: dict[str, Any] | None = None,
    world_size: int = 1,
    target: str = "mi300x",
) -> tuple[bool, str]:
    """(ok, error) for a DeepSpeed config (JSON text, a Path, or an already-parsed dict)."""
    return ds_verdict_detail(cfg_text_or_dict, training_args, world_size, target).pair()


# --------------------------------------------------------------------------------------------- cfgopt


def cfgopt_lint_json(paths: list[str | Path], *args: str, cwd: str | Path | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "cfgopt", "lint", "--format", "json", *args, *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    if proc.returncode not in (0, 1, 2) or not proc.stdout.strip():
        raise RuntimeError(f"cfgopt lint failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def cfgopt_errors(paths: list[str | Path], *args: str, cwd: str | Path | None = None) -> list[dict[str, Any]]:
    """cfgopt's error-severity diagnostics for `paths` (`cfgopt lint --format json ARGS PATHS`)."""
    report = cfgopt_lint_json(paths, *args, cwd=cwd)
    return [d for d in report["diagnostics"] if d["severity"] == "error"]


def cfgopt_errors_inprocess(
    paths: list[str | Path], target: str = "mi300x", gpus: int | None = None
) -> list[dict[str, Any]]:
    """Same, through the engine API (no subprocess): for property tests that lint thousands of files.
    Files cfgopt could not read at all count as errors too (exit code 2 in the CLI)."""
    from cfgopt.job.settings import Settings
    from cfgopt.lint.engine import lint_paths

    result = lint_paths([Path(p) for p in paths], Settings(target_name=target, gpus=gpus))
    out = [d.to_json() for d in result.diagnostics if str(d.severity) == "error"]
    out += [
        {"file": str(p.path), "code": "PROBLEM", "severity": "error", "message": p.message, "key": ""}
        for p in result.problems
    ]
    return out


def fmt_diags(diags: list[dict[str, Any]]) -> str:
    return "; ".join(f"{d['code']} {d.get('key', '')}: {d['message'][:160]}" for d in diags) or "(none)"


# --------------------------------------------------------------------------------------------- corpus


def corpus_verdicts() -> list[dict[str, Any]]:
    return [json.loads(line) for line in VERDICTS.read_text(encoding="utf-8").splitlines() if line.strip()]


def corpus_verdict(record: dict[str, Any], target: str = "mi300x") -> Verdict:
    """The harness's verdict for one line of oracle-verdicts.jsonl, judged as that file's README says."""
    path = CORPUS / record["file"]
    if record["kind"] == "deepspeed":
        return ds_verdict_detail(path, target=target)
    try:
        cfg = load_lf_yaml(path)
    except Exception as exc:  # noqa: BLE001 - OmegaConf refuses the YAML
        return Verdict(False, _err(exc), "load")
    if not isinstance(cfg, dict):
        return Verdict(False, "not a mapping", "load")
    return lf_verdict_detail(cfg, lf_group(cfg), target)
