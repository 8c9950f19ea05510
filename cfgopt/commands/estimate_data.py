"""`cfgopt estimate --data / --plot`: the job's local data profile (cfgopt.job.data_profile) as `estimate` prints
it, and the sequence length the memory estimate takes from it.

The memory peak is the longest micro-batch of the run, which holds the dataset's longest sample (cut at
`cutoff_len`); so without packing the estimate's `fill` is that sample's share of `cutoff_len`, not the
average batch's. With packing, packs fill `cutoff_len` and nothing changes. Without local data the output says
that every sequence is assumed `cutoff_len` tokens long.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from cfgopt.job.data_profile import DataProfile, NotLocal
from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def data_of(job: Any) -> DataProfile | NotLocal | None:
    return job.data_profile


def _cutoff(job: Any) -> int:
    cutoff = job.value("cutoff_len")
    return cutoff if is_int(cutoff) and cutoff > 0 else 1


def lines(
    data: DataProfile | NotLocal | None, job: Any, fill: float | None, full: bool, given: bool = False
) -> list[str]:
    """The `data:` lines of `estimate`; `given`: the fill came from `--fill`, not from the profile."""
    cutoff = _cutoff(job)
    if not isinstance(data, DataProfile) or not data.samples:
        why = data.reason if isinstance(data, NotLocal) else "no local rows" if data else "no `dataset`"
        return [f"data: not profiled ({why}): sequences assumed cutoff_len ({cutoff}) tokens long"]
    from cfgopt.job.data_lengths import summary

    s = summary(data, cutoff, job.value("per_device_train_batch_size"))
    longest = f"longest sample {s['longest_after_cut']} tokens"
    if job.packing:
        used = "the packed to cutoff_len"
    elif given and fill is not None:
        used = f"--fill {fill:.2f} ({round(fill * cutoff)} tokens; the profile's {longest})"
    else:
        used = f"the {longest} (fill {fill:.2f})"
    out = [f"data: {data.describe()}; memory sized by {used}"]
    if full:
        t = s["tokens"]
        out += [
            f"  tokens per sample: p50 {t['p50']}, p90 {t['p90']}, p99 {t['p99']}, max {t['max']} "
            f"(prompt p50 {t['prompt_p50']}, response p50 {t['response_p50']})",
            f"  cutoff_len {cutoff}: {s['truncated_share']:.1%} of samples cut (responses {s['response_cut_share']:.1%}"
            f", prompts {s['prompt_cut_share']:.1%})",
            f"  padding at micro-batch {s['micro_batch']} without packing: {s['padding_share']:.1%} of tokens "
            f"(longest per micro-batch {s['expected_longest_per_micro_batch']} on average)",
            f"  {data.counting}",
        ]
        out += [f"  problem: {p}" for p in data.problems]
    return out


def as_dict(data: DataProfile | NotLocal | None, job: Any, fill: float | None) -> dict[str, Any] | None:
    if isinstance(data, NotLocal):
        return {"profiled": False, "reason": data.reason, "assumed_sequence": _cutoff(job)}
    if not isinstance(data, DataProfile) or not data.samples:
        return {"profiled": False, "reason": "no local rows", "assumed_sequence": _cutoff(job)}
    from cfgopt.job.data_lengths import summary

    return {"profiled": True, "fill": fill, **summary(data, _cutoff(job), job.value("per_device_train_batch_size"))}


def plot(data: DataProfile | NotLocal | None, job: Any, path: Path) -> bool:
    """Write a histogram of sample lengths with cutoff_len marked; False (with a message) when it cannot."""
    if not isinstance(data, DataProfile) or not data.samples:
        sys.stderr.write("cfgopt estimate: --plot: the job's dataset is not local: nothing to plot\n")
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("cfgopt estimate: --plot needs matplotlib (pip install matplotlib)\n")
        return False
    cutoff = _cutoff(job)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist([s.length for s in data.samples], bins=50, color="#4c72b0")
    ax.axvline(cutoff, color="#c44e52", linestyle="--", label=f"cutoff_len {cutoff}")
    ax.set_xlabel("tokens per sample (prompt + response)")
    ax.set_ylabel("samples")
    ax.set_title(data.describe())
    ax.legend()
    from cfgopt.text.document import shown
    from cfgopt.text.writer import write_new

    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=100, bbox_inches="tight")
        write_new(path, png.getvalue())  # never through a link at the name (`out.png -> ~/.bashrc`)
    except OSError as exc:
        sys.stderr.write(shown(f"cfgopt estimate: --plot: {exc}") + "\n")
        return False
    finally:
        plt.close(fig)
    return True
