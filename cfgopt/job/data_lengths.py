"""What `cutoff_len` and the micro-batch do to a measured dataset (`data_profile.DataProfile`), as LLaMA-Factory
0.9.5 tokenizes and batches it:

- truncation: `data/processor/processor_utils.py` `infer_seqlen` (L76-88) per turn, with the budget left by the
  turns before (`supervised.py` L72-81); pairwise data cuts prompt and the longer answer alike (`pairwise.py`
  L58-59). A response cut short is trained on as if the answer ended there (with `train_on_prompt` off only the
  response carries labels, so a cut response loses what the run learns from; a cut prompt loses context);
- padding without packing: the collator pads each micro-batch to its longest sequence, to a multiple of 8
  (`train/sft/workflow.py`: `pad_to_multiple_of=8`), and the sampler shuffles, so batches are drawn at random
  (`PADDING_BATCHES` of them, seeded);
- the peak: the longest micro-batch of the run holds the longest sample (cut at `cutoff_len`); that, not the
  average, is what runs out of memory.
"""

from __future__ import annotations

import math
import random

from cfgopt.job.data_profile import DataProfile, Sample
from cfgopt.job.data_tokens import TEMPLATE_TOKENS, template_allowance
from cfgopt.text.record import Record

PADDING_BATCHES = 2000
PAD_MULTIPLE = 8


def infer_seqlen(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    """llamafactory 0.9.5 data/processor/processor_utils.py L76-88, as written."""
    if target_len * 2 < cutoff_len:
        max_target_len = cutoff_len
    elif source_len * 2 < cutoff_len:
        max_target_len = cutoff_len - source_len
    else:
        max_target_len = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target_len = min(max_target_len, target_len)
    max_source_len = max(cutoff_len - new_target_len, 0)
    return min(max_source_len, source_len), new_target_len


class Cut(Record):
    """One sample after `cutoff_len`: its longest sequence's tokens, and whether the prompt / response lost any."""

    length: int
    prompt_cut: bool
    response_cut: bool


def cut(sample: Sample, cutoff: int) -> Cut:
    if sample.rejected is not None:  # pairwise: one turn, cut by the longer answer
        src, tgt = sample.turns[-1] if sample.turns else (0, 0)
        longer = max(tgt, sample.rejected)
        new_src, new_tgt = infer_seqlen(src, longer, cutoff)
        return Cut(new_src + new_tgt, new_src < src, new_tgt < longer)
    total, prompt_cut, response_cut = 0, False, False
    for src, tgt in sample.turns:
        if total >= cutoff:
            prompt_cut = prompt_cut or src > 0
            response_cut = response_cut or tgt > 0
            continue
        new_src, new_tgt = infer_seqlen(src, tgt, cutoff - total)
        prompt_cut = prompt_cut or new_src < src
        response_cut = response_cut or new_tgt < tgt
        total += new_src + new_tgt
    return Cut(total, prompt_cut, response_cut)


def percentile(values: list[int], share: float) -> int:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


class Lengths(Record):
    """A profile under one `cutoff_len` (sample shares as fractions; lengths in tokens)."""

    cutoff: int
    percentiles: dict[str, int]  # p50, p90, p99 of the sample, and max (of the sample and the largest rows)
    prompt_p50: int
    response_p50: int
    truncated: float
    prompt_cut: float
    response_cut: float
    longest: int  # the longest sample before the cut
    longest_cut: int  # ... and after it: the longest sequence the run makes


def lengths(profile: DataProfile, cutoff: int) -> Lengths:
    samples = profile.samples
    full = [s.length for s in samples]
    cuts = [cut(s, cutoff) for s in samples]
    every = [*samples, *profile.tail]
    longest = max((s.length for s in every), default=0)
    n = max(1, len(samples))
    return Lengths(
        cutoff,
        {"p50": percentile(full, 0.5), "p90": percentile(full, 0.9), "p99": percentile(full, 0.99), "max": longest},
        percentile([s.prompt for s in samples], 0.5),
        percentile([s.response for s in samples], 0.5),
        sum(c.prompt_cut or c.response_cut for c in cuts) / n,
        sum(c.prompt_cut for c in cuts) / n,
        sum(c.response_cut for c in cuts) / n,
        longest,
        min(longest, cutoff),
    )


class Padding(Record):
    """Micro-batches without packing: the share of their tokens that is padding, and the mean of their longest
    sequence (padded to a multiple of 8)."""

    micro_batch: int
    share: float
    expected_longest: float


def _sequences(sample: Sample, cutoff: int) -> list[int]:
    if sample.rejected is None:
        return [cut(sample, cutoff).length]
    src, tgt = sample.turns[-1] if sample.turns else (0, 0)
    new_src, new_tgt = infer_seqlen(src, max(tgt, sample.rejected), cutoff)  # both answers cut to new_tgt
    return [new_src + min(tgt, new_tgt), new_src + min(sample.rejected, new_tgt)]


def padding(profile: DataProfile, cutoff: int, micro_batch: int) -> Padding:
    """Padding at `micro_batch` samples per micro-batch (pairwise: chosen and rejected both, 2 x micro_batch)."""
    per_sample = [_sequences(s, cutoff) for s in profile.samples]
    if not per_sample:
        return Padding(micro_batch, 0.0, 0.0)
    rng = random.Random(0)
    real = padded = longest_sum = 0
    size = max(1, min(micro_batch, len(per_sample)))
    for _ in range(PADDING_BATCHES):
        batch = [seq for sample in rng.sample(per_sample, size) for seq in sample]
        longest = math.ceil(max(batch) / PAD_MULTIPLE) * PAD_MULTIPLE
        real += sum(batch)
        padded += longest * len(batch)
        longest_sum += longest
    return Padding(micro_batch, 1 - real / padded if padded else 0.0, longest_sum / PADDING_BATCHES)


def peak_fill(profile: DataProfile, cutoff: int) -> float | None:
    """The share of `cutoff_len` the run's longest sequence reaches without packing (the memory peak holds the
    longest sample, cut at `cutoff_len`); None for a profile without samples."""
    if not profile.samples or cutoff < 1:
        return None
    return max(1, lengths(profile, cutoff).longest_cut) / cutoff


def summary(profile: DataProfile, cutoff: int, micro_batch: int) -> dict[str, object]:
    """The profile's figures under a config (`estimate --data --format json`, the golden profiles)."""
    measured = lengths(profile, cutoff)
    pad = padding(profile, cutoff, micro_batch)
    return {
        "datasets": list(profile.datasets),
        "files": list(profile.files),
        "formatting": profile.formatting,
        "pairwise": profile.pairwise,
        "rows": profile.rows,
        "sampled_rows": len(profile.samples),
        "tokens_counted": profile.counted_by,
        "template_allowance": {
            "before_response": TEMPLATE_TOKENS[0],
            "after_response": TEMPLATE_TOKENS[1],
            "job_template_rendered": False,
            "said": template_allowance(),
        },
        "tokens": {**measured.percentiles, "prompt_p50": measured.prompt_p50, "response_p50": measured.response_p50},
        "cutoff_len": cutoff,
        "truncated_share": round(measured.truncated, 4),
        "prompt_cut_share": round(measured.prompt_cut, 4),
        "response_cut_share": round(measured.response_cut, 4),
        "longest_after_cut": measured.longest_cut,
        "micro_batch": micro_batch,
        "padding_share": round(pad.share, 4),
        "expected_longest_per_micro_batch": round(pad.expected_longest, 1),
        "problems": [problem.text for problem in profile.problems],
    }
