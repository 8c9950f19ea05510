"""The speed plan of one job, as the planner (`cfgopt.plan.planner`) makes it: what it changes, what it expects, and
why it left each other candidate out; the plan the job would get with the packages its environment lacks
(`WithPackages`), and the plan a job its environment stops at start-up gets (`StoppedJob`: none)."""

from __future__ import annotations

from cfgopt.plan import space

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from cfgopt.job.job import Hardware
    from cfgopt.plan.reasons import Rejection


class _InWords:
    """A plan's attribute that says in words why the plan is what it is: filled on its first read, by what the
    planner gave `SpeedPlan.explain_later`. A lint reads them only where the plan changes something (the fix's
    description), so a plan that changes nothing costs neither its wording nor the knob values it left out."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, plan: SpeedPlan | None, owner: type | None = None) -> Any:
        if plan is None:
            return self
        _filled(plan)
        return plan.__dict__[self.slot]

    def __set__(self, plan: SpeedPlan, value: Any) -> None:
        _filled(plan)  # as if filled when deferred: a later write stands
        plan.__dict__[self.slot] = value


def _filled(plan: SpeedPlan) -> None:
    fill = plan.__dict__.pop("_fill", None)  # popped first: the fill reads and writes the words itself
    if fill is not None:
        fill(plan)


class SpeedPlan:
    """One job's plan. A plain class rather than a dataclass: the planner runs on the lint path (start-up)."""

    notes = _InWords()
    rejected = _InWords()
    quoted = _InWords()
    data_words = _InWords()
    remarks = _InWords()

    def __init__(self, hardware: Hardware, base: space.Knobs, best: space.Knobs, gain: float) -> None:
        self.hardware, self.base, self.best = hardware, base, best
        self.gain = gain  # prior speed of best / base
        self.est_gib: float | None = None  # the chosen candidate's estimated peak per GPU (None: no estimate)
        self.changes: dict[str, Any] = {}  # YAML keys to set
        self.drop_deepspeed = False
        self.deepspeed_stage: int | None = None  # the ZeRO stage written into the job's DeepSpeed JSON (None: kept)
        self.deepspeed_file = ""  # that JSON's name, as the description says it
        # why the lower stage is not written in the JSON another config reads ("" where it is, or is not planned)
        self.json_kept = ""
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

    def explain_later(self, fill: Callable[[SpeedPlan], None]) -> None:
        """`fill` sets the plan's words (notes, rejected, quoted, data_words, remarks) at the first read or write
        of one: the planner's last step, deferred."""
        self._fill = fill

    @property
    def changed(self) -> bool:
        return self.config_changed or self.deepspeed_stage is not None

    @property
    def config_changed(self) -> bool:
        """Does the plan edit the LLaMA-Factory config itself (not only the DeepSpeed JSON's stage)?"""
        return bool(self.changes) or self.drop_deepspeed


class WithPackages:
    """The plan the job would get with the packages its environment lacks: what they are, and its gain over the
    plan made (or over the config as written, where no plan fits without them)."""

    def __init__(self, packages: list[str], plan: SpeedPlan, gain: float, source: str, planned: bool) -> None:
        self.packages, self.plan, self.gain, self.source, self.planned = packages, plan, gain, source, planned


class StoppedJob(SpeedPlan):
    """No plan: the job's environment stops it at start-up, so no speed-up is real; `why` says how, in one line."""

    def __init__(self, plan: SpeedPlan, why: str) -> None:
        super().__init__(plan.hardware, plan.base, plan.base, 1.0)
        self.why = why
