"""Peak GPU memory of a LLaMA-Factory 0.9.5 training run, per GPU, with a breakdown.

`estimate(config, shape, target, gpus, deepspeed)` returns a `MemoryEstimate`: a list of `Component` records
(name, GiB, how it was counted, the phases it lives in, source) - model states (weights, gradients, optimizer
states, partitioned by ZeRO stage and GPU count, minus what is offloaded), activations (per layer, with and
without gradient checkpointing), the logits of the loss, the attention scores of `eager` attention, masks and
buffers, ZeRO-3's step moments (fp16's overflow check, the clipping norm) - whose states plus largest phase
are the allocated peak, then an allocator margin and the runtime's own memory. What a training stage or method adds
(reference model, PPO's models and rollout, DoRA) is counted in `cfgopt.memory.stages`, by the rules of
`cfgopt.knowledge.methods`; the record and the phases are `cfgopt.memory.base`'s. `max_micro_batch(...)` is the largest
`per_device_train_batch_size` that fits with headroom. The formulas, their sources and the calibration are in
docs/memory.md; the constants below are named there.

Pure arithmetic over the config dict (the values LLaMA-Factory sees, every default filled in by the job model:
`cfgopt.job.job.Job.values` / `lf_values`), a `ModelShape` and a `Target`: nothing heavy is imported, so the lint
path can use it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from cfgopt.knowledge import methods
from cfgopt.knowledge.bitsandbytes import is_bnb_optimizer
from cfgopt.knowledge.deepspeed_plan import DeepSpeedPlan, deepspeed_plan
from cfgopt.knowledge.model_shapes import ModelShape
from cfgopt.knowledge.packing import packing_on
from cfgopt.knowledge.targets import MAX_GPUS, Target
from cfgopt.memory import stages as memory_stages
from cfgopt.memory.base import (
    ALWAYS_SHOWN,
    GIB,
    HOST,
    PHASES,
    STATES,
    Component,
    linear_params,
    module_dims,
    quantized_bytes_per_param,
)

__all__ = ["GIB", "HOST", "PHASES", "STATES", "Component", "MemoryEstimate", "estimate", "max_micro_batch"]

# ---------------------------------------------------------------------------------------------------------
# Constants (docs/memory.md says where each comes from). Bytes unless named otherwise.

LOGITS_BYTES_PER_VOCAB = 12  # per token: bf16 logits, fp32 upcast, log-softmax and gradients (measured, 5 families)
SOFTCAP_BYTES_PER_VOCAB = 2  # per token: Gemma 2's tanh soft-capping keeps its bf16 output (measured 2.2)
LM_HEAD_GRAD_BYTES = 6  # per lm_head parameter when it trains: fp32 gradient + its bf16 matmul result
LM_HEAD_GRAD_BYTES_DS = 2  # DeepSpeed: the bf16 matmul result (the gradient itself lives in ZeRO's partition)
NORM_BYTES = 4  # per normalised element: transformers' RMSNorm keeps its fp32 upcast input
NORM_WEIGHT_GRAD_BYTES = 2  # per normalised element when the norm's weight trains: its bf16 input to `weight *`
LIGER_NORM_BYTES = 2  # per normalised element: Liger's RMSNorm keeps the bf16 input (and a per-row rstd)
SDPA_BYTES = 4  # per (q + kv) element: SDPA keeps q, k, v and its output, bf16
MLP_BYTES = 6  # per intermediate element: act input (gate), act output and up, bf16 (the product: down's input)
LIGER_MLP_BYTES = 4  # per intermediate element: Liger's SwiGLU/GEGLU keeps gate and up only
LINEAR_INPUT_BYTES = 2  # per input feature of a trained linear (adapters: each its own autocast copy)
GC_BOUNDARY_BYTES = 2  # per hidden element per layer: the bf16 layer input a checkpoint keeps
GC_BACKWARD_BYTES = 8  # per intermediate element: gradients alive while one recomputed layer back-propagates
LORA_DROPOUT_BYTES = 1  # per input feature of each adapted linear (measured +9.4 GiB at 8192 tokens, §5.3)
OFT_INPUT_BYTES = 2  # per input feature of each adapted linear: the rotated input (not measured)
EAGER_SAVED_BYTES = 6  # per score element per layer: fp32 softmax + its bf16 copy (Qwen3-4B eager: 6.3 measured)
# per score element, one layer at a time: the softmax backward's temporaries, with checkpointing the recomputed
# layer's scores among them (fit: the GC-on eager runs of Llama-3-8B and Qwen3-4B full, LoRA 8B; bench/memory)
EAGER_BACKWARD_BYTES = 10
NEAT_MASK_BYTES = 8  # per (b, s, s) element: the 4D mask of neat_packing without fa2 (fit to V13 vs V7)
LIGER_CE_BYTES_PER_HIDDEN = 4  # per token: fused linear cross-entropy keeps the input gradient
ZERO12_STEP_BYTES = 6  # per trainable parameter / N: ZeRO-1/2's fp32 gradient partition and copies at the step
ZERO3_STEP_BYTES = 6  # per parameter of one sub-group: ZeRO-3's fp32 gradients and step temporaries
ZERO3_SUB_GROUP = 1e9  # DeepSpeed's default sub_group_size (the step runs one sub-group at a time)
ISINF_BYTES = 3  # per 16-bit element: torch.isinf is `abs() == inf`, a 16-bit copy and a bool mask (H200: 3.0)
GRAD_NORM_BYTES = 8  # per element of the largest gradient partition: the clipping norm's fp64 copy (H200: 8.0)
ALLOCATOR_MARGIN = 0.08  # reserved above allocated: 4-10 % on the packed H200 runs, 6 % in §5.3
RUNTIME_GIB = 1.0  # CUDA/HIP context and BLAS workspaces, outside torch's allocator statistics
COMM_GIB = 1.0  # NCCL/RCCL buffers when more than one GPU takes part
AUTOCAST_COPIES = "autocast weight copies"
HEADROOM = 0.9  # advice that spends memory (bigger micro-batch, no checkpointing, no offload) keeps 10 % free
DEFAULT_FILL = 1.0  # without packing: the peak batch is padded to cutoff_len (see docs/memory.md)

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
CALIBRATION = (
    "measured: median 0.9%, worst 11.7% over 121 H200 runs of 5 families, each family also left out of the fit"
)
MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Linear inputs that are saved only when a module reading them trains (frozen linears need no input for backward).
_INPUT_GROUPS = (("q_proj", "k_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",))


# The figures `cfgopt estimate --format json` printed before the components (users may read them): each named
# component's GiB under its old key, any other component held throughout in "extra_gib".
_JSON_KEYS = {
    "weights": "weights_gib",
    "gradients": "gradients_gib",
    "optimizer states": "optimizer_gib",
    "activations": "activations_gib",
    "recompute + backward": "recompute_gib",
    "logits / loss": "logits_gib",
    "attention scores": "attention_gib",
    "optimizer step buffers": "step_gib",
    "offloaded (host)": "offloaded_gib",
}


@dataclass
class MemoryEstimate:
    """Peak memory per GPU (GiB) as a list of components, and the run it describes."""

    model: str
    finetuning_type: str
    stage: str
    gpus: int
    zero_stage: int | None  # None: no DeepSpeed
    micro_batch: int
    gradient_accumulation: int
    seq_len: int  # padded tokens per sequence in the peak micro-batch
    tokens: int  # tokens per micro-batch, pairs counted twice
    packing: bool
    fill: float
    gradient_checkpointing: bool
    attention: str
    liger: bool
    quantization_bit: int | None
    total_params: int
    trainable_params: int
    components: list[Component] = field(default_factory=list)
    layer_bytes_per_token: float = 0.0  # one layer's saved activations, no recomputation
    layer_bytes_per_token_gc: float = 0.0  # what one layer keeps under checkpointing
    memory_gib: float = 0.0  # the target's memory per GPU
    notes: list[str] = field(default_factory=list)
    unmodelled: list[str] = field(default_factory=list)  # settings outside the model: rules stay silent
    uncalibrated: list[str] = field(default_factory=list)  # modelled, but no measured run covers them
    # modelled from the code with assumptions it cannot settle (PPO's rollout, a second model's size): confidence
    # "low", and the lint rules stay silent (`cfgopt.job.job.Job.estimate`)
    approximate: list[str] = field(default_factory=list)

    def gib(self, name: str) -> float:
        """The GiB of the component `name` (0.0 when the estimate has none)."""
        return sum(c.gib for c in self.components if c.name == name)

    @property
    def logits_gib(self) -> float:
        return self.gib("logits / loss")

    @property
    def offloaded_gib(self) -> float:
        return sum(c.gib for c in self.components if HOST in c.phases)

    @property
    def gradients_transient(self) -> bool:
        """Full/freeze: the gradients exist from the backward to the step only (not held throughout)."""
        return any(c.name == "gradients" and STATES not in c.phases for c in self.components)

    @property
    def confidence(self) -> str:
        """ "none" (a setting is not modelled), "low" (modelled from the code with assumptions: PPO, a second
        model of unknown size), "medium" (modelled, not measured) or "high"."""
        if self.unmodelled:
            return "none"
        if self.approximate:
            return "low"
        return "medium" if self.uncalibrated else "high"

    def confidence_line(self) -> str:
        if self.unmodelled:
            return (
                f"confidence: none - not modelled: {', '.join(self.unmodelled)}; the total leaves them out, "
                "so it is no estimate of this run"
            )
        if self.approximate:
            rest = f"; no measured run covers {', '.join(self.uncalibrated)}" if self.uncalibrated else ""
            return f"confidence: low - modelled from the code, not measured: {', '.join(self.approximate)}{rest}"
        if self.uncalibrated:
            return f"confidence: medium - no measured run covers {', '.join(self.uncalibrated)} ({CALIBRATION})"
        return f"confidence: high - {CALIBRATION}"

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.gradient_accumulation * self.gpus

    def phases(self) -> dict[str, float]:
        """What lives beside the persistent states at each candidate peak (GiB): the sum of the components
        alive in that phase. Transients of different phases never meet, so the peak is the largest phase
        (docs/memory.md, "Phases", says which component lives when and the measurements behind it)."""
        present = {phase for c in self.components for phase in c.phases}
        return {
            phase: sum(c.gib for c in self.components if phase in c.phases)
            for phase in PHASES
            if phase in ALWAYS_SHOWN or phase in present
        }

    @property
    def persistent_gib(self) -> float:
        return sum(c.gib for c in self.components if STATES in c.phases)

    @property
    def peak_phase(self) -> str:
        phases = self.phases()
        return max(phases, key=lambda k: phases[k])

    @property
    def peak_allocated_gib(self) -> float:
        return self.persistent_gib + max(self.phases().values())

    @property
    def margin_gib(self) -> float:
        return ALLOCATOR_MARGIN * self.peak_allocated_gib

    @property
    def runtime_gib(self) -> float:
        return RUNTIME_GIB + (COMM_GIB if self.gpus > 1 else 0.0)

    @property
    def required_gib(self) -> float:
        """What the GPU must hold: the allocated peak, the allocator's margin and the runtime."""
        peak = self.peak_allocated_gib  # the peak once: the planner asks this of every candidate of every job
        return peak + ALLOCATOR_MARGIN * peak + self.runtime_gib

    @property
    def peak_gib(self) -> float:
        """The number to hold against the target's memory: `required_gib` (cfgopt tune reads this name)."""
        return self.required_gib

    @property
    def fits(self) -> bool:
        return bool(self.memory_gib) and self.required_gib <= self.memory_gib

    def fits_with_headroom(self, headroom: float = HEADROOM) -> bool:
        return bool(self.memory_gib) and self.required_gib <= headroom * self.memory_gib

    @property
    def verdict(self) -> str:
        """One verdict for `estimate`, MEM001 and tune's pruning alike: "fits" within HEADROOM of the GPU's memory
        (the margin covers the model's worst calibrated error, 12%, most of the way), "tight" inside the margin but
        under the memory, "over" above it."""
        if self.fits_with_headroom():
            return "fits"
        return "tight" if self.fits else "over"

    @property
    def surely_out_of_memory(self) -> bool:
        """Even without the allocator margin the peak exceeds the GPU."""
        return bool(self.memory_gib) and self.peak_allocated_gib + self.runtime_gib > self.memory_gib

    def rows(self) -> list[tuple[str, float, str]]:
        """(component, GiB, how it was counted) for a table: the components on the GPU, the peak, the margin and
        the runtime, then what is offloaded."""
        on_gpu = [c for c in self.components if HOST not in c.phases]
        rows = [(c.name, c.gib, c.counted) for c in on_gpu]
        rows += [
            ("= peak allocated", self.peak_allocated_gib, f"states + the {self.peak_phase} phase"),
            ("allocator margin", self.margin_gib, f"{ALLOCATOR_MARGIN:.0%}"),
            ("runtime", self.runtime_gib, "context, workspaces" + (", NCCL" if self.gpus > 1 else "")),
            ("= required per GPU", self.required_gib, f"of {self.memory_gib:g} GiB"),
        ]
        rows += [(c.name, c.gib, c.counted) for c in self.components if HOST in c.phases and c.gib]
        return rows

    def _json_figures(self) -> dict[str, Any]:
        """The per-part keys the JSON had before the components (see _JSON_KEYS); a component of a moment those
        keys never had (the overflow check, the gradient norm) is in "components" and "phases_gib" only."""
        out = {key: 0.0 for key in _JSON_KEYS.values()}
        out["extra_gib"] = 0.0
        for c in self.components:
            key = _JSON_KEYS.get(c.name) or ("extra_gib" if STATES in c.phases else None)
            if key is not None:
                out[key] += c.gib
        out["gradients_transient"] = self.gradients_transient
        return out

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "components"}
        out.update(self._json_figures())
        out.update(
            components=[c.as_dict() for c in self.components],
            peak_allocated_gib=self.peak_allocated_gib,
            phases_gib=self.phases(),
            peak_phase=self.peak_phase,
            margin_gib=self.margin_gib,
            runtime_gib=self.runtime_gib,
            required_gib=self.required_gib,
            fits=self.fits,
            confidence=self.confidence,
            global_batch=self.global_batch,
        )
        return out


# ---------------------------------------------------------------------------------------------------------
# Reading the config


def _get(config: dict[str, Any], key: str) -> Any:
    """`config` holds the values LLaMA-Factory sees, defaults included (`cfgopt.job.job.lf_values`): no default here."""
    return config.get(key)


# The largest count (batch size, sequence length, rank, layers...) the arithmetic accepts: beyond it a product of
# counts could leave the float range (a YAML `1e300` or a 400-digit integer), and no real run comes near it.
MAX_COUNT = 2**31 - 1


def _int(config: dict[str, Any], key: str) -> int | None:
    """An integer value (an integral float counts), None for anything else: a bool, a list, NaN, an infinity, or
    a number beyond +-MAX_COUNT, which the model does not count with."""
    value = _get(config, key)
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        value = int(value) if value.is_integer() else None  # NaN and the infinities are not integers
    if isinstance(value, int) and -MAX_COUNT <= value <= MAX_COUNT:
        return value
    return None


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(p).strip() for p in parts if str(p).strip()]


def attention_of(config: dict[str, Any]) -> str:
    """The attention implementation counted; a value that is not a string (`[fa2]`, a number) is refused by
    LLaMA-Factory's choices (LF002/LF003 say so) and counted as its default, SDPA."""
    value = _get(config, "flash_attn")
    if not isinstance(value, str):
        return "sdpa"
    return {"disabled": "eager", "auto": "sdpa", "fa3": "fa2"}.get(value, value if value in ("sdpa", "fa2") else "sdpa")


def gradient_checkpointing_on(config: dict[str, Any]) -> bool:
    return _get(config, "disable_gradient_checkpointing") is not True


_PREQUANTIZED = (
    (re.compile(r"(?:^|[^a-z])(aqlm|2bit)(?:[^a-z]|$)"), 2),
    (re.compile(r"(?:^|[^a-z])(awq|gptq|int4|4bit|bnb-4bit|nf4|exl2)(?:[^a-z]|$)"), 4),
    (re.compile(r"(?:^|[^a-z])(int8|8bit)(?:[^a-z]|$)"), 8),
)


def _quantized_bytes(config: dict[str, Any], bits: int) -> float:
    """Bytes per quantized linear parameter: bitsandbytes' layouts for `quantization_bit` (its default method,
    nf4 with double quantization unless `double_quantization: false`), bits/8 plus scales for a checkpoint
    quantized by name (AWQ, GPTQ, AQLM) or another `quantization_method`."""
    if _int(config, "quantization_bit") != bits:
        return quantized_bytes_per_param(bits, "pre-quantized")
    method = str(_get(config, "quantization_method") or "bnb")
    return quantized_bytes_per_param(bits, method, _get(config, "double_quantization") is not False)


def quantization_bits(config: dict[str, Any]) -> int | None:
    """Bits of the frozen base: `quantization_bit`, else a pre-quantized checkpoint named so (AWQ, GPTQ, AQLM)."""
    bit = _int(config, "quantization_bit")
    if bit in (2, 3, 4, 5, 6, 8):
        return bit
    name = str(config.get("model_name_or_path") or "").lower()
    for pattern, bits in _PREQUANTIZED:
        if pattern.search(name):
            return bits
    return None


# ---------------------------------------------------------------------------------------------------------
# Shape arithmetic


def _layer_params(shape: ModelShape) -> int:
    return (shape.num_parameters - _embedding_params(shape) - shape.hidden_size) // shape.num_hidden_layers


def _embedding_params(shape: ModelShape) -> int:
    return shape.vocab_size * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)


def _targets(value: Any, notes: list[str], what: str) -> set[str]:
    names = _names(value)
    if not names or any(n.lower() == "all" for n in names):
        return set(MODULES)
    known = {n for n in names if n in MODULES}
    if len(known) < len(names):
        notes.append(f"{what}: {', '.join(sorted(set(names) - known))} not modelled (counted as all linears)")
        return set(MODULES)
    return known


def _input_groups_saved(trained: set[str], shared: bool, dims: dict[str, tuple[int, int]]) -> float:
    """Input features kept for the backward of the trained linears. Full/freeze (`shared`): the linears of a
    group (q/k/v, gate/up) read one bf16 tensor, kept once. Adapters: PEFT casts the input to the adapter's
    fp32 dtype and autocast casts it back to bf16 for each adapted linear, so each keeps its own copy."""
    if shared:
        return float(sum(dims[group[0]][0] for group in _INPUT_GROUPS if trained & set(group)))
    return float(sum(dims[m][0] for m in trained))


def layer_activation_bytes(
    shape: ModelShape,
    trained: set[str],
    *,
    liger: bool,
    shared_inputs: bool = False,
    zero3_adapter: bool = False,
    trained_norms: bool = False,
) -> float:
    """Bytes one decoder layer keeps per token for backward (bf16 training, no recomputation), with `trained`
    linears; docs/memory.md derives each term from the transformers / PEFT / Liger code. `trained_norms`
    (full/freeze without Liger): transformers' RMSNorm also keeps its bf16 normalised output for the weight's
    gradient."""
    h, i = shape.hidden_size, shape.intermediate_size
    dims = module_dims(shape)
    q, kv = dims["q_proj"][1], dims["k_proj"][1]
    norm = LIGER_NORM_BYTES if liger else NORM_BYTES + (NORM_WEIGHT_GRAD_BYTES if trained_norms else 0)
    total = norm * h * shape.norms_per_layer
    if shape.qk_norm:
        total += norm * (q + kv)
    total += SDPA_BYTES * (q + kv)
    total += (LIGER_MLP_BYTES if liger else MLP_BYTES) * i
    total += LINEAR_INPUT_BYTES * _input_groups_saved(trained, shared_inputs, dims)
    if zero3_adapter:
        # ZeRO-3 without autocast: the adapters stay fp32 (4 bytes per input feature, not 2) and ZeRO-3's own
        # linear function keeps the input of every frozen linear as well (one bf16 tensor per group).
        total += LINEAR_INPUT_BYTES * _input_groups_saved(trained, False, dims)
        total += LINEAR_INPUT_BYTES * _input_groups_saved(set(MODULES), True, dims)
    return total


# ---------------------------------------------------------------------------------------------------------
# The estimate, one component at a time


@dataclass
class _Method:
    """What the fine-tuning method trains."""

    trained: set[str]
    trainable: int
    extra_per_layer: float = 0.0  # activation bytes per token and layer beyond the linears' inputs
    first_active: int = 0  # first layer that keeps activations without checkpointing (freeze)
    lm_head_trained: bool = False
    layers_trained: int = 0  # freeze: how many decoder layers train
    embedding_trained: bool = False  # freeze_extra_modules: embed_tokens (the largest trained parameter)
    dora_norm: float = 0.0  # DoRA: the weight norm's transient bytes (largest adapted linear)


# The estimate


def _optimizer_bytes(optim: Any, pure_bf16: bool, notes: list[str]) -> tuple[float, bool]:
    """Optimizer state bytes per trainable parameter, and whether the optimizer is modelled at all."""
    name = str(optim or "adamw_torch")
    if any(k in name for k in ("galore", "apollo", "lomo")):
        return 0.0, False
    if "8bit" in name:
        return (1.0 if "lion" in name else 2.0), True
    if "4bit" in name:
        return 1.0, True
    if name in ("sgd",):
        return 0.0, True
    if name == "adafactor":
        notes.append("adafactor: factored second moments counted as 0")
        return 0.0, True
    one_state = "lion" in name or "rmsprop" in name or name == "adagrad"
    per = 4.0 if one_state else 8.0
    return (per / 2 if pure_bf16 else per), True


def _method(config: dict[str, Any], shape: ModelShape, ftype: str, notes: list[str]) -> _Method:
    dims = module_dims(shape)
    L, V, h = shape.num_hidden_layers, shape.vocab_size, shape.hidden_size
    if ftype == "lora":
        trained = _targets(_get(config, "lora_target"), notes, "lora_target")
        rank = _int(config, "lora_rank") or 8
        method = _Method(trained, L * sum(rank * (dims[m][0] + dims[m][1]) for m in trained))
        dropout = _get(config, "lora_dropout")
        if isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and dropout > 0:
            method.extra_per_layer += LORA_DROPOUT_BYTES * sum(dims[m][0] for m in trained)
        extra_modules = [m for m in _names(_get(config, "additional_target")) if m in ("embed_tokens", "lm_head")]
        method.trainable += V * h * len(extra_modules)
        method.lm_head_trained = bool(extra_modules)
        if _get(config, "use_dora") is True:
            dora = memory_stages.dora_extras(shape, trained)
            method.trainable += dora.trainable
            method.extra_per_layer += dora.bytes_per_layer
            method.dora_norm = dora.norm_bytes
        return method
    if ftype == "oft":
        trained = _targets(_get(config, "oft_target"), notes, "oft_target")
        block, rank = _int(config, "oft_block_size") or 0, _int(config, "oft_rank") or 0
        trainable = 0
        for m in trained:
            fan_in = dims[m][0]
            b = block if block > 0 else max(1, fan_in // max(1, rank))
            trainable += L * fan_in * (b - 1) // 2
        notes.append("OFT: activation cost of the rotation not measured (counted as one input copy)")
        return _Method(trained, trainable, extra_per_layer=OFT_INPUT_BYTES * sum(dims[m][0] for m in trained))
    if ftype == "freeze":
        return _freeze_method(config, shape, notes)
    return _Method(set(MODULES), shape.num_parameters, lm_head_trained=True)  # full


_FREEZE_GROUPS = {"self_attn": MODULES[:4], "mlp": MODULES[4:]}


def _freeze_method(config: dict[str, Any], shape: ModelShape, notes: list[str]) -> _Method:
    """Freeze tuning (llamafactory 0.9.5 model/adapter.py _setup_freeze_tuning): `freeze_trainable_layers` n > 0
    trains the last n layers, n < 0 the first |n|; within them `freeze_trainable_modules` (`all`, or sub-modules:
    `self_attn`, `mlp`, the norms); `freeze_extra_modules` adds modules outside the layers (`embed_tokens`,
    `lm_head`, `norm`)."""
    dims, L = module_dims(shape), shape.num_hidden_layers
    freeze_n = _int(config, "freeze_trainable_layers")
    freeze_n = 2 if freeze_n is None else freeze_n
    count = min(abs(freeze_n), L)
    modules = _names(_get(config, "freeze_trainable_modules")) or ["all"]
    if any(m.lower() == "all" for m in modules):
        trained, per_layer = set(MODULES), _layer_params(shape)
    else:
        trained = {m for group, names in _FREEZE_GROUPS.items() if group in modules for m in names}
        norms = sum(1 for m in modules if m.endswith("norm") or m.endswith("layernorm"))
        per_layer = sum(a * b for m, (a, b) in dims.items() if m in trained) + norms * shape.hidden_size
    extra = set(_names(_get(config, "freeze_extra_modules")))
    embedding, tied = shape.vocab_size * shape.hidden_size, shape.tie_word_embeddings
    extra_params = embedding * ("embed_tokens" in extra) + embedding * ("lm_head" in extra and not tied)
    extra_params += shape.hidden_size * ("norm" in extra)
    unknown = extra - {"embed_tokens", "lm_head", "norm"}
    if unknown:
        notes.append(f"freeze_extra_modules: {', '.join(sorted(unknown))} not counted")
    embed_trains = "embed_tokens" in extra
    return _Method(
        trained,
        count * per_layer + extra_params,
        # the backward reaches the embedding when it trains, so no frozen prefix can drop its activations
        first_active=L - count if freeze_n > 0 and not embed_trains else 0,
        lm_head_trained="lm_head" in extra or (embed_trains and tied),
        layers_trained=count,
        embedding_trained=embed_trains,
    )


class _States(NamedTuple):
    """Model states per GPU, in bytes."""

    weights: float
    gradients: float
    optimizer: float
    offloaded: float
    step: float  # optimizer-step temporaries (ZeRO's gradient partitions)
    gradients_transient: bool  # gradients exist only from backward to the step (full/freeze)
    zero: int | None  # the ZeRO stage, None without DeepSpeed
    trainable: int


def _model_states(
    shape: ModelShape,
    method: _Method,
    ftype: str,
    plan: DeepSpeedPlan,
    config: dict[str, Any],
    gpus: int,
    bits: int | None,
    unmodelled: list[str],
    notes: list[str],
) -> _States:
    """Weights, gradients and optimizer states per GPU (docs/memory.md, "Model states")."""
    zero, total = plan.stage, shape.num_parameters
    trainable = min(method.trainable, total)
    frozen = total - trainable
    pure_bf16 = bool(_get(config, "pure_bf16"))
    half = pure_bf16 or bool(_get(config, "bf16")) or bool(_get(config, "fp16"))
    # DeepSpeed keeps its optimizer states in fp32 whatever the trainer's precision.
    opt_bytes, opt_known = _optimizer_bytes(_get(config, "optim"), pure_bf16 and zero is None, notes)
    if not opt_known:
        unmodelled.append(f"optimizer {_get(config, 'optim')}")
    step = 0.0
    if zero is None:
        n_params = n_opt = 1
        upcast = not pure_bf16  # LLaMA-Factory casts trainable parameters to fp32 (model/adapter.py)
        p_bytes = 4.0 if upcast else 2.0  # autocast's 16-bit copies of fp32 weights: `_autocast_copies`
        weights_trainable = trainable * p_bytes
        grads = trainable * p_bytes
        master = 0.0
    else:
        n_opt = gpus if zero >= 1 else 1
        n_grads = gpus if zero >= 2 else 1
        n_params = gpus if zero == 3 else 1
        p_bytes = 2.0 if plan.half else 4.0  # the DeepSpeed engine casts the module to bf16/fp16
        weights_trainable = trainable * p_bytes / n_params
        grads = trainable * p_bytes / n_grads
        master = trainable * (4.0 if plan.half else 0.0) / n_opt
        if zero == 3:
            # ZeRO-3 keeps a 16-bit gradient partition from the start and builds the fp32 gradients of one
            # sub-group (sub_group_size, 1e9 by default) at the step (measured: Qwen3-4B 16 + 1.5 bytes/param)
            step = ZERO3_STEP_BYTES * min(trainable / gpus, ZERO3_SUB_GROUP)
        elif zero in (1, 2):
            # The step holds the fp32 gradient partition and the 16-bit gradients next to the states
            # (measured on one H200: 22 bytes per parameter at the peak, bench/memory/results.md)
            step = ZERO12_STEP_BYTES * trainable / n_grads
    optimizer, paged = _optimizer_on_gpu(
        config, shape, method, ftype, zero, trainable * opt_bytes / n_opt + master, opt_bytes, notes
    )
    # Frozen weights: bf16, or quantized linears with bf16 embeddings (bitsandbytes keeps those in 16 bits).
    if bits:
        frozen_linear = max(0, min(frozen, linear_params(shape)))
        frozen_bytes = frozen_linear * _quantized_bytes(config, bits) + (frozen - frozen_linear) * 2.0
    else:
        frozen_bytes = frozen * 2.0
    weights = frozen_bytes / n_params + weights_trainable
    weights, grads, optimizer, step, offloaded = _offload(plan, shape, weights, grads, optimizer, step)
    offloaded += paged
    if zero is None and not half and ftype in ("full", "freeze"):
        notes.append("no bf16/fp16: activations in fp32")
    # Full/freeze: gradients are set to None after each step and rebuilt by the backward; ZeRO-3 keeps its
    # 16-bit gradient partition from the start (measured: 8 bytes/parameter before the first step).
    # ZeRO-3 with only the optimizer offloaded: its gradient bucket is not there at the loss (measured: Qwen2.5-1.5B
    # 10.3 GiB, 1.1 GiB under an estimate holding it); with the parameters offloaded too it is (Llama-3.2-1B and
    # Qwen3-1.7B, 5-7% under without it). Measured, the mechanism in stage3.py not traced.
    bucket_transient = zero == 3 and plan.offload_optimizer and not plan.offload_param
    transient = ftype in ("full", "freeze") and ((zero != 3 and not plan.offload_optimizer) or bucket_transient)
    return _States(weights, grads, optimizer, offloaded, step, transient, zero, trainable)


def _optimizer_on_gpu(
    config: dict[str, Any],
    shape: ModelShape,
    method: _Method,
    ftype: str,
    zero: int | None,
    optimizer: float,
    state_bytes: float,
    notes: list[str],
) -> tuple[float, float]:
    """The optimizer states on the GPU and those paged out (bitsandbytes' paged optimizers), in bytes
    (`state_bytes`: per trainable parameter, as `_optimizer_bytes` counts them)."""
    name = str(_get(config, "optim") or "")
    if zero is None and is_bnb_optimizer(name) and "8bit" in name and (ftype == "full" or method.embedding_trained):
        # The Trainer registers every nn.Embedding for 32-bit states under a bitsandbytes 8-bit optimizer
        # (transformers trainer.py, `register_module_override(module, "weight", {"optim_bits": 32})`): 8 bytes per
        # trained embedding parameter, not 2 (measured: Qwen3-1.7B full, 21.4 GiB; bench/memory/results.md)
        optimizer += shape.vocab_size * shape.hidden_size * state_bytes * 3  # 32-bit states: four times 8-bit
    if name.startswith("paged_") and zero is None:
        # bitsandbytes' paged optimizers keep their states in CUDA unified memory: outside the allocator's count
        # and paged out to the host under pressure, so they cannot stop the run (measured: Mistral-7B
        # paged_adamw_8bit 54.8 GiB allocated against 68.6 with adamw_bnb_8bit; bench/memory/results.md)
        notes.append("paged optimizer: its states live in unified memory, paged to the host under pressure")
        return 0.0, optimizer
    return optimizer, 0.0


def _offload(
    plan: DeepSpeedPlan, shape: ModelShape, weights: float, grads: float, optimizer: float, step: float
) -> tuple[float, float, float, float, float]:
    """DeepSpeed's offload: (weights, gradients, optimizer states, step buffers) left on the GPU, and the bytes
    moved to the host."""
    zero, offloaded = plan.stage, 0.0
    if plan.offload_optimizer:
        offloaded += optimizer
        optimizer, step = 0.0, 0.0
        if zero is not None and zero >= 2:
            # gradients stream to the host in reduce buckets: under ZeRO-3 a bucket stays on the GPU (measured:
            # ZeRO-3 + optimizer offload, 1.5B full, 10.3 GiB on the H200); ZeRO-2 copies each gradient to its
            # host partition as the backward makes it (measured: Llama-3.2-1B 9.0 and Qwen3-1.7B 11.3 GiB, within
            # 2% of the estimate with no gradient held; bench/memory/results.md)
            bucket = 2.0 * _bucket_elements(plan, shape) if zero == 3 else 0.0
            offloaded += max(0.0, grads - bucket)
            grads = min(grads, bucket)
        if zero in (1, 2):
            offloaded += grads * 2  # the fp32 gradient partition lives on the host as well
    if plan.offload_param:
        offloaded += weights
        weights = 0.0
    return weights, grads, optimizer, step, offloaded


def _bucket_elements(plan: DeepSpeedPlan, shape: ModelShape) -> float:
    """ZeRO's reduce + all-gather bucket elements; "auto" is hidden_size² (transformers' deepspeed.py)."""
    return (plan.bucket_elements or 0.0) + plan.auto_buckets * shape.hidden_size**2


def _activations(
    config: dict[str, Any],
    shape: ModelShape,
    method: _Method,
    ftype: str,
    zero: int | None,
    tokens: int,
    gc: bool,
    liger: bool,
    half: bool,
    fused_loss: bool,
) -> tuple[float, float, float]:
    """(bytes one layer keeps per token, activations kept through the step's forward, one recomputed layer)."""
    L, h, i = shape.num_hidden_layers, shape.hidden_size, shape.intermediate_size
    full = ftype in ("full", "freeze")
    act_scale = 2.0 if (not half and full) else 1.0
    # Full/freeze share one input tensor per q/k/v and gate/up group, unless the (trained, fp32) norm weight
    # makes the norm's output fp32 under autocast: then each linear keeps its own bf16 cast of it.
    fp32_weights = zero is None and not bool(_get(config, "pure_bf16"))
    per_layer = method.extra_per_layer + layer_activation_bytes(
        shape,
        method.trained,
        liger=liger,
        shared_inputs=full and (liger or not fp32_weights),
        zero3_adapter=zero == 3 and ftype in ("lora", "oft"),
        trained_norms=full,
    )
    if gc:
        recompute = tokens * (per_layer + GC_BACKWARD_BYTES * i) * act_scale
        if fused_loss:  # the fused loss's input gradient waits for the backward
            recompute += tokens * LIGER_CE_BYTES_PER_HIDDEN * h
        kept = tokens * GC_BOUNDARY_BYTES * h * L * act_scale
        if ftype == "freeze" and not method.first_active:
            # LLaMA-Factory checkpoints only the layers with trainable parameters (model_utils/checkpointing.py,
            # `custom_gradient_checkpointing_func`): with the first n training (freeze_trainable_layers < 0) the
            # frozen layers after them run un-checkpointed and keep what back-propagation through them needs
            # (measured: Mistral-7B 36.8 GiB against 21.1 with the last two training; bench/memory/results.md).
            count = method.layers_trained
            frozen_per_layer = layer_activation_bytes(shape, set(), liger=liger)
            boundaries = tokens * GC_BOUNDARY_BYTES * h * count
            kept = (boundaries + tokens * frozen_per_layer * (L - count)) * act_scale
        return per_layer, kept, recompute
    saved_layers = per_layer * L
    if ftype == "freeze":
        # Without GC (so without `enable_input_require_grads`) the frozen layers before the first trainable one
        # keep nothing (freeze_trainable_layers > 0: the last n train); with the first n training (< 0), the
        # frozen layers after them keep what back-propagation through them needs.
        count = method.layers_trained
        frozen_per_layer = layer_activation_bytes(shape, set(), liger=liger)
        saved_layers = per_layer * count + (frozen_per_layer * (L - count) if not method.first_active else 0.0)
    return per_layer, tokens * saved_layers * act_scale, 0.0


def _logits_bytes(
    shape: ModelShape, tokens: int, liger: bool, lm_head_trained: bool, zero: int | None, stage: str = "sft"
) -> float:
    """The loss: without Liger the bf16 logits, their fp32 upcast, log-softmax and gradients (12 bytes per
    vocabulary entry and token, measured), Gemma 2's soft-capping copy, and the lm_head's gradient when it
    trains. With Liger's fused linear cross-entropy (`liger`: on, and a stage it fuses, `methods.LIGER_STAGES`):
    the input gradient and one chunk of fp32 logits. A reward model's loss reads the value head only: its logits
    are the wrapper's upcast, without gradients (`memory.stages.logits_bytes_per_vocab`)."""
    V, h = shape.vocab_size, shape.hidden_size
    stage_bytes = memory_stages.logits_bytes_per_vocab(stage)
    head_grad = (LM_HEAD_GRAD_BYTES if zero is None else LM_HEAD_GRAD_BYTES_DS) * V * h if lm_head_trained else 0.0
    if liger:
        chunk = 2 ** math.ceil(math.log2(max(1, math.ceil(tokens / math.ceil(V / h)))))
        return tokens * LIGER_CE_BYTES_PER_HIDDEN * h + min(chunk, tokens) * V * 8 + head_grad
    per_token = LOGITS_BYTES_PER_VOCAB if stage_bytes is None else stage_bytes
    per_token += SOFTCAP_BYTES_PER_VOCAB if shape.logit_softcapping else 0.0
    return tokens * per_token * V + head_grad


def _attention_bytes(
    shape: ModelShape, attention: str, seqs: int, seq: int, layers_kept: int, notes: list[str]
) -> float:
    """The materialised attention scores: eager attention's only (SDPA and FA2 keep none)."""
    if attention != "eager":
        return 0.0
    notes.append("eager attention: every layer's L x L scores are materialised")
    return _eager_scores(shape, seqs, seq, layers_kept)


def _eager_scores(shape: ModelShape, seqs: int, seq: int, layers_kept: int) -> float:
    """`eager` attention materialises the b·a·s² scores: kept per layer without checkpointing (`layers_kept`),
    plus one layer's softmax backward (with checkpointing, the recomputed layer's own scores are counted there)."""
    scores = shape.num_attention_heads * seqs * seq * seq
    return scores * (EAGER_SAVED_BYTES * layers_kept + EAGER_BACKWARD_BYTES)


def _buffers(
    shape: ModelShape,
    config: dict[str, Any],
    plan: DeepSpeedPlan,
    gpus: int,
    gradient_bytes: float,
    batch: _Batch,
    attention: str,
    notes: list[str],
) -> list[Component]:
    """Masks and ZeRO communication buffers: held throughout the step (a reference model: `memory.stages`)."""
    zero, out = plan.stage, []
    if batch.packing and bool(_get(config, "neat_packing")) and attention != "fa2":
        mask = NEAT_MASK_BYTES * batch.seqs * batch.seq * batch.seq
        out.append(Component("neat_packing mask", mask / GIB, "4D mask, b x s x s", (STATES,), "fit to V13 vs V7"))
    if zero == 3 and gpus > 1:
        embed = _embedding_params(shape)
        gathered = 2.0 * max(2 * _layer_params(shape), embed // (1 if shape.tie_word_embeddings else 2))
        out.append(
            Component("ZeRO-3 gathered parameters", gathered / GIB, "2 layers or the embedding, 16-bit", (STATES,))
        )
    if zero in (1, 2) and gpus > 1:
        # bounded by the gradient partition's size in bytes, as calibrated (an element count against bytes)
        buckets = 2.0 * min(_bucket_elements(plan, shape), gradient_bytes) * (2 if plan.overlap_comm else 1)
        counted = "reduce + all-gather buckets" + (", x2 overlap_comm" if plan.overlap_comm else "")
        out.append(Component("ZeRO buckets", buckets / GIB, counted, (STATES,)))
    return out


def _autocast_copies(
    config: dict[str, Any], ftype: str, zero: int | None, gc: bool, half: bool, batch: _Batch, trainable: int
) -> list[Component]:
    """Autocast's 16-bit copies of the trained fp32 weights (full/freeze without DeepSpeed under bf16 or fp16):
    - checkpointing off: the backward keeps every copy; counted throughout, as measured (18 bytes per parameter
      for a 1.24B full fine-tune, docs/evidence/rocm_perf.md §5.3);
    - checkpointing on, with gradients held from an earlier micro-batch (accumulation over 1): through the
      backward. Fitted, the mechanism not traced: Qwen2.5-7B full SFT (8-bit AdamW, packed 12000 tokens) at 1x8,
      2x4 and 4x2 measured 15.7, 14.9 and 13.3 GiB over an estimate without them (its copy is 14.2 GiB);
    - checkpointing on with accumulation 1: none at the peak (every such run fits without)."""
    upcast = zero is None and half and not bool(_get(config, "pure_bf16")) and ftype in ("full", "freeze")
    copies, detail = 2.0 * trainable / GIB, "16-bit copy of the trained weights"
    if not upcast or (gc and batch.accumulation == 1):
        return []
    if not gc:
        return [Component(AUTOCAST_COPIES, copies, detail, (STATES,), "measured: rocm_perf §5.3")]
    source = "fit: Qwen2.5-7B full, GC on, accumulation 2-8 (bench/memory/results.md)"
    return [Component(AUTOCAST_COPIES, copies, detail, ("backward",), source)]


def _late_embedding_gradient(shape: ModelShape, ftype: str, method: _Method, states: _States, batch: _Batch) -> float:
    """Bytes of the input embedding's gradient where the backward makes it last, so that it is not there at the
    backward's peak: untied and trained, with no gradient held from an earlier micro-batch. Measured: Llama-3-8B
    full SFT, 2x1, GC on, 78.1 GiB allocated against 80.1 estimated with it (its 1.96 GiB)."""
    held = batch.accumulation > 1
    trained = ftype == "full" or method.embedding_trained
    if not states.gradients_transient or states.zero is not None or held or shape.tie_word_embeddings or not trained:
        return 0.0
    return shape.vocab_size * shape.hidden_size * states.gradients / max(states.trainable, 1)


_STAGE3 = "deepspeed 0.19.8 runtime/zero/stage3.py"


def _largest_trainable(shape: ModelShape, method: _Method, ftype: str) -> int:
    """Elements of the largest trained parameter: the embedding or lm_head when they train, else one layer's
    largest linear (freeze), else 0 (adapters are small next to the step's other buffers)."""
    if method.lm_head_trained or method.embedding_trained:
        return shape.vocab_size * shape.hidden_size
    if ftype == "freeze":
        return max(a * b for a, b in module_dims(shape).values())
    return 0


def _engine_fp16(deepspeed: dict[str, Any] | None, config: dict[str, Any]) -> bool:
    """DeepSpeed runs the model in fp16 (its `fp16` block enabled, or "auto" with the trainer's `fp16` on)."""
    block = deepspeed.get("fp16") if isinstance(deepspeed, dict) else None
    enabled = block.get("enabled") if isinstance(block, dict) else None
    return enabled is True or (enabled == "auto" and bool(_get(config, "fp16")))


def _zero3_buffers(
    config: dict[str, Any],
    deepspeed: dict[str, Any] | None,
    plan: DeepSpeedPlan,
    gpus: int,
    trainable: int,
    largest_trainable: int,
) -> list[Component]:
    """What ZeRO-3's step allocates beside the states it partitions, each at its own moment (read from DeepSpeed
    0.19.8's stage3.py; docs/memory.md, "ZeRO-3's step"): the fp64 copy of one parameter's gradient partition
    that the clipping norm makes (both precisions), and with fp16 the overflow check's copy and mask of the whole
    16-bit gradient partition (the loss scaler's inf/NaN test, every step). With the optimizer offloaded the
    gradient partition lives on the host (stage3.py:333) and neither happens on the GPU."""
    if plan.stage != 3 or plan.offload_optimizer:
        return []
    norm = GRAD_NORM_BYTES * math.ceil(largest_trainable / gpus)
    source = f"{_STAGE3}:2457 (get_grad_norm_direct: g.to(float64).norm() per parameter)"
    out = [Component("gradient norm (fp64)", norm / GIB, "largest trainable parameter", ("grad norm",), source)]
    if _engine_fp16(deepspeed, config):
        check = ISINF_BYTES * trainable / gpus
        source = f"{_STAGE3}:2815-2816, 3013 (fp16: torch.isinf(grad_partitions_flat_buffer) = abs() == inf)"
        counted = "isinf over the 16-bit gradient partition: copy + mask"
        out.append(Component("fp16 overflow check", check / GIB, counted, ("overflow check",), source))
    return out


def _attention_implementation(config: dict[str, Any], shape: ModelShape, notes: list[str]) -> str:
    attention = attention_of(config)
    if shape.model_type == "gemma2" and _get(config, "flash_attn") == "auto":
        # LLaMA-Factory switches Gemma 2 to fa2 when flash-attn is installed, else to eager
        # (model/model_utils/attention.py); which one cannot be read from the config.
        notes.append("Gemma 2 with flash_attn auto: eager unless flash-attn is installed (counted as eager)")
        return "eager"
    return attention


@dataclass(frozen=True)
class _Batch:
    """What one micro-batch holds: the run's stage and finetuning type, sizes and sequence length."""

    stage: str
    ftype: str
    micro_batch: int
    accumulation: int
    packing: bool
    fill: float
    seq: int  # tokens per sequence in the peak micro-batch
    seqs: int  # sequences per micro-batch (two per sample for pairwise stages)

    @property
    def tokens(self) -> int:
        return self.seqs * self.seq


def _unmodelled_features(config: dict[str, Any]) -> list[str]:
    """Features set in the config that the estimate does not model (listed in its confidence)."""
    unmodelled = [label for key, label in _UNMODELLED.items() if _get(config, key) not in (None, False, "", [], {})]
    attention = _get(config, "flash_attn")
    if attention is not None and not isinstance(attention, str):
        unmodelled.append(f"flash_attn {_short(attention)} (not one of its choices)")
    return unmodelled


def unusable_sizes(config: dict[str, Any]) -> list[str]:
    """The sizes the estimate cannot count with, said as "`key` is VALUE, not ...": a micro-batch or cutoff_len
    that is not a positive integer up to MAX_COUNT (NaN, an infinity, `1e300`, a list...)."""
    out = []
    for key in ("per_device_train_batch_size", "cutoff_len"):
        number = _int(config, key)
        if number is None or number < 1:
            out.append(f"`{key}` is {_short(_get(config, key))}, not a positive integer up to {MAX_COUNT}")
    return out


def _short(value: Any) -> str:
    """A config value for a message: its repr, cut short (a hostile value may be a 400-digit integer)."""
    try:
        text = repr(value)
    except ValueError:  # an integer beyond Python's digit limit for str()
        return f"an integer of about {value.bit_length() * 0.30103:.0f} digits"
    return text if len(text) <= 40 else text[:37] + "..."


def _batch(config: dict[str, Any], fill: float | None, unmodelled: list[str], notes: list[str]) -> _Batch:
    stage = str(_get(config, "stage"))
    ftype = str(_get(config, "finetuning_type"))
    if ftype not in ("lora", "oft", "freeze", "full"):
        unmodelled.append(f"finetuning_type {ftype!r}")
        ftype = "lora"
    bsz, accum, cutoff = (
        _int(config, "per_device_train_batch_size"),
        _int(config, "gradient_accumulation_steps"),
        _int(config, "cutoff_len"),
    )
    unmodelled.extend(unusable_sizes(config))
    bsz, cutoff = max(1, bsz or 1), max(1, cutoff or 1)
    accum = accum if accum and accum > 0 else 1
    packing = packing_on(config) and methods.packing_applies(stage)
    if packing_on(config) and not packing:
        notes.append(f"stage {stage}: its data processor does not pack (`packing` counts for pt and sft only)")
    if packing:
        fill_used = 1.0
    else:
        fill_used = DEFAULT_FILL if fill is None else max(0.0, min(1.0, float(fill)))
        notes.append(
            f"packing off: sequences padded to {fill_used:.0%} of cutoff_len in the peak micro-batch"
            + (" (the longest batch reaches cutoff_len)" if fill is None else "")
        )
    if stage == "ppo":
        cutoff = methods.ppo_sequence(config, cutoff)
        notes.append(f"PPO: prompt (cutoff_len) + response (max_new_tokens) = {cutoff} tokens per sequence")
    seq = max(1, math.ceil(cutoff * fill_used))
    seqs = memory_stages.graph_sequences(stage, bsz)
    return _Batch(stage, ftype, bsz, accum, packing, fill_used, seq, seqs)


def estimate(
    config: dict[str, Any],
    shape: ModelShape,
    target: Target,
    gpus: int,
    deepspeed: dict[str, Any] | None,
    *,
    fill: float | None = None,
) -> MemoryEstimate:
    """Peak memory per GPU of the training run `config` (a LLaMA-Factory config as a dict) on `gpus` GPUs of
    `target`, with the DeepSpeed JSON `deepspeed` (a dict) or None. `fill`: the share of `cutoff_len` the peak
    micro-batch's sequences reach without packing (default 1.0: the longest batch is padded to cutoff_len)."""
    notes: list[str] = []
    unmodelled = _unmodelled_features(config)
    gpus = max(1, int(gpus or 1))
    if gpus > MAX_GPUS:
        unmodelled.append(f"{gpus} GPUs (the model counts up to {MAX_GPUS})")
        gpus = MAX_GPUS
    batch = _batch(config, fill, unmodelled, notes)
    stage, ftype, bsz, accum = batch.stage, batch.ftype, batch.micro_batch, batch.accumulation
    packing, fill_used, seq, seqs, tokens = batch.packing, batch.fill, batch.seq, batch.seqs, batch.tokens
    gc = gradient_checkpointing_on(config)
    attention = _attention_implementation(config, shape, notes)
    liger = bool(_get(config, "enable_liger_kernel"))
    fused_loss = liger and methods.liger_fuses_loss(stage)  # rm/dpo/kto/ppo: Liger without its fused loss
    half = bool(_get(config, "pure_bf16")) or bool(_get(config, "bf16")) or bool(_get(config, "fp16"))
    bits = quantization_bits(config) if ftype in ("lora", "oft") else None
    plan = deepspeed_plan(deepspeed, config)
    if not plan.known:
        unmodelled.append("DeepSpeed ZeRO stage not a literal 0-3")
    zero = plan.stage

    method = _method(config, shape, ftype, notes)
    states = _model_states(shape, method, ftype, plan, config, gpus, bits, unmodelled, notes)
    L = shape.num_hidden_layers
    per_layer, activations, recompute = _activations(
        config, shape, method, ftype, zero, tokens, gc, liger, half, fused_loss
    )
    logits = _logits_bytes(shape, tokens, fused_loss, method.lm_head_trained, zero, stage)
    attention_bytes = _attention_bytes(shape, attention, seqs, seq, 0 if gc else (L - method.first_active), notes)
    trainable = min(method.trainable, shape.num_parameters)
    buffers = _buffers(shape, config, plan, gpus, states.gradients, batch, attention, notes)
    buffers += _zero3_buffers(config, deepspeed, plan, gpus, trainable, _largest_trainable(shape, method, ftype))
    approximate: list[str] = []
    buffers += _stage_components(config, shape, batch, method, gpus, gc, plan, notes, approximate)
    casts = _autocast_copies(config, ftype, zero, gc, half, batch, trainable)
    buffers += casts
    late = _late_embedding_gradient(shape, ftype, method, states, batch)
    uncalibrated = _uncalibrated(config, shape, target, gpus, ftype, stage, plan, bits, attention, half)
    uncalibrated += _narrowly_measured(config, deepspeed, zero, casts)
    activity = _Activity(per_layer, activations, recompute, logits, attention_bytes)
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


def _stage_components(
    config: dict[str, Any],
    shape: ModelShape,
    batch: _Batch,
    method: _Method,
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
    if _get(config, "enable_liger_kernel") and not methods.liger_fuses_loss(batch.stage):
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


class _Activity(NamedTuple):
    """What the micro-batch itself costs, in bytes (one layer's per token, then the totals)."""

    per_layer: float
    activations: float
    recompute: float
    logits: float
    attention: float


def _components(
    shape: ModelShape,
    batch: _Batch,
    states: _States,
    activity: _Activity,
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
        held = batch.accumulation > 1 and states.zero is None
        grads_phases = (("loss",) if held else ()) + ("backward", "step")
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
    if zero == 3 and _engine_fp16(deepspeed, config):
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
        out.append(f"architecture {shape.model_type or 'unknown'!r} (counted as a Llama-like decoder)")
    if gpus > 1:
        out.append(f"{gpus} GPUs (every run had one: ZeRO partitions and NCCL buffers are arithmetic)")
    if target.platform != "cuda":
        out.append(f"{target.name} (runs were on an NVIDIA H200)")
    if ftype == "oft":
        out.append(ftype)
    if stage not in ("sft", "pt", "dpo"):  # DPO: LoRA and full runs of two families (bench/memory/results.md)
        out.append(f"stage {stage}")
    if ftype == "lora" and _get(config, "use_dora") is True:
        out.append("DoRA (read from PEFT's code)")
    if bits:
        out.append(f"{bits}-bit base weights")
    if attention == "fa2":
        out.append("flash-attention 2 (counted like SDPA)")
    if not half:
        out.append("fp32 training")
    dropout = _get(config, "lora_dropout")
    if ftype == "lora" and isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and dropout > 0:
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
) -> int:
    """The largest `per_device_train_batch_size` whose estimate fits `headroom` of the target's memory
    (0 when not even 1 fits). Memory grows with the micro-batch, so a binary search finds it."""

    def fits(b: int) -> bool:
        est = estimate(with_changes(config, per_device_train_batch_size=b), shape, target, gpus, deepspeed, fill=fill)
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
