"""What the memory estimate returns: `MemoryEstimate`, the components of one run's peak per GPU and the run they
describe, and what is read off them: the phases and the allocated peak, the allocator margin and the runtime
(`ALLOCATOR_MARGIN`, `RUNTIME_GIB`, `COMM_GIB`), the verdict against the target's memory (`HEADROOM`), the
confidence (`CALIBRATION`), the table's rows and the JSON. docs/memory.md, "Margin and what must fit", says where
each figure comes from.
"""

from __future__ import annotations

from cfgopt.memory.base import ALWAYS_SHOWN, HOST, PHASES, STATES, Component
from cfgopt.text.record import MutableRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STATE_PARTS = ("weights", "gradients", "embedding gradient", "optimizer states")  # the components of `states_gib`
ALLOCATOR_MARGIN = 0.08  # reserved above allocated: 4-10 % on the packed H200 runs, 6 % in §5.3
RUNTIME_GIB = 1.0  # CUDA/HIP context and BLAS workspaces, outside torch's allocator statistics
COMM_GIB = 1.0  # NCCL/RCCL buffers when more than one GPU takes part
HEADROOM = 0.9  # advice that spends memory (bigger micro-batch, no checkpointing, no offload) keeps 10 % free
CALIBRATION = (
    "measured: median 0.9%, worst 11.7% over 121 H200 runs of 5 families, each family also left out of the fit"
)


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


class MemoryEstimate(MutableRecord):
    """Peak memory per GPU (GiB) as a list of components, and the run it describes. A `MutableRecord`: a dataclass's
    `__init__` written out, its `__repr__` and `__eq__` over `FIELDS`, without importing `dataclasses`."""

    FIELDS = (
        *("model", "finetuning_type", "stage", "gpus", "zero_stage", "micro_batch", "gradient_accumulation"),
        *("seq_len", "tokens", "packing", "fill", "gradient_checkpointing", "attention", "liger", "quantization_bit"),
        *("total_params", "trainable_params", "components", "layer_bytes_per_token", "layer_bytes_per_token_gc"),
        *("memory_gib", "notes", "unmodelled", "uncalibrated", "approximate"),
    )

    def __init__(
        self,
        model: str,
        finetuning_type: str,
        stage: str,
        gpus: int,
        zero_stage: int | None,  # None: no DeepSpeed
        micro_batch: int,
        gradient_accumulation: int,
        seq_len: int,  # padded tokens per sequence in the peak micro-batch
        tokens: int,  # tokens per micro-batch, pairs counted twice
        packing: bool,
        fill: float,
        gradient_checkpointing: bool,
        attention: str,
        liger: bool,
        quantization_bit: int | None,
        total_params: int,
        trainable_params: int,
        components: list[Component] | None = None,
        layer_bytes_per_token: float = 0.0,  # one layer's saved activations, no recomputation
        layer_bytes_per_token_gc: float = 0.0,  # what one layer keeps under checkpointing
        memory_gib: float = 0.0,  # the target's memory per GPU
        notes: list[str] | None = None,
        unmodelled: list[str] | None = None,  # settings outside the model: rules stay silent
        uncalibrated: list[str] | None = None,  # modelled, but no measured run covers them
        # modelled from the code with assumptions it cannot settle (PPO's rollout, a second model's size): confidence
        # "low", and the lint rules stay silent (`cfgopt.job.job.Job.estimate`)
        approximate: list[str] | None = None,
    ) -> None:
        self.model = model
        self.finetuning_type = finetuning_type
        self.stage = stage
        self.gpus = gpus
        self.zero_stage = zero_stage
        self.micro_batch = micro_batch
        self.gradient_accumulation = gradient_accumulation
        self.seq_len = seq_len
        self.tokens = tokens
        self.packing = packing
        self.fill = fill
        self.gradient_checkpointing = gradient_checkpointing
        self.attention = attention
        self.liger = liger
        self.quantization_bit = quantization_bit
        self.total_params = total_params
        self.trainable_params = trainable_params
        self.components: list[Component] = [] if components is None else components
        self.layer_bytes_per_token = layer_bytes_per_token
        self.layer_bytes_per_token_gc = layer_bytes_per_token_gc
        self.memory_gib = memory_gib
        self.notes: list[str] = [] if notes is None else notes
        self.unmodelled: list[str] = [] if unmodelled is None else unmodelled
        self.uncalibrated: list[str] = [] if uncalibrated is None else uncalibrated
        self.approximate: list[str] = [] if approximate is None else approximate

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
    def states_gib(self) -> float:
        """The model states on the GPU (weights, gradients, optimizer states), counted exactly from the parameters,
        the method, the ZeRO stage or FSDP's sharding and the offload whatever the confidence in the rest: all alive
        at the optimizer step, so no peak is below them (MEM001 judges them alone where the activations are
        counted only roughly)."""
        return sum(c.gib for c in self.components if c.name in STATE_PARTS)

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
    def under_memory(self) -> bool:
        """`required_gib` at most the GPU's memory, inside the margin or not: "tight" or "fits" (`verdict`, which
        alone says whether it fits)."""
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
        return "tight" if self.under_memory else "over"

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
        out = {name: getattr(self, name) for name in self.FIELDS if name != "components"}
        out.update(self._json_figures())
        out.update(
            components=[c.as_dict() for c in self.components],
            peak_allocated_gib=self.peak_allocated_gib,
            phases_gib=self.phases(),
            peak_phase=self.peak_phase,
            margin_gib=self.margin_gib,
            runtime_gib=self.runtime_gib,
            required_gib=self.required_gib,
            # one verdict (docs/memory.md, "Margin and what must fit"): "tight" is no fit, as the text says
            verdict=self.verdict,
            fits=self.verdict == "fits",
            confidence=self.confidence,
            global_batch=self.global_batch,
        )
        return out
