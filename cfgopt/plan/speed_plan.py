"""The speed plan of one job, as the planner (`cfgopt.plan.planner`) makes it: what it changes, what it expects, and
why it left each other candidate out; the plan the job would get with the packages its environment lacks
(`WithPackages`), and the plan a job its environment stops at start-up gets (`StoppedJob`: none)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cfgopt.plan import space

if TYPE_CHECKING:
    from cfgopt.job.job import Hardware
    from cfgopt.plan.reasons import Rejection

_PRECISION_WORDS = {
    "bf16": "bf16 mixed precision",
    "fp16": "fp16 mixed precision",
    "pure_bf16": "pure bf16 (weights, gradients and optimizer states in bf16: numerics change, check the loss "
    "with `cfgopt verify`)",
}
_PRIOR_SOURCE = "priors measured on an H200 (8B LoRA SFT, 4B LoRA DPO, 4B and 8B full SFT; bench/tune, bench/planner)"


_OWN_NUMERICS = "its own numerics: check the loss with `cfgopt verify`"
_OPTIM_NUMERICS = {
    "adamw_bnb_8bit": "8-bit states: within 0.3% of AdamW's loss in 20 steps on an H200, bench/verify/results.md; "
    "check yours with `cfgopt verify`",
    "adamw_torch_8bit_sr": "pure bf16 weights with torchao's 8-bit AdamW and bf16 stochastic rounding "
    "(`optim: adamw_torch_8bit`, `optim_args: bf16_stochastic_round=True`): in 20 steps on an H200 a loss at or "
    "below AdamW's on 7-8B and Qwen3-4B full SFT, 3.2% above 8-bit AdamW's on qwen3_full_sft, bench/planner/README.md; "
    "check yours with `cfgopt verify`",
}


class SpeedPlan:
    """One job's plan. A plain class rather than a dataclass: the planner runs on the lint path (start-up)."""

    def __init__(self, hardware: Hardware, base: space.Knobs, best: space.Knobs, gain: float) -> None:
        self.hardware, self.base, self.best = hardware, base, best
        self.gain = gain  # prior speed of best / base
        self.est_gib: float | None = None  # the chosen candidate's estimated peak per GPU (None: no estimate)
        self.changes: dict[str, Any] = {}  # YAML keys to set
        self.drop_deepspeed = False
        self.deepspeed_stage: int | None = None  # the ZeRO stage written into the job's DeepSpeed JSON (None: kept)
        self.deepspeed_file = ""  # that JSON's name, as the description says it
        self.needs: list[str] = []  # packages of an assumed environment the plan uses (the output says so)
        self.environment = ""  # the environment planned for, in words ("environment: requirements.txt")
        # what the packages the environment lacks would bring (None: nothing notably faster)
        self.with_packages: WithPackages | None = None
        self.notes: list[str] = []  # knob values left out, and why ("pure bf16 not planned: refused with ZeRO-3")
        self.rejected: dict[space.Knobs, Rejection] = {}  # every candidate not planned, with its reason
        self.quoted: str | None = None  # the note the description quotes: a notably faster setting left out
        self.searched: set[str] = set()  # the knobs the plan chose among several values (not merely kept)
        self.data_words = ""  # where the gain's padding figure comes from (the job's data, or the prior's)
        # what the environment runs and what the plan leaves to the user, said at the description's end (`remarks_of`)
        self.remarks: list[str] = []

    @property
    def changed(self) -> bool:
        return self.config_changed or self.deepspeed_stage is not None

    @property
    def config_changed(self) -> bool:
        """Does the plan edit the LLaMA-Factory config itself (not only the DeepSpeed JSON's stage)?"""
        return bool(self.changes) or self.drop_deepspeed

    def shape(self) -> str:
        """What the plan writes, in words."""
        b, k = self.base, self.best
        parts = []
        if (k.micro, k.ga) != (b.micro, b.ga):
            parts.append(f"{k.micro} x {k.ga} (micro-batch x accumulation, {_same_batch_words(b, k)})")
        if k.gc != b.gc:
            parts.append(f"gradient checkpointing {'on' if k.gc else 'off'}")
        if k.packing != b.packing:
            parts.append("neat packing (samples kept apart)" if k.packing else "no packing")
        if k.liger != b.liger:
            parts.append("Liger kernels" if k.liger else "no Liger kernels")
        if k.attn != b.attn:
            parts.append(f"attention {k.attn}")
        if self.drop_deepspeed:
            parts.append("no DeepSpeed")
        if self.deepspeed_stage is not None:
            parts.append(f"ZeRO-{self.deepspeed_stage} (in {self.deepspeed_file})")
        rounded = k.optim == space.SR_OPTIM  # pure bf16 with stochastic rounding: one change, in one phrase
        if k.precision != b.precision and not (rounded and k.precision == "pure_bf16"):
            parts.append(_PRECISION_WORDS.get(k.precision, k.precision))
        if k.optim != b.optim:
            parts.append(f"optimizer {k.optim} ({_OPTIM_NUMERICS.get(k.optim, _OWN_NUMERICS)})")
        if k.packing and not b.packing:
            parts.append(PACKED_STEPS)
        return ", ".join(parts)

    def description(self) -> str:
        peak = f", estimated peak {self.est_gib:.0f} GiB per GPU" if self.est_gib is not None else ""
        needs = (
            f"; uses {' and '.join(self.needs)} ({self.environment}; state yours: --environment FILE)"
            if self.needs
            else ""
        )
        quoted = f"; {self.quoted}" if self.quoted else ""
        data = f"; {self.data_words}" if self.data_words else ""
        more = f"; {self.with_packages.words()}" if self.with_packages is not None else ""
        remarks = "".join(f"; {r}" for r in self.remarks)
        return (
            f"Speed plan for {self.hardware.describe()}: {self.shape()} (expected {self.gain:.1f}x, "
            f"{_PRIOR_SOURCE}{data}{peak}){needs}{more}{quoted}{remarks}"
        )


# What packing the plan turns on changes, said where the plan is (issue 45: "same global batch" promised more): a
# row holds several samples, so the rows per step stay and the samples per step do not.
PACKED_STEPS = (
    "with packing more samples per step and fewer steps per epoch, by the packing factor (learning rate and warm-up "
    "settings as written)"
)


def _same_batch_words(base: space.Knobs, best: space.Knobs) -> str:
    """What a new micro-batch x accumulation keeps: the global batch, in rows once the plan packs them."""
    return "same rows per step" if best.packing and not base.packing else "same global batch"


class WithPackages:
    """The plan the job would get with the packages its environment lacks: what they are, and its gain over the
    plan made (or over the config as written, where no plan fits without them)."""

    def __init__(self, packages: list[str], plan: SpeedPlan, gain: float, source: str, planned: bool) -> None:
        self.packages, self.plan, self.gain, self.source, self.planned = packages, plan, gain, source, planned

    def words(self, where: str | None = None) -> str:
        """In words; `where`: how to name the environment's source ("this file" on the requirement file itself)."""
        names = " and ".join(self.packages)
        than = "this plan" if self.planned else "the config as written"
        return (
            f"with {names} (not in {where or self.source}) the plan would be {self.plan.shape()}, expected "
            f"{self.gain:.2f}x {than}"
        )


class StoppedJob(SpeedPlan):
    """No plan: the job's environment stops it at start-up, so no speed-up is real; `why` says how, in one line."""

    def __init__(self, plan: SpeedPlan, why: str) -> None:
        super().__init__(plan.hardware, plan.base, plan.base, 1.0)
        self.why = why
