"""The search of `cfgopt tune`: memory pruning, ranking by a speed prior, runs best first within a budget,
out-of-memory neighbour pruning, early stop, and the per-config result cache that makes it resumable.

Nothing here launches anything: `search()` is given a `measure(candidate) -> Measurement` callable (the real
one wraps `cfgopt.verify.runner.run_config`; the tests pass a fake that stands in for timing) and a
`fits(resolved_config) -> (bool, estimated_peak_gib | None)` callable (the memory model, or "no model").

The speed prior (docs/tune.md) multiplies one factor per knob, each taken from the H200 measurements in
bench/h200/measurements.md (8B-shaped LoRA SFT, Alpaca-like lengths, cutoff 2048):
  - micro batch m: m ** 0.2 unpacked (16x1 vs 4x4 was 1.33x = 4 ** 0.2), m ** 0.05 packed (8x2 vs 4x4 1.035x),
    m ** 0.69 in DPO (Qwen3-4B LoRA DPO), m ** 0.35 in KTO (Llama-3.2-3B LoRA KTO; both cfgopt/plan/priors.py)
  - gradient checkpointing off: 1.37x (V10 vs V7; measured 1.14-1.51x over the H200 runs), 1.175x in KTO (derived
    from it: KTO's forwards without gradients are not recomputed; measured 1.17x; cfgopt/plan/priors.py)
  - packing: 2.9x (V6 vs V5, both 16x1)
  - Liger kernels: 1.196x (V7 vs V6)
  - attention: sdpa 1.0, fa2 1.03 (not measured: a small prior edge), eager 0.97 (no measured difference at
    Alpaca lengths; ranked after sdpa because it is slower on long sequences); in KTO up to cutoff 2048 eager
    1.10, fa2 level with it (eager 1.06-1.25x SDPA in seven runs; cfgopt/plan/priors.py)
  - ZeRO on one GPU: none 1.0, ZeRO-3 0.225 (V2 vs V4), ZeRO-3 + offload 0.206 (V3 vs V4); on several GPUs
    unmeasured guesses: DDP 1.0, ZeRO-1 and ZeRO-2 0.95, ZeRO-3 0.8, ZeRO-2 offload 0.5,
    ZeRO-3 optimizer offload 0.42, ZeRO-3 offload 0.3 (cfgopt/plan/priors.py)
Ties go to the smaller estimated peak, then to fewer changes from the user's config. After every measured run
the prior is corrected by what was measured (`Corrections`: one fitted factor per knob value) and the queue is
re-ranked, so a prior that is wrong on this machine or data set stops steering the search after a run or two.
"""

from __future__ import annotations

import importlib
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cfgopt.knowledge import methods
from cfgopt.plan import reasons
from cfgopt.plan.priors import PRIORS, Rank, prior_speed, rank  # noqa: F401  (PRIORS re-exported)
from cfgopt.plan.space import KNOB_NAMES, Knobs
from cfgopt.text.user_text import is_number
from cfgopt.text.writer import write_new

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Fits = Callable[[dict[str, Any]], "tuple[bool, float | None]"]  # a candidate's values -> fits, its peak GiB

OOM_MARKERS = ("out of memory", "outofmemoryerror", "cuda error: out of memory", "hip out of memory")


def is_oom(text: str | None) -> bool:
    low = (text or "").lower()
    return any(m in low for m in OOM_MARKERS)


def hungrier_or_equal(d: Knobs, c: Knobs) -> bool:
    """Does `d` need at least the memory of `c`? Same attention, packing, ZeRO, precision and optimizer; micro
    batch at least as large; checkpointing off where `c` has it off; Liger off where `c` has it off (Liger saves
    memory)."""
    return (
        d.attn == c.attn
        and d.packing == c.packing
        and d.zero == c.zero
        and d.precision == c.precision
        and d.optim == c.optim
        and d.micro >= c.micro
        and (d.gc == c.gc or (c.gc and not d.gc))
        and (d.liger == c.liger or (c.liger and not d.liger))
    )


@dataclass
class Measurement:
    tokens_per_s: float | None = None
    peak_gib: float | None = None  # max allocated
    reserved_gib: float | None = None
    wall_s: float = 0.0  # seconds the run took, start-up included: what the search pays
    error: str | None = None
    device: str | None = None
    steps_measured: int = 0

    @property
    def oom(self) -> bool:
        return is_oom(self.error)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Candidate:
    index: int
    knobs: Knobs
    config: dict[str, Any]  # what the runner gets (`deepspeed` a path)
    resolved: dict[str, Any]  # what the memory model sees (`deepspeed` inlined as a dict)
    key: str  # cache key: the hash of the resolved config, steps, GPUs and device
    baseline: bool = False
    planned: bool = False  # the speed plan `cfgopt fix` writes: run first after the baseline
    prior: float = 1.0
    est_peak_gib: float | None = None


MEASURED, OOM, CRASHED = "measured", "oom", "crashed"
PRUNED_MEMORY, PRUNED_OOM = f"pruned: {reasons.MEMORY}", "pruned: OOM neighbour"
NOT_RUN_BUDGET, NOT_RUN_PATIENCE = "not run: budget", "not run: patience"


@dataclass
class Row:
    candidate: Candidate
    status: str
    measurement: Measurement | None = None
    cached: bool = False
    reason: str = ""
    order: int | None = None  # position in the run order (None: not run)

    @property
    def tokens_per_s(self) -> float | None:
        return self.measurement.tokens_per_s if self.measurement and self.status == MEASURED else None


@dataclass
class SearchResult:
    rows: list[Row]
    baseline: Row
    winner: Row | None
    spent_s: float  # wall seconds of the runs made by this invocation
    search_s: float  # wall seconds of every run the search used, cached ones included (its full cost)
    budget_s: float
    memory_note: str = ""
    stopped: str = ""  # why the search stopped before the end of the ranking, if it did


class ResultCache:
    """Results by config hash in one JSON file, written atomically after every run."""

    VERSION = 1

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            if isinstance(data, dict) and data.get("version") == self.VERSION and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]

    def get(self, key: str) -> tuple[str, Measurement] | None:
        entry = self.entries.get(key)
        if not isinstance(entry, dict) or "measurement" not in entry:
            return None
        return entry.get("status", MEASURED), Measurement.from_json(entry["measurement"])

    def put(self, key: str, knobs: Knobs, status: str, m: Measurement) -> None:
        self.entries[key] = {"knobs": knobs.as_dict(), "status": status, "measurement": m.to_json()}
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        text = json.dumps({"version": self.VERSION, "entries": self.entries}, indent=1, sort_keys=True)
        write_new(self.path, text.encode("utf-8"))  # atomic, never through a link, no temp file left behind


def no_memory_model(_config: dict[str, Any]) -> tuple[bool, float | None]:
    return True, None


def status_of(m: Measurement) -> str:
    if m.error:
        return OOM if m.oom else CRASHED
    return MEASURED if m.tokens_per_s else CRASHED


class Corrections:
    """What the measurements say about the prior: log(measured) = log(prior) + b + sum of one correction per
    knob value, fitted by ridge regression (coordinate descent) with `strength` pulling each correction to 0.
    With one measurement per knob value a correction moves half way to what it implies, so one run that
    shows e.g. Liger slower than its prior demotes every Liger candidate still queued."""

    def __init__(self, strength: float = 1.0, iterations: int = 30) -> None:
        self.strength, self.iterations = strength, iterations
        self.points: list[tuple[list[tuple[str, Any]], float]] = []
        self.delta: dict[tuple[str, Any], float] = {}

    @staticmethod
    def features(k: Knobs) -> list[tuple[str, Any]]:
        return [(name, getattr(k, name)) for name in KNOB_NAMES]

    def predict(self, c: Candidate) -> float:
        return math.log(c.prior) + sum(self.delta.get(f, 0.0) for f in self.features(c.knobs))

    def observe(self, c: Candidate, tokens_per_s: float) -> None:
        if self.strength <= 0 or tokens_per_s <= 0:
            return
        self.points.append((self.features(c.knobs), math.log(tokens_per_s) - math.log(c.prior)))
        feats = {f for fs, _ in self.points for f in fs}
        delta = dict.fromkeys(feats, 0.0)
        for _ in range(self.iterations):
            offset = statistics.fmean(r - sum(delta[f] for f in fs) for fs, r in self.points)
            for f in feats:
                resid = [r - offset - sum(delta[g] for g in fs if g != f) for fs, r in self.points if f in fs]
                delta[f] = sum(resid) / (len(resid) + self.strength)
        self.delta = delta


def search(
    candidates: list[Candidate],
    measure: Callable[[Candidate], Measurement],
    fits: Fits = no_memory_model,
    budget_s: float = 1800.0,
    gpus: int = 1,
    cache: ResultCache | None = None,
    patience: int = 6,
    min_gain: float = 0.03,
    improve: float = 0.01,
    tie: float = 0.01,
    learn: float = 1.0,
    on_event: Callable[[str], None] | None = None,
    memory_note: str = "",
    prior_factor: Callable[[Knobs], float] | None = None,
) -> SearchResult:
    """Run the baseline (candidates[0] or the one marked `baseline`), then the rest best first.

    - memory: every non-baseline candidate that `fits` says will not fit is pruned before any run;
    - ranking: by `prior_speed` (times `prior_factor`: the planner's data term where the runs train on the job's
      own data) corrected by what the runs so far measured (`Corrections`), then the smaller
      estimated peak, then fewer changes from the baseline; re-ranked after every measured run;
    - budget: a run starts only while the run seconds used so far plus the median run stay within `budget_s`;
      cached results count with the seconds they took, so an interrupted search, run again, replays its
      decisions from the cache at no cost and ends where the uninterrupted one would (raise the budget to go on);
    - OOM: a run that runs out of memory prunes every remaining candidate that needs at least as much;
    - patience: after `patience` runs in a row that do not beat the best by `improve`, stop (0: never);
    - confirmation: a baseline measured first and beaten is measured once more, past the budget, and the
      later figure stands (`_first_run_beaten`).
    The winner is the fastest measured run (within `tie` of it, the one with the fewest changes); a change
    wins only if it is `min_gain` faster than the baseline.
    """
    run = _Search(measure, fits, cache or ResultCache(None), on_event or (lambda _line: None), gpus, learn)
    run.prior_factor = prior_factor
    run.budget_s, run.patience, run.improve = budget_s, patience, improve
    rows, base_row = run.run(candidates)
    winner = _winner(rows, base_row, min_gain, tie)
    if _first_run_beaten(base_row, winner):
        run.measure_again(base_row)
        winner = _winner(rows, base_row, min_gain, tie)
    ordered = sorted(
        rows.values(), key=lambda r: (r.order if r.order is not None else 10**9, -r.candidate.prior, r.candidate.index)
    )
    return SearchResult(ordered, base_row, winner, run.spent, run.search_s, budget_s, memory_note, run.stopped)


def _first_run_beaten(base_row: Row, winner: Row | None) -> bool:
    """Was the baseline measured first in this invocation, and did a change beat it? The first run on a machine
    is not like its rivals' (one-time costs such as Triton's kernel cache; on an H200 6,258 tokens/s first and
    8,053 later for the same settings, 5,025 vs 5,972 with a warm-up step; bench/planner/README.md), so a
    verdict to change the config is checked against the baseline measured again."""
    return (
        winner is not None
        and winner is not base_row
        and base_row.status == MEASURED
        and not base_row.cached
        and base_row.order == 0
    )


def _winner(rows: dict[int, Row], base_row: Row, min_gain: float, tie: float) -> Row | None:
    """The fastest measured run; within `tie` of it, the fewest changes from the user's config win (single runs
    are noisy); a change wins only if it is `min_gain` faster than the baseline."""
    base = base_row.candidate
    measured = [r for r in rows.values() if r.tokens_per_s]
    top = max((r.tokens_per_s or 0.0 for r in measured), default=0.0)
    winner = min(
        (r for r in measured if (r.tokens_per_s or 0.0) >= top * (1 - tie)),
        key=lambda r: (len(r.candidate.knobs.changes(base.knobs)), -(r.tokens_per_s or 0.0)),
        default=None,
    )
    if (
        winner is not None
        and base_row.tokens_per_s
        and winner is not base_row
        and (winner.tokens_per_s or 0.0) < base_row.tokens_per_s * (1 + min_gain)
    ):
        return base_row
    return winner


class _Search:
    """One search's state: the rows so far, the learnt corrections, the seconds used, why it stopped."""

    budget_s = 1800.0
    patience = 6
    improve = 0.01
    prior_factor: Callable[[Knobs], float] | None = None

    def __init__(
        self,
        measure: Callable[[Candidate], Measurement],
        fits: Fits,
        cache: ResultCache,
        say: Callable[[str], None],
        gpus: int,
        learn: float,
    ) -> None:
        self.measure, self.fits, self.cache, self.say, self.gpus = measure, fits, cache, say, gpus
        self.model = Corrections(learn)
        self.rows: dict[int, Row] = {}
        self.live: list[Candidate] = []
        self.pruned_by: dict[int, int] = {}  # candidate index -> the OOM run that pruned it
        self.walls: list[float] = []
        self.spent = 0.0  # seconds of runs made now
        self.search_s = 0.0  # seconds of runs, cached ones included
        self.best: float | None = None
        self.since_best = 0
        self.stopped = ""
        self.order = 0
        self.base: Candidate | None = None

    def run(self, candidates: list[Candidate]) -> tuple[dict[int, Row], Row]:
        base = self._prune_by_memory(candidates)
        if base.est_peak_gib is not None and not self.fits(base.resolved)[0]:
            self.say(f"the baseline is estimated not to fit ({base.est_peak_gib:.1f} GiB); measured anyway")
        self.rows[base.index] = base_row = self._run_one(base)
        if base_row.tokens_per_s:
            self.best = base_row.tokens_per_s
            self.model.observe(base, base_row.tokens_per_s)
        queue = sorted(self.live, key=lambda c: (not c.planned, *self._rank(c)))  # the fix's plan first
        while queue:
            self._step(queue.pop(0), queue)
        for row in self.rows.values():
            if row.status == NOT_RUN_PATIENCE:
                row.reason = f"{self.patience} runs in a row gained nothing; stopped early"
        return self.rows, base_row

    def _prune_by_memory(self, candidates: list[Candidate]) -> Candidate:
        """Every candidate's prior and estimated peak; those estimated not to fit pruned. Returns the baseline."""
        base = self.base = next((c for c in candidates if c.baseline), candidates[0])
        base.baseline = True
        for c in candidates:
            c.prior = prior_speed(c.knobs, self.gpus, methods.stage_of(c.resolved), c.resolved.get("cutoff_len"))
            if self.prior_factor is not None:
                c.prior *= self.prior_factor(c.knobs)
            ok, est = self.fits(c.resolved)
            c.est_peak_gib = est
            if c is base:
                continue
            if not ok:
                self.rows[c.index] = Row(c, PRUNED_MEMORY, reason=reasons.does_not_fit(est))
            else:
                self.live.append(c)
        return base

    def _rank(self, c: Candidate) -> Rank:
        assert self.base is not None
        return rank(self.model.predict(c), c.est_peak_gib, len(c.knobs.changes(self.base.knobs)), c.index)

    def _step(self, c: Candidate, queue: list[Candidate]) -> None:
        """The next candidate: pruned, not run (budget, patience) or run; the queue re-ranked on what it taught."""
        if c.index in self.pruned_by:
            self.rows[c.index] = Row(c, PRUNED_OOM, reason=f"#{self.pruned_by[c.index]} ran out of memory with less")
            return
        used = f"{self.search_s:.0f} s of runs used of {self.budget_s:.0f} s"
        if self.stopped:
            status = NOT_RUN_PATIENCE if self.stopped == "patience" else NOT_RUN_BUDGET
            self.rows[c.index] = Row(c, status, reason=used if self.stopped == "budget" else "")
            return
        if self.cache.get(c.key) is None:
            expected = statistics.median(self.walls) if self.walls else 0.0
            if self.search_s + expected > self.budget_s:
                self.stopped = "budget"
                self.rows[c.index] = Row(c, NOT_RUN_BUDGET, reason=used)
                return
        row = self.rows[c.index] = self._run_one(c)
        tps = row.tokens_per_s
        if tps:
            self.model.observe(c, tps)
            queue.sort(key=self._rank)
        if tps and (self.best is None or tps > self.best * (1 + self.improve)):
            self.best, self.since_best = tps, 0
        else:
            self.since_best += 1
        if self.patience and self.since_best >= self.patience:
            self.stopped = "patience"
            self.say(f"stopping: {self.patience} runs in a row without a gain of {self.improve:.0%}")

    def measure_again(self, row: Row) -> None:
        """Measure `row`'s candidate once more, past the budget (the verdict rests on it); the later figure
        stands when it ran, and the cache keeps it."""
        c, first = row.candidate, row.measurement
        self.say(f"#{c.index} {c.knobs.label()}: measured first, beaten; running again ...")
        m = self.measure(c)
        self.spent += m.wall_s
        self.search_s += m.wall_s
        if status_of(m) != MEASURED or first is None:
            self.say(f"#{c.index}: the second run did not finish ({status_of(m)}); the first run's figure stands")
            return
        row.measurement = m
        row.reason = f"measured again after the search (first run {first.tokens_per_s:,.0f} tokens/s)"
        self.cache.put(c.key, c.knobs, MEASURED, m)
        self.say(f"#{c.index}: {_brief(row)}")

    def _run_one(self, c: Candidate) -> Row:
        hit = self.cache.get(c.key)
        if hit is not None:
            status, m = hit
            row = Row(c, status, m, cached=True)
            self.say(f"#{c.index} {c.knobs.label()}: cached ({_brief(row)})")
        else:
            self.say(f"#{c.index} {c.knobs.label()}: running ...")
            m = self.measure(c)
            status = status_of(m)
            row = Row(c, status, m)
            self.spent += m.wall_s
            self.cache.put(c.key, c.knobs, status, m)
            self.say(f"#{c.index}: {_brief(row)}")
        self.search_s += m.wall_s
        self.walls.append(m.wall_s)
        row.order = self.order
        self.order += 1
        if row.status == CRASHED and not row.reason:
            row.reason = (m.error or "crashed").splitlines()[0][:200]
        if row.status == OOM:
            row.reason = "out of memory"
            for other in self.live:
                if (
                    other.index not in self.rows
                    and other.index not in self.pruned_by
                    and hungrier_or_equal(other.knobs, c.knobs)
                ):
                    self.pruned_by[other.index] = c.index
        return row


def _brief(row: Row) -> str:
    m = row.measurement
    if m is None:
        return row.status
    if row.status == MEASURED:
        peak = f", peak {m.peak_gib:.1f} GiB" if m.peak_gib is not None else ""
        return f"{m.tokens_per_s:,.0f} tokens/s{peak}, {m.wall_s:.0f} s"
    return f"{row.status}: {(m.error or '').splitlines()[0][:160] if m.error else ''}"


def _peak_of(estimate: Any) -> float | None:
    """The peak in GiB from whatever the memory model returns (an object, a dict or a number)."""
    if is_number(estimate):
        return float(estimate)
    for name in ("peak_gib", "peak", "total_gib", "total"):
        value = estimate.get(name) if isinstance(estimate, dict) else getattr(estimate, name, None)
        if callable(value):
            value = value()
        if is_number(value):
            return float(value)
    return None


class MemoryFits:
    """The default `fits`: cfgopt.memory.estimate.estimate(config, shape, target, gpus, deepspeed), imported lazily.

    A candidate fits when its estimated peak (`MemoryEstimate.peak_gib`: the allocated peak plus the
    allocator's margin and the runtime) is at most (1 - margin) of the target's memory per GPU, or of the GPU the
    runs go to (`machine`, a probed `Platform`) where that has less: a candidate it cannot hold is not measured
    there (tune on an 80 GB card for a 141 GiB target). Where the model is missing, the shape or the target's
    memory is unknown, or the model cannot estimate a candidate (or flags settings it does not model), nothing is
    pruned (and `note` says so)."""

    def __init__(
        self,
        shape: Any,
        target: Any,
        gpus: int,
        margin: float = 0.10,
        fill: Callable[..., Any] | None = None,
        data_fill: Callable[[dict[str, Any]], float | None] | None = None,
        machine: Any = None,
    ) -> None:
        self.shape, self.target, self.gpus, self.margin = shape, target, gpus, margin
        target_gib = float(getattr(target, "memory_gib", 0) or 0)
        machine_gib = float(getattr(machine, "memory_gib", 0) or 0)
        self.memory_gib = machine_gib if 0 < machine_gib < target_gib else target_gib  # what a run may use
        self.fill = fill  # a candidate's config -> the values LLaMA-Factory sees (the job's defaults filled in)
        # the values -> the share of cutoff_len its longest sequence reaches on the data the runs train on
        # (`Job.data_fill`: measured on the job's local data; None: every sequence padded to cutoff_len)
        self.data_fill = data_fill
        self.estimate: Callable[..., Any] | None = None
        self.failures = 0
        try:
            memory = importlib.import_module("cfgopt.memory.estimate")
        except ImportError:
            self.note = "no memory model: nothing pruned"
            return
        estimate = getattr(memory, "estimate", None)
        if not callable(estimate):
            self.note = "cfgopt.memory.estimate has no estimate(): nothing pruned"
        elif shape is None:
            self.note = "model shape unknown: nothing pruned by memory"
        elif not getattr(target, "memory_gib", 0):
            self.note = f"target {getattr(target, 'name', '?')} has no memory size: nothing pruned by memory"
        else:
            self.estimate = estimate
            where = f"{target.memory_gib:g} GiB on {target.name}"
            if self.memory_gib < target_gib:
                where = (
                    f"{self.memory_gib:.0f} GiB on this machine's {getattr(machine, 'device', 'GPU')}, which has less "
                    f"than the {target.memory_gib:g} GiB of {target.name}: what fits only there is not measured here"
                )
            self.note = f"memory model: pruned above {self.limit_gib:.0f} GiB ({1 - margin:.0%} of {where})"

    def _filled(self, config: dict[str, Any]) -> dict[str, Any]:
        """The candidate as LLaMA-Factory sees it: the memory model knows no default (`cfgopt.job.job.lf_values`,
        with the job's LLaMA-Factory version; the newest snapshot's when no job was given)."""
        if self.fill is not None:
            return self.fill(config)
        from cfgopt.job.job import lf_values
        from cfgopt.knowledge import schema

        return lf_values(config, schema.llamafactory())

    @property
    def limit_gib(self) -> float:
        return (1 - self.margin) * self.memory_gib

    def __call__(self, config: dict[str, Any]) -> tuple[bool, float | None]:
        if self.estimate is None:
            return True, None
        ds = config.get("deepspeed") if isinstance(config.get("deepspeed"), dict) else None
        try:
            values = self._filled(config)
            fill = self.data_fill(values) if self.data_fill is not None else None
            extra = {"fill": fill} if fill is not None else {}
            estimate = self.estimate(values, self.shape, self.target, self.gpus, ds, **extra)
        except Exception:  # noqa: BLE001 - a candidate the model cannot estimate is run, not pruned
            self.failures += 1
            return True, None
        peak = _peak_of(estimate)
        if peak is None:
            return True, None
        if getattr(estimate, "unmodelled", None) or getattr(estimate, "approximate", None):
            # settings outside the model, or counted only roughly (PPO): its figure is shown, nothing is pruned on it
            return True, peak
        return peak <= self.limit_gib, peak
