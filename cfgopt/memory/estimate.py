"""Peak GPU memory of a LLaMA-Factory 0.9.5 training run, per GPU, with a breakdown.

`estimate(config, shape, target, gpus, deepspeed)` returns a `MemoryEstimate` (`cfgopt.memory.result`): a list of
`Component` records (name, GiB, how it was counted, the phases it lives in, source) whose states plus largest phase
are the allocated peak, then an allocator margin and the runtime's own memory. It reads the micro-batch
(`cfgopt.memory.batch`) and what the method trains (`cfgopt.memory.method`), asks each concern for its part - the
model states (`cfgopt.memory.states`: weights, gradients, optimizer states, partitioned by ZeRO stage and GPU count,
minus what is offloaded), the activations, logits and eager scores (`cfgopt.memory.activations`), masks, buffers and
ZeRO-3's step moments (`cfgopt.memory.buffers`), what a training stage or method adds (`cfgopt.memory.stages`:
reference model, PPO's models and rollout, DoRA, by the rules of `cfgopt.knowledge.methods`) - puts them in the
table's order with their phases, and says what it does not model or no measured run covers (the confidence). The
record and the phases are `cfgopt.memory.base`'s. `max_micro_batch(...)` is the largest
`per_device_train_batch_size` that fits with headroom. The formulas, their sources and the calibration are in
docs/memory.md, which names each module's constants.

Pure arithmetic over the config dict (the values LLaMA-Factory sees, every default filled in by the job model:
`cfgopt.job.job.Job.values` / `lf_values`), a `ModelShape` and a `Target`: nothing heavy is imported, so the lint
path can use it.
"""

from __future__ import annotations

from cfgopt.knowledge import methods
from cfgopt.knowledge.accelerate_plan import AcceleratePlan
from cfgopt.knowledge.deepspeed_plan import DeepSpeedPlan, deepspeed_plan
from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.knowledge.targets import MAX_GPUS, Target
from cfgopt.memory import stages as memory_stages
from cfgopt.memory.activations import (
    GC_BOUNDARY_BYTES,
    Activity,
    activation_bytes,
    attention_scores_bytes,
    logits_bytes,
)
from cfgopt.memory.base import GIB, HOST, PHASES, STATES, Component
from cfgopt.memory.batch import DEFAULT_FILL, Batch, batch_of, unusable_sizes
from cfgopt.memory.buffers import autocast_copies, engine_fp16, held_buffers, zero3_buffers
from cfgopt.memory.config_values import attention_of, get, gradient_checkpointing_on, short_repr
from cfgopt.memory.method import Method, largest_trainable, method_of
from cfgopt.memory.model_parts import model_caveats
from cfgopt.memory.result import HEADROOM, MemoryEstimate
from cfgopt.memory.sharding import ddp_buckets, fsdp_buffers, fsdp_states, mixed_precision
from cfgopt.memory.states import States, late_embedding_gradient, model_states, quantization_bits
from cfgopt.text.record import Record
from cfgopt.text.user_text import is_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_FILL",
    "GIB",
    "HEADROOM",
    "HOST",
    "PHASES",
    "STATES",
    "Component",
    "MemoryEstimate",
    "estimate",
    "max_micro_batch",
    "unusable_sizes",
]

# Settings the model does not cover: an estimate is still printed, but rules stay silent.
_UNMODELLED = {
    "use_galore": "GaLore",
    "use_apollo": "APOLLO",
    "use_badam": "BAdam",
    "use_unsloth": "Unsloth",
    "use_llama_pro": "LLaMA Pro",
    "fsdp": "FSDP",
    "mixture_of_depths": "mixture of depths",
}
# Architectures with measured runs (bench/memory/results.md); others are counted as a Llama-like decoder.
CALIBRATED_FAMILIES = {
    "llama": "Llama 3",
    "qwen2": "Qwen2.5",
    "qwen3": "Qwen3",
    "gemma2": "Gemma 2",
    "mistral": "Mistral",
}


def _attention_implementation(config: dict[str, Any], shape: ModelShape, notes: list[str]) -> str:
    attention = attention_of(config)
    if shape.model_type == "gemma2" and get(config, "flash_attn") == "auto":
        # LLaMA-Factory switches Gemma 2 to fa2 when flash-attn is installed, else to eager
        # (model/model_utils/attention.py); which one cannot be read from the config.
        notes.append("Gemma 2 with flash_attn auto: eager unless flash-attn is installed (counted as eager)")
        return "eager"
    return attention


def _unmodelled_features(config: dict[str, Any]) -> list[str]:
    """Features set in the config that the estimate does not model (listed in its confidence)."""
    unmodelled = [label for key, label in _UNMODELLED.items() if get(config, key) not in (None, False, "", [], {})]
    attention = get(config, "flash_attn")
    if attention is not None and not isinstance(attention, str):
        unmodelled.append(f"flash_attn {short_repr(attention)} (not one of its choices)")
    return unmodelled


def estimate(
    config: dict[str, Any],
    shape: ModelShape,
    target: Target,
    gpus: int,
    deepspeed: dict[str, Any] | None,
    *,
    fill: float | None = None,
    distributed: AcceleratePlan | None = None,
) -> MemoryEstimate:
    """Peak memory per GPU of the training run `config` (a LLaMA-Factory config as a dict) on `gpus` GPUs of
    `target`, with the DeepSpeed JSON `deepspeed` (a dict) or None. `fill`: the share of `cutoff_len` the peak
    micro-batch's sequences reach without packing (default 1.0: the longest batch is padded to cutoff_len).
    `distributed`: the accelerate config the launch line names (FSDP, DDP; `cfgopt.memory.sharding`), or None."""
    notes: list[str] = []
    unmodelled = _unmodelled_features(config)
    gpus = max(1, int(gpus or 1))
    if gpus > MAX_GPUS:
        unmodelled.append(f"{gpus} GPUs (the model counts up to {MAX_GPUS})")
        gpus = MAX_GPUS
    batch = batch_of(config, fill, unmodelled, notes)
    stage, ftype, bsz, accum = batch.stage, batch.ftype, batch.micro_batch, batch.accumulation
    packing, fill_used, seq, seqs, tokens = batch.packing, batch.fill, batch.seq, batch.seqs, batch.tokens
    gc = gradient_checkpointing_on(config)
    attention = _attention_implementation(config, shape, notes)
    liger = bool(get(config, "enable_liger_kernel"))
    fused_loss = liger and methods.liger_fuses_loss(stage)  # rm/dpo/kto/ppo: Liger without its fused loss
    bits = quantization_bits(config) if ftype in ("lora", "oft") else None
    run = _run_of(config, deepspeed, distributed, bits, gpus, gc, unmodelled, notes)
    plan, zero, half, cast = run.deepspeed, run.deepspeed.stage, run.half, run.cast
    method = method_of(config, shape, ftype, notes)
    states = _states(shape, method, ftype, run, config, gpus, bits, unmodelled, notes)
    L = shape.num_hidden_layers
    per_layer, activations, recompute = activation_bytes(
        config, shape, method, ftype, cast, tokens, gc, liger, half, fused_loss
    )
    logits = logits_bytes(shape, tokens, fused_loss, method.lm_head_trained, cast, stage)
    attention_bytes = attention_scores_bytes(shape, attention, seqs, seq, 0 if gc else (L - method.first_active), notes)
    trainable = min(method.trainable, shape.num_parameters)
    buffers = held_buffers(shape, config, plan, gpus, states.gradients, batch, attention, notes)
    buffers += zero3_buffers(config, deepspeed, plan, gpus, trainable, largest_trainable(shape, method, ftype))
    approximate = model_caveats(config, shape, ftype, bits, notes)  # a mixture of experts: "low"
    buffers += _stage_components(config, shape, batch, method, gpus, gc, plan, notes, approximate)
    casts = autocast_copies(config, ftype, cast, gc, half, batch, trainable)
    buffers += casts
    buffers += _launch_buffers(shape, method, run, config, batch, gpus, states)
    late = late_embedding_gradient(shape, ftype, method, states, batch)
    uncalibrated = _uncalibrated(config, shape, target, gpus, ftype, stage, plan, bits, attention, half)
    uncalibrated += _narrowly_measured(config, deepspeed, zero, casts)
    uncalibrated += _launch_uncalibrated(run.launch, distributed, stage, gpus)
    activity = Activity(per_layer, activations, recompute, logits, attention_bytes)
    return MemoryEstimate(
        model=shape.name,
        finetuning_type=ftype,
        stage=stage,
        gpus=gpus,
        zero_stage=zero,
        micro_batch=bsz,
        gradient_accumulation=accum,
        seq_len=seq,
        tokens=tokens,
        packing=packing,
        fill=fill_used,
        gradient_checkpointing=gc,
        attention=attention,
        liger=liger,
        quantization_bit=bits,
        total_params=shape.num_parameters,
        trainable_params=trainable,
        components=_components(
            shape, batch, states, activity, buffers, gc=gc, liger=fused_loss, attention=attention, late_embedding=late
        ),
        layer_bytes_per_token=per_layer,
        layer_bytes_per_token_gc=GC_BOUNDARY_BYTES * shape.hidden_size,
        memory_gib=float(target.memory_gib),
        notes=notes,
        unmodelled=unmodelled,
        uncalibrated=uncalibrated,
        approximate=approximate,
    )


class _Run(Record):
    """How the run is spread and cast: its DeepSpeed plan, the accelerate launch counted ("fsdp", "ddp" or None)
    and its FSDP plan, whether it trains in 16 bits, and the ZeRO stage whose arithmetic the activations follow
    (FSDP's mixed precision casts the module's parameters to 16 bits as the DeepSpeed engine does: stage 0's
    arithmetic for the activations, the lm_head's gradient and autocast's copies)."""

    deepspeed: DeepSpeedPlan
    launch: str | None
    fsdp: AcceleratePlan | None
    half: bool
    cast: int | None


def _run_of(
    config: dict[str, Any],
    deepspeed: dict[str, Any] | None,
    distributed: AcceleratePlan | None,
    bits: int | None,
    gpus: int,
    gc: bool,
    unmodelled: list[str],
    notes: list[str],
) -> _Run:
    plan = deepspeed_plan(deepspeed, config)
    if not plan.known:
        unmodelled.append("DeepSpeed ZeRO stage not a literal 0-3")
    half = bool(get(config, "pure_bf16")) or bool(get(config, "bf16")) or bool(get(config, "fp16"))
    launch = _launch_kind(distributed, deepspeed, bits, gpus, unmodelled, notes)
    fsdp = distributed if launch == "fsdp" else None
    if fsdp is None:
        return _Run(plan, launch, None, half, plan.stage)
    if fsdp.activation_checkpointing and not gc:
        unmodelled.append("FSDP's activation checkpointing (fsdp_activation_checkpointing) without LLaMA-Factory's")
    half = mixed_precision(fsdp, config) != "no"
    return _Run(plan, launch, fsdp, half, 0 if half else plan.stage)


def _states(
    shape: ModelShape,
    method: Method,
    ftype: str,
    run: _Run,
    config: dict[str, Any],
    gpus: int,
    bits: int | None,
    unmodelled: list[str],
    notes: list[str],
) -> States:
    """The model states: sharded by FSDP where the accelerate config says so, else by ZeRO (or whole)."""
    if run.fsdp is not None:
        return fsdp_states(shape, method, ftype, run.fsdp, config, gpus, unmodelled, notes)
    return model_states(shape, method, ftype, run.deepspeed, config, gpus, bits, unmodelled, notes)


def _launch_buffers(
    shape: ModelShape, method: Method, run: _Run, config: dict[str, Any], batch: Batch, gpus: int, states: States
) -> list[Component]:
    """FSDP's gathered units and `no_sync` gradients, or DDP's gradient buckets (`cfgopt.memory.sharding`)."""
    if run.fsdp is not None:
        return fsdp_buffers(shape, method, run.fsdp, config, batch, gpus)
    return ddp_buckets(config, states, gpus) if run.launch == "ddp" else []


def _launch_kind(
    distributed: AcceleratePlan | None,
    deepspeed: dict[str, Any] | None,
    bits: int | None,
    gpus: int,
    unmodelled: list[str],
    notes: list[str],
) -> str | None:
    """What the accelerate config changes in the count: "fsdp", "ddp" (plain DDP over more than one GPU), or None
    (one process, or DeepSpeed: the JSON the Trainer's `deepspeed` names is what runs). What the model does not
    cover goes to `unmodelled`; the plan judged is named in the notes."""
    if distributed is None or distributed.kind == "single":
        return None
    where = f" ({distributed.config})" if distributed.config else ""
    if distributed.kind == "unknown":
        unmodelled.append(f"accelerate config{where} not read: {distributed.problem}")
        return None
    if distributed.kind == "deepspeed":
        if deepspeed is None:
            unmodelled.append(f"accelerate's DeepSpeed plugin{where} with a deepspeed_config_file (not read)")
        return None
    if deepspeed is not None:
        unmodelled.append(f"{distributed.kind.upper()}{where} with a DeepSpeed JSON")
        return None
    if distributed.kind == "fsdp" and bits:
        unmodelled.append(f"a {bits}-bit base under FSDP")
        return None
    notes.append(f"launched with {distributed.describe(gpus)}")
    return distributed.kind if distributed.kind == "fsdp" or gpus > 1 else None


def _launch_uncalibrated(launch: str | None, distributed: AcceleratePlan | None, stage: str, gpus: int) -> list[str]:
    """FSDP and DDP are read from the code: no measured run covers them."""
    if launch == "fsdp" and distributed is not None:
        out = [f"FSDP {distributed.sharding} (read from accelerate's and torch's code, not measured)"]
        if stage not in ("sft", "pt"):
            out.append(f"stage {stage} under FSDP (a reference or reward model counted unsharded)")
        return out
    if launch == "ddp" and gpus > 1:
        return ["DDP's gradient buckets (read from torch's code, not measured)"]
    return []


def _stage_components(
    config: dict[str, Any],
    shape: ModelShape,
    batch: Batch,
    method: Method,
    gpus: int,
    gc: bool,
    plan: DeepSpeedPlan,
    notes: list[str],
    approximate: list[str],
) -> list[Component]:
    """What the stage and method add (cfgopt/memory/stages.py): the reference model and its logits, PPO's value
    head, reward model and rollout, DoRA's weight norm."""
    if batch.stage in methods.PAIRED_STAGES:
        notes.append(f"stage {batch.stage}: two sequences per sample (chosen + rejected) in each micro-batch")
    if batch.stage == "kto":
        notes.append("stage kto: one sequence per sample through the graph, its KL sequence without gradients")
    if get(config, "enable_liger_kernel") and not methods.liger_fuses_loss(batch.stage):
        notes.append(f"stage {batch.stage}: Liger without its fused cross-entropy (LLaMA-Factory keeps the logits)")
    adapter, zero = (method.trainable if batch.ftype == "lora" else 0), plan.stage
    offload = plan.offload_param and zero == 3
    run = memory_stages.StageRun(
        batch.stage, batch.ftype, batch.micro_batch, batch.seq, zero, gpus, gc, adapter, offload
    )
    out = memory_stages.reference_components(config, shape, run, notes, approximate)
    out += memory_stages.ppo_components(config, shape, run, notes, approximate)
    if method.dora_norm:
        out.append(memory_stages.dora_norm_component(method.dora_norm, gc))
    return out


def _components(
    shape: ModelShape,
    batch: Batch,
    states: States,
    activity: Activity,
    buffers: list[Component],
    *,
    gc: bool,
    liger: bool,
    attention: str,
    late_embedding: float = 0.0,
) -> list[Component]:
    """The estimate's parts in the table's order, each with the phases it lives in (docs/memory.md, "Phases"):
    the model states throughout; full/freeze gradients from the backward to the step (and through the next
    micro-batch's loss when accumulation holds them without DeepSpeed); the saved activations at the loss (and,
    with checkpointing, the boundaries through the backward beside one recomputed layer); the logits at the loss;
    eager's scores at the loss without checkpointing, in the backward with it; ZeRO's step buffers at the step.
    `buffers` come with their own phases (masks and ZeRO buffers held throughout, ZeRO-3's step moments);
    `late_embedding`, the input embedding's gradient where the backward makes it last, only at the step."""
    grads_phases: tuple[str, ...] = (STATES,)
    if states.gradients_transient:
        held = batch.accumulation > 1 and states.zero is None and not states.sharded_gradients
        grads_phases = (("loss",) if held else ()) + ("backward", "step")
        if states.sharded_gradients and batch.accumulation > 1:
            # FSDP: the last micro-batch's backward turns the `no_sync` gradients into shards, one unit at a time;
            # at its start the unsharded ones are all there and no shard yet (`memory.sharding.fsdp_buffers`)
            grads_phases = ("step",)
    trainable = states.trainable
    activations = (
        f"{GC_BOUNDARY_BYTES * shape.hidden_size:,.0f} B/token/layer kept (GC on)"
        if gc
        else f"{activity.per_layer:,.0f} B/token/layer (GC off)"
    )
    out = [
        Component("weights", states.weights / GIB, f"{shape.num_parameters / 1e9:.2f}B parameters", (STATES,)),
        Component(
            "gradients",
            (states.gradients - late_embedding) / GIB,
            f"{trainable / 1e6:,.1f}M trainable" + (", backward to step" if states.gradients_transient else ""),
            grads_phases,
        ),
        Component("optimizer states", states.optimizer / GIB, "incl. fp32 master copy where kept", (STATES,)),
        Component("activations", activity.activations / GIB, activations, ("loss", "backward") if gc else ("loss",)),
        Component("recompute + backward", activity.recompute / GIB, "one layer (GC)" if gc else "-", ("backward",)),
        Component(
            "logits / loss", activity.logits / GIB, "fused (Liger)" if liger else "vocab x tokens, fp32", ("loss",)
        ),
        Component("attention scores", activity.attention / GIB, attention, ("backward",) if gc else ("loss",)),
        *buffers,
        Component(
            "optimizer step buffers",
            states.step / GIB,
            "ZeRO gradient partitions" if states.step else "-",
            ("step",),
        ),
    ]
    if late_embedding:
        out.insert(2, Component("embedding gradient", late_embedding / GIB, "made last in the backward", ("step",)))
    if states.offloaded:
        out.append(Component("offloaded (host)", states.offloaded / GIB, "not on the GPU", (HOST,)))
    return out


def _narrowly_measured(
    config: dict[str, Any], deepspeed: dict[str, Any] | None, zero: int | None, casts: list[Component]
) -> list[str]:
    """Terms read from code or fitted on one model: the estimate counts them at "medium" confidence."""
    out = []
    if any("backward" in c.phases for c in casts):
        out.append("accumulation with checkpointing over fp32 weights (fitted on one model, Qwen2.5-7B)")
    if zero == 3 and engine_fp16(deepspeed, config):
        out.append("fp16 with ZeRO-3 (its overflow check read from DeepSpeed's code; no fp16 run measured)")
    return out


def _uncalibrated(
    config: dict[str, Any],
    shape: ModelShape,
    target: Target,
    gpus: int,
    ftype: str,
    stage: str,
    plan: DeepSpeedPlan,
    bits: int | None,
    attention: str,
    half: bool,
) -> list[str]:
    """What the estimate models by arithmetic only: no run in bench/memory/measured covers it."""
    out = []
    if shape.model_type not in CALIBRATED_FAMILIES:
        counted = "with experts" if shape.is_moe else "(counted as a Llama-like decoder)"
        out.append(f"architecture {shape.model_type or 'unknown'!r} {counted}")
    if gpus > 1:
        out.append(f"{gpus} GPUs (every run had one: ZeRO partitions and NCCL buffers are arithmetic)")
    if target.platform != "cuda":
        out.append(f"{target.name} (runs were on an NVIDIA H200)")
    if ftype == "oft":
        out.append(ftype)
    if stage not in ("sft", "pt", "dpo"):  # DPO: LoRA and full runs of two families (bench/memory/results.md)
        out.append(f"stage {stage}")
    if ftype == "lora" and get(config, "use_dora") is True:
        out.append("DoRA (read from PEFT's code)")
    if bits:
        out.append(f"{bits}-bit base weights")
    if attention == "fa2":
        out.append("flash-attention 2 (counted like SDPA)")
    if not half:
        out.append("fp32 training")
    dropout = get(config, "lora_dropout")
    if ftype == "lora" and is_number(dropout) and dropout > 0:
        out.append("lora_dropout > 0 (measured with HF + PEFT only)")
    return out


def with_changes(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `config` with keys set (value None removes the key, so its default applies)."""
    out = dict(config)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def max_micro_batch(
    config: dict[str, Any],
    shape: ModelShape,
    target: Target,
    gpus: int,
    deepspeed: dict[str, Any] | None,
    *,
    headroom: float = HEADROOM,
    fill: float | None = None,
    limit: int = 4096,
    distributed: AcceleratePlan | None = None,
) -> int:
    """The largest `per_device_train_batch_size` whose estimate fits `headroom` of the target's memory
    (0 when not even 1 fits). Memory grows with the micro-batch, so a binary search finds it."""

    def fits(b: int) -> bool:
        changed = with_changes(config, per_device_train_batch_size=b)
        est = estimate(changed, shape, target, gpus, deepspeed, fill=fill, distributed=distributed)
        return est.fits_with_headroom(headroom)

    if not target.memory_gib or not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
