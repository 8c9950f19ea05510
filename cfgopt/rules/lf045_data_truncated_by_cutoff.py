from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.data import TRIGGERS, counted, measured
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, report
from cfgopt.text.diagnostics import Diagnostic, Severity

# Below this share a few long outliers are cut, which is what cutoff_len is for.
TRUNCATED_SHARE = 0.05


class DataTruncatedByCutoff(Rule):
    code = "LF045"
    name = "data-truncated-by-cutoff"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = TRIGGERS
    summary = "`cutoff_len` cuts a large share of the local dataset's samples: the run trains on truncated answers"
    why = (
        "Confidence: measured on the job's own data (a seeded sample; tokens counted by the model's tokenizer.json "
        "when local, else estimated, the error stated; the chat template as a fixed allowance per turn, not "
        "rendered, as the message says). LLaMA-Factory cuts every sample to `cutoff_len` tokens "
        "without a word: per turn, `infer_seqlen` keeps the shorter side whole when it fits in half the budget and "
        "cuts the other, else cuts both in proportion. With `train_on_prompt` off only the response carries "
        "labels, so a cut response teaches the model to stop mid-answer; a cut prompt loses context."
    )
    fails_when = "Never fails: trains on samples cut short (a silently different result)."
    evidence = (
        "llamafactory 0.9.5 data/processor/processor_utils.py L76-88 (`infer_seqlen`)",
        "llamafactory 0.9.5 data/processor/supervised.py L72-81, pairwise.py L58-59",
    )
    example = "cutoff_len: 512   (63% of samples longer)  ->  cutoff_len: 2048"
    fix_safety = "No fix: a longer cutoff costs memory and time; the user picks the length."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        found = measured(ctx)
        if found is None or ctx.job.value("stage") == "pt":  # pre-training cuts text into blocks on purpose
            return
        profile, cutoff, job = found
        from cfgopt.job.data_lengths import lengths, percentile

        shares = lengths(profile, cutoff)
        if shares.truncated < TRUNCATED_SHARE:
            return
        full = sorted(s.length for s in profile.samples)
        needed = percentile(full, 1 - TRUNCATED_SHARE)
        labels = "prompt and response" if job.on("train_on_prompt") else "response"
        yield report(
            self,
            ctx,
            ("cutoff_len",),
            f"`cutoff_len: {cutoff}` cuts {shares.truncated:.0%} of the samples of {profile.describe()}: responses "
            f"in {shares.response_cut:.0%}, prompts in {shares.prompt_cut:.0%} (the {labels} carries the labels); "
            f"lengths p50 {shares.percentiles['p50']}, p90 {shares.percentiles['p90']}, max "
            f"{shares.percentiles['max']} tokens; cutoff_len {needed} keeps {1 - TRUNCATED_SHARE:.0%} whole "
            f"({counted(profile)})",
        )
