"""The plan's data term: what padding costs an unpacked candidate on the job's own data.

tune's priors (cfgopt.plan.priors) were measured on one dataset: 4,000 synthetic Alpaca-format rows whose
lengths are lognormal with median 144 and mean 185 tokens, clipped to [25, 1000] (bench/h200/measurements.md,
"Synthetic inputs"). There packing (16 x 1) ran 3.86x the unpacked 4 x 4 (V6 vs V4). On other data an unpacked
micro-batch's real tokens per second differ in two ways, both read from the job's profile
(`cfgopt.job.data_lengths.padding`: batches drawn at random, padded to their longest sample and a multiple of 8):

- the useful share, 1 - the padding share at that micro-batch;
- how well the micro-batch fills the GPU: padded tokens per second grow with the tokens per micro-batch T as
  T / (T + SATURATION_TOKENS), fitted on the same workload (Llama-3-8B LoRA SFT, checkpointing on, one H200):
  V5 unpacked 16 x 1, 7,444 padded tokens per micro-batch at 6,961 padded tokens/s, and V6 packed 16 x 1,
  32,768 at 7,762. The fit puts V4 (4 x 4, 1,278 per micro-batch) 17% above its measured speed: four
  micro-steps per optimizer step cost more than the curve knows.

An unpacked candidate's prior is multiplied by (useful share x fill) on the job's data over the same on the
reference data at its micro-batch; a packed one by the fill of its packs of `cutoff_len` tokens over that of
the reference's packs of 2,048 (packs are full whatever the lengths).
The reference is simulated from its description (seeded): it gives a padding share of 46% at 4 and 65% at 16
where the runs measured 44% and 62%. Only for the stages that pack (pt, sft). Fitted on an 8B model (a
smaller one saturates later); the gain it predicts is not yet checked against a run on other data
(bench/planner/README.md says what is measured).
"""

from __future__ import annotations

import functools
import math

from cfgopt.text.user_text import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.data_lengths import Padding
    from cfgopt.job.data_profile import DataProfile
    from cfgopt.plan.space import Knobs

SATURATION_TOKENS = 1146  # tokens per micro-batch at which the GPU runs at half its packed speed (fit above)
REFERENCE_ROWS = 4000
REFERENCE_MEDIAN, REFERENCE_MEAN, REFERENCE_CLIP = 144, 185, (25, 1000)
REFERENCE_CUTOFF = 2048


def _fill(tokens: float) -> float:
    return tokens / (tokens + SATURATION_TOKENS)


@functools.lru_cache(maxsize=1)
def _reference() -> DataProfile:
    import random  # here: only a plan with packing in question draws the reference data

    from cfgopt.job.data_profile import DataProfile, Sample

    rng = random.Random(0)
    mu = math.log(REFERENCE_MEDIAN)
    sigma = math.sqrt(2 * math.log(REFERENCE_MEAN / REFERENCE_MEDIAN))  # mean = exp(mu + sigma^2 / 2)
    low, high = REFERENCE_CLIP
    lengths = [min(high, max(low, round(rng.lognormvariate(mu, sigma)))) for _ in range(REFERENCE_ROWS)]
    samples = tuple(Sample(((0, n),)) for n in lengths)
    return DataProfile(("reference",), (), "alpaca", False, REFERENCE_ROWS, samples, (), "simulated", True)


@functools.lru_cache(maxsize=64)
def _reference_speed(micro: int) -> float:
    from cfgopt.job.data_lengths import padding

    return _speed(padding(_reference(), REFERENCE_CUTOFF, micro))


def _speed(pad: Padding) -> float:
    """Real tokens per second of an unpacked micro-batch, relative: useful share x how well it fills the GPU."""
    return (1 - pad.share) * _fill(pad.micro_batch * pad.expected_longest)


class DataTerm:
    """The job's profile under its `cutoff_len`: the factor on each candidate's prior, and the words for it."""

    def __init__(self, profile: DataProfile, cutoff: int) -> None:
        self.profile, self.cutoff = profile, cutoff
        self._padding: dict[int, Padding] = {}

    def padding(self, micro: int) -> Padding:
        """The padding measured at `micro` samples per micro-batch (drawn once per micro-batch size)."""
        if micro not in self._padding:
            from cfgopt.job.data_lengths import padding

            self._padding[micro] = padding(self.profile, self.cutoff, micro)
        return self._padding[micro]

    def factor(self, k: Knobs) -> float:
        if k.packing:  # packs of cutoff_len tokens, against the reference's packs of 2048
            return _fill(k.micro * self.cutoff) / _fill(k.micro * REFERENCE_CUTOFF)
        return _speed(self.padding(k.micro)) / _reference_speed(k.micro)

    def words(self, micro: int) -> str:
        share = self.padding(micro).share
        return f"padding measured on {', '.join(self.profile.datasets)}: {share:.0%} at micro-batch {micro}"


def data_term(profile: object, cutoff: object, stage: str) -> DataTerm | None:
    """The data term of a job whose local data is profiled and whose stage packs; None otherwise."""
    from cfgopt.job.data_location import is_profiled
    from cfgopt.knowledge import methods

    usable = positive_int(cutoff) is not None
    if not is_profiled(profile) or not profile.samples or not usable or not methods.packing_applies(stage):
        return None
    return DataTerm(profile, cutoff)  # type: ignore[arg-type]
