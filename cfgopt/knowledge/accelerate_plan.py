"""How `accelerate launch --config_file X.yaml` runs a job, read from that config and the line's own options: the
distributed type (FSDP, plain DDP, DeepSpeed, one process), the process count, FSDP's sharding, offload and version,
and the mixed precision. Pure reading of a YAML mapping (no accelerate, no torch): the memory model
(`cfgopt.memory.sharding`) counts what each plan keeps per GPU, docs/memory.md "FSDP and DDP" says how.

Read as accelerate 1.11 reads them (`commands/launch.py` `_validate_launch_command`: a value on the line wins over
the config's, `fsdp_config.x` becomes `fsdp_x`; `utils/launch.py` `prepare_multi_gpu_env` turns them into the
`FSDP_*` variables; `utils/dataclasses.py` `FullyShardedDataParallelPlugin.__post_init__` reads those back).
"""

from __future__ import annotations

from cfgopt.knowledge.targets import MAX_GPUS
from cfgopt.text.record import Record
from cfgopt.text.user_text import integer, is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# FullyShardedDataParallelPlugin's names, in torch's ShardingStrategy order (accelerate `FSDP_SHARDING_STRATEGY`:
# an integer 1-5 in an older config is the same list's index + 1).
SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
_MULTI = frozenset({"MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU"})
_TRUE = ("true", "1", "yes", "y", "on", "t")
_FALSE = ("false", "0", "no", "n", "off", "f")


class AcceleratePlan(Record):
    kind: str  # "fsdp", "ddp", "deepspeed", "single" (one process, no wrapper), "unknown"
    processes: int | None = None  # num_processes: every machine's processes together
    machines: int = 1
    fsdp_version: int = 1
    sharding: str = "FULL_SHARD"  # one of SHARDING_STRATEGIES (FSDP2: reshard_after_forward false = SHARD_GRAD_OP)
    offload_params: bool = False  # fsdp_offload_params: parameters, gradients and the optimizer step on the host
    mixed_precision: str | None = None  # "bf16", "fp16", "fp8", "no"; None: not stated
    # fsdp_activation_checkpointing: FSDP wraps each unit in torch's checkpoint wrapper (accelerator.py)
    activation_checkpointing: bool = False
    # fsdp_cpu_ram_efficient_loading: rank 0 alone loads the weights (host memory at load; no GPU term)
    cpu_ram_efficient_loading: bool = False
    # DEEPSPEED without a `deepspeed_config_file`: (zero_stage, offload_optimizer_device, offload_param_device)
    zero: tuple[int, str, str] | None = None
    config: str = ""  # the config file as the line names it
    problem: str = ""  # why the plan is unknown

    def describe(self, gpus: int) -> str:
        """The plan in words for the summary (`FSDP FULL_SHARD (fsdp_config.yaml)`)."""
        where = f" ({self.config})" if self.config else ""
        if self.kind == "fsdp":
            version = " v2" if self.fsdp_version == 2 else ""
            offload = ", parameters offloaded" if self.offload_params else ""
            return f"FSDP{version} {self.sharding}{offload} over {gpus} GPU(s){where}"
        if self.kind == "ddp":
            return f"DDP over {gpus} GPU(s){where}"
        return f"accelerate {self.kind}{where}"


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def _count(value: Any) -> int | None:
    """A positive count as the YAML gives it (an int) or the line writes it (digits); None otherwise."""
    count = value if is_int(value) else integer(value, strip=True)
    return count if count is not None and 0 < count <= MAX_GPUS else None


def _fsdp_values(data: dict[str, Any], options: dict[str, str | None]) -> dict[str, Any]:
    """`fsdp_config`'s keys as `fsdp_x` (accelerate prefixes a bare key), the line's `--fsdp_x` over them."""
    block = data.get("fsdp_config")
    out = {}
    for key, value in block.items() if isinstance(block, dict) else ():
        key = str(key)
        out[key if key.startswith("fsdp") else f"fsdp_{key}"] = value
    for option, value in options.items():
        name = option.lstrip("-").replace("-", "_")
        if name.startswith("fsdp_") and value is not None:
            out[name] = value
    return out


def _sharding(fsdp: dict[str, Any], version: int) -> str | None:
    """FSDP1: `fsdp_sharding_strategy` (the launcher always exports it, FULL_SHARD by default, and the plugin prefers
    it to `reshard_after_forward`); FSDP2: `fsdp_reshard_after_forward` (true by default) keeps FULL_SHARD's
    memory, false keeps every gathered unit until its backward (SHARD_GRAD_OP's). None: not a value accelerate
    accepts."""
    if version == 2:
        reshard = _flag(fsdp.get("fsdp_reshard_after_forward", True))
        return None if reshard is None else ("FULL_SHARD" if reshard else "SHARD_GRAD_OP")
    strategy = fsdp.get("fsdp_sharding_strategy", "FULL_SHARD")
    text = str(strategy).strip().upper()
    if text in SHARDING_STRATEGIES:
        return text
    index = _count(text)
    return SHARDING_STRATEGIES[index - 1] if index is not None and index <= len(SHARDING_STRATEGIES) else None


def _kind(data: dict[str, Any], options: dict[str, str | None]) -> str:
    """The distributed type: a launcher flag (`--use_fsdp`, `--multi_gpu`, `--use_deepspeed`) wins over the
    config's `distributed_type`, as accelerate's launcher reads them."""
    if any(o in options for o in ("--use_fsdp", "--use-fsdp")):
        return "fsdp"
    if any(o in options for o in ("--multi_gpu", "--multi-gpu")):
        return "ddp"
    if any(o in options for o in ("--use_deepspeed", "--use-deepspeed")):
        return "deepspeed"
    kind = str(data.get("distributed_type", "NO")).strip().upper()
    if kind == "FSDP":
        return "fsdp"
    if kind in _MULTI:
        return "ddp"
    if kind == "DEEPSPEED":
        return "deepspeed"
    return "single" if kind == "NO" else "unknown"


def accelerate_plan(data: Any, options: dict[str, str | None] | None = None, config: str = "") -> AcceleratePlan:
    """The plan of an accelerate config (`data`, the YAML's mapping) under the launch line's `options` (name ->
    value text, None for a value known only at run time)."""
    options = options or {}
    if not isinstance(data, dict):
        return AcceleratePlan("unknown", config=config, problem="not a YAML mapping")
    kind = _kind(data, options)
    processes = _count(options.get("--num_processes") or options.get("--num-processes") or data.get("num_processes"))
    machines = _count(options.get("--num_machines") or options.get("--num-machines") or data.get("num_machines")) or 1
    mixed = options.get("--mixed_precision") or options.get("--mixed-precision") or data.get("mixed_precision")
    mixed_text = None if mixed is None else str(mixed).strip().lower()
    plan = AcceleratePlan(kind, processes, machines, mixed_precision=mixed_text, config=config)
    if kind == "unknown":
        return plan._replace(problem=f"distributed_type {data.get('distributed_type')!r}")
    if kind == "deepspeed":
        return plan._replace(zero=_zero_of(data, options))
    if kind != "fsdp":
        return plan
    fsdp = _fsdp_values(data, options)
    version = _count(fsdp.get("fsdp_version", 1))
    if version not in (1, 2):
        return plan._replace(kind="unknown", problem=f"fsdp_version {fsdp.get('fsdp_version')!r}")
    sharding = _sharding(fsdp, version)
    offload = _flag(fsdp.get("fsdp_offload_params", False))
    if sharding is None or offload is None:
        return plan._replace(kind="unknown", problem="an FSDP sharding or offload value accelerate does not read")
    return plan._replace(
        fsdp_version=version,
        sharding=sharding,
        offload_params=offload,
        activation_checkpointing=_flag(fsdp.get("fsdp_activation_checkpointing", False)) is True,
        cpu_ram_efficient_loading=_flag(fsdp.get("fsdp_cpu_ram_efficient_loading", False)) is True,
    )


def _zero_of(data: dict[str, Any], options: dict[str, str | None]) -> tuple[int, str, str] | None:
    """accelerate's DeepSpeed plugin without a JSON of its own: `deepspeed_config`'s `zero_stage` (2 by default),
    `offload_optimizer_device` and `offload_param_device` ("none"), the line's `--zero_stage` ... over them. None:
    a `deepspeed_config_file` (not read) or a value the plugin would not take."""
    block = data.get("deepspeed_config")
    block = block if isinstance(block, dict) else {}
    if block.get("deepspeed_config_file") or options.get("--deepspeed_config_file"):
        return None

    def value(key: str, default: Any) -> Any:
        given = options.get(f"--{key}")
        return given if given is not None else block.get(key, default)

    raw = value("zero_stage", 2)
    stage = raw if is_int(raw) else integer(raw, strip=True)
    devices = [str(value(k, "none")).strip().lower() for k in ("offload_optimizer_device", "offload_param_device")]
    if stage not in (0, 1, 2, 3) or any(d not in ("none", "cpu", "nvme") for d in devices):
        return None
    return stage, devices[0], devices[1]


def plugin_deepspeed(plan: AcceleratePlan, fp16: bool, bf16: bool) -> dict[str, Any] | None:
    """The DeepSpeed config accelerate's plugin builds from the accelerate config (accelerate 1.11
    `DeepSpeedPlugin.__post_init__`: batch sizes "auto", the ZeRO stage and offload devices; `set_mixed_precision`
    adds the Trainer's precision, `fp16` / `bf16` when set, else the config's `mixed_precision`); None where the plan
    names no such plugin."""
    if plan.kind != "deepspeed" or plan.zero is None:
        return None
    stage, optimizer_device, param_device = plan.zero
    mixed = "fp16" if fp16 else "bf16" if bf16 else (plan.mixed_precision or "no")
    return {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "zero_optimization": {
            "stage": stage,
            "offload_optimizer": {"device": optimizer_device},
            "offload_param": {"device": param_device},
        },
        "fp16": {"enabled": mixed == "fp16"},
        "bf16": {"enabled": mixed in ("bf16", "fp8")},
    }
