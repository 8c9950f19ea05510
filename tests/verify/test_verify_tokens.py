"""verify counts the tokens it runs from each batch's structure, drops warm-up steps, and refuses a figure that
cannot be true (issue 41: a neat-packed run under SDPA printed 27,928,027 tokens/s and an MFU of 90,726%)."""

from __future__ import annotations

import json

import pytest
from llamafactory_child import LlamaFactoryChild
from verify_runs import VerifyRun

from cfgopt.verify import comparison
from cfgopt.verify.tokens import count_batch, real_tokens, step_capacity

torch = pytest.importorskip("torch")

IGNORE = -100
MIN = torch.finfo(torch.bfloat16).min


def _labels(ids: torch.Tensor, real_per_row: list[int], prompt: int = 1) -> torch.Tensor:
    """Right-padded labels: the prompt's first token(s) ignored, the answer trained on, the padding ignored."""
    labels = ids.clone()
    for row, real in enumerate(real_per_row):
        labels[row, :prompt] = IGNORE
        labels[row, real:] = IGNORE
    return labels


def _right_padded(real_per_row: list[int], width: int) -> dict[str, torch.Tensor]:
    ids = torch.arange(1, len(real_per_row) * width + 1).reshape(len(real_per_row), width)
    mask = torch.zeros_like(ids)
    for row, real in enumerate(real_per_row):
        mask[row, :real] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": _labels(ids, real_per_row)}


def test_plain_sft_batch_counts_the_mask_ones() -> None:
    batch = _right_padded([5, 3], 8)
    counted = count_batch(batch)
    assert (counted.real, counted.padded, counted.sequences) == (8, 16, 2)
    assert counted.supervised == (5 - 1) + (3 - 1)


def test_pairwise_batch_counts_chosen_and_rejected_rows() -> None:
    """The pairwise collator stacks 2 chosen rows, then 2 rejected rows: 4 sequences, all real tokens."""
    counted = count_batch(_right_padded([6, 4, 5, 2], 8))
    assert (counted.sequences, counted.real, counted.padded) == (4, 17, 32)


def test_kto_batch_leaves_the_kl_inputs_out() -> None:
    batch = _right_padded([6, 4], 8)
    kl = _right_padded([8, 8], 8)
    batch.update(kl_input_ids=kl["input_ids"], kl_attention_mask=kl["attention_mask"], kl_labels=kl["labels"])
    assert count_batch(batch).real == 10


def test_neat_packing_index_mask_counts_every_segment() -> None:
    """fa2 without the unpadding (the mask kept): segment indices 1, 2, 3 .. and 0 for padding."""
    mask = torch.tensor([[1, 1, 2, 2, 2, 3, 0, 0], [1, 1, 1, 1, 2, 2, 2, 0]])
    ids = torch.ones_like(mask)
    assert real_tokens({"input_ids": ids, "attention_mask": mask}) == 6 + 7


def test_plain_packing_pad_is_found_by_its_position_ids() -> None:
    """Plain packing pads with mask 1 and position id 0: the trailing run of zeros is the padding."""
    positions = torch.tensor([[0, 1, 2, 0, 1, 0, 0, 0], [0, 1, 2, 3, 4, 5, 6, 7]])
    ids = torch.ones_like(positions)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": positions}
    assert real_tokens(batch) == 5 + 8


def test_a_4d_block_mask_counts_its_diagonal_not_its_entries() -> None:
    """The bug: summing (mask != 0) of a 4D mask counts bsz x seq x seq entries."""
    attend = torch.tensor([[True, False, False], [True, True, False], [False, False, False]])
    float_mask = torch.where(attend, torch.tensor(0.0), torch.tensor(MIN)).expand(2, 1, 3, 3)
    ids = torch.ones(2, 3, dtype=torch.long)
    assert real_tokens({"input_ids": ids, "attention_mask": float_mask}) == 4
    assert int((float_mask != 0).sum()) == 2 * 6  # what the old count said: the masked entries
    assert real_tokens({"input_ids": ids, "attention_mask": attend.expand(2, 1, 3, 3)}) == 4


def test_no_mask_counts_position_ids_then_labels_then_ids() -> None:
    ids = torch.ones(1, 6, dtype=torch.long)
    assert real_tokens({"input_ids": ids, "position_ids": torch.tensor([[0, 1, 0, 1, 2, 0]])}) == 5
    assert real_tokens({"input_ids": ids, "labels": torch.tensor([[IGNORE, 5, 5, IGNORE, IGNORE, IGNORE]])}) == 3
    assert real_tokens({"input_ids": ids}) == 6


def test_never_more_than_the_ids() -> None:
    ids = torch.ones(1, 3, dtype=torch.long)
    wide = torch.ones(1, 1, 5, 5, dtype=torch.long)  # a 1 / 0 mask wider than the ids: attends everywhere
    assert real_tokens({"input_ids": ids, "attention_mask": wide}) == 3


# Run in the session's LLaMA-Factory child (tests/support/llamafactory_child.py: the worker's placeholder for
# torchaudio, this process's modules as they are): the masks built by LLaMA-Factory's own code.
_LLAMAFACTORY_MASKS = """
import json, torch
from llamafactory.data.collator import SFTDataCollatorWith4DAttentionMask, prepare_4d_attention_mask
from cfgopt.verify.tokens import real_tokens, count_batch
index = torch.tensor([[1, 1, 2, 2, 2, 3, 3, 0], [1, 1, 1, 1, 1, 1, 2, 0]])
ids = torch.arange(16).reshape(2, 8) + 1
out = {"index": real_tokens({"input_ids": ids, "attention_mask": index})}
for dtype in (torch.bfloat16, torch.float32):
    mask = prepare_4d_attention_mask(index, dtype)
    out[str(dtype)] = {"real": real_tokens({"input_ids": ids, "attention_mask": mask}),
                       "summed": int((mask != 0).sum()), "padded": count_batch({"input_ids": ids}).padded}
fa2 = {"input_ids": ids[:1].clone(), "attention_mask": index[:1].clone(),
       "position_ids": torch.tensor([[0, 1, 0, 1, 2, 0, 1, 0]]), "labels": ids[:1].clone()}
SFTDataCollatorWith4DAttentionMask._unpad_packed_features(fa2)  # fa2 neat packing: padding cut out
fa2["attention_mask"] = None  # as the collator then sets it
out["fa2"] = {"real": real_tokens(fa2), "numel": int(fa2["input_ids"].numel())}
print(json.dumps(out))
"""


def test_llamafactory_neat_packing_masks_are_counted_right(llamafactory_child: LlamaFactoryChild) -> None:
    done = llamafactory_child.run(_LLAMAFACTORY_MASKS)
    if done.returncode != 0 and "No module named 'llamafactory'" in done.stderr:
        pytest.skip("llamafactory (the oracle extra) is not installed")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["index"] == 7 + 7
    for dtype in ("torch.bfloat16", "torch.float32"):
        assert out[dtype]["real"] == 14 <= out[dtype]["padded"] < out[dtype]["summed"]
    assert out["fa2"] == {"real": 7, "numel": 7}


def _steps(seconds: list[float], real: int = 4000, padded: int = 4096) -> list[dict]:
    return [
        {"step": i, "seconds": s, "real_tokens": real, "padded_tokens": padded, "supervised_tokens": real // 2}
        for i, s in enumerate(seconds, 1)
    ]


def test_warmup_steps_are_the_slow_leading_ones() -> None:
    assert comparison.warmup_steps([6.6, 4.5, 2.5, 2.4, 2.5, 2.6, 2.5, 2.4]) == 2
    assert comparison.warmup_steps([2.9, 2.5, 2.5, 2.4, 2.5, 2.6]) == 1  # at least one
    assert comparison.warmup_steps([9.0] * 3 + [1.0] * 3) == 3  # at most half
    assert comparison.warmup_steps([9.0, 1.0]) == 1 and comparison.warmup_steps([1.0]) == 0


def test_two_runs_with_different_warmups_agree() -> None:
    """The issue's two DPO runs: 6.6 s / 4.5 s vs 2.9 s / 2.5 s for steps 1-2, the same steady steps after."""
    steady = [2.5, 2.45, 2.55, 2.5, 2.48, 2.52]
    slow = comparison.summarize({"steps": _steps([6.6, 4.5, *steady])})
    quick = comparison.summarize({"steps": _steps([2.9, 2.5, *steady])})
    assert slow["warmup_steps_excluded"] == 2 and quick["warmup_steps_excluded"] == 1
    assert slow["real_tokens_per_s"] == pytest.approx(quick["real_tokens_per_s"], rel=0.05)
    assert slow["real_tokens_per_s"] == pytest.approx(4000 / slow["median_step_s"], rel=0.05)
    assert "warm-up steps excluded" in comparison.table(slow, quick, comparison.compare(slow, quick))


def test_an_mfu_over_100_percent_is_refused() -> None:
    metrics = {"steps": _steps([1.0] * 8), "parameters": 8e9, "trainable_parameters": 8e9, "peak_tflops": 100.0}
    summary = comparison.summarize(metrics)
    assert "over 100%" in summary["cannot_measure"]
    assert summary.get("mfu") is None and summary.get("real_tokens_per_s") is None
    good = comparison.summarize({"steps": _steps([1.0] * 8)})
    verdict = comparison.compare(good, summary)
    assert verdict["status"] == "cannot compare speed" and "speedup" not in verdict
    text = comparison.table(good, summary, verdict)
    assert "fixed run: cannot measure: MFU" in text and "cannot compare speed" in text
    assert "%" not in text.split("MFU", 1)[1].split("\n", 1)[0]  # the MFU row prints no figure


def test_more_tokens_than_the_step_holds_is_refused() -> None:
    # the count: a 2 x 1 step of 4,096 tokens at cutoff 2048 counted as 8,066,171
    capacity = step_capacity(2, 1, 1, 2048)
    assert capacity == 4096
    summary = comparison.summarize(
        {"steps": _steps([1.0] * 8, real=8_066_171, padded=10**7), "capacity_tokens_per_step": capacity}
    )
    assert "more than micro-batch x accumulation x rows x cutoff = 4,096" in summary["cannot_measure"]
    assert summary.get("real_tokens_per_s") is None
    over_ids = comparison.summarize({"steps": _steps([1.0] * 8, real=5000, padded=4096)})
    assert "more than the 4,096 it ran" in over_ids["cannot_measure"]
    no_time = comparison.summarize({"steps": _steps([1.0] * 4 + [0.0] * 4)})
    assert "the clock went wrong" in no_time["cannot_measure"] and no_time.get("median_step_s") is None
    in_warmup = _steps([5.0] + [1.0] * 7)
    in_warmup[0]["real_tokens"] = 10**6  # excluded from the figure, still a counting bug
    assert "step 1 counted 1,000,000" in comparison.summarize({"steps": in_warmup})["cannot_measure"]
    assert json.loads(comparison.to_json(summary, over_ids, comparison.compare(summary, over_ids), {}))


def test_a_short_run_says_its_figure_is_rough() -> None:
    summary = comparison.summarize({"steps": _steps([3.0, 1.0, 1.0, 1.0])})
    assert summary["steps_measured"] == 3 and any("only 3 steady steps" in n for n in summary["notes"])


def test_capacity_counts_pairwise_rows_and_the_collators_padding() -> None:
    assert step_capacity(4, 2, 2, 1024) == 4 * 2 * 2 * 1024
    assert step_capacity(1, 1, 1, 1001) == 1008  # pad_to_multiple_of=8


@pytest.mark.oracle
def test_a_neat_packed_cpu_run_counts_no_more_than_it_ran(neat_packed_fix_run: VerifyRun) -> None:
    """The real trainer on the CPU: neat packing under SDPA hands the trainer LLaMA-Factory's 4D block mask. The
    run is the fixed side of tests/verify/conftest.py's (shared with test_verify.py's smoke run): the job with
    neat packing and 2 rows of 256 a step, its `flash_attn: true` fixed to sdpa and nothing else changed."""
    proc, data = neat_packed_fix_run.proc, neat_packed_fix_run.report
    assert [fix.split()[0] for fix in data["fixes"]] == ["LF003"], data["fixes"]  # the job as written, but sdpa
    fixed = data["fixed"]
    assert fixed.get("error") is None and "cannot_measure" not in fixed, proc.stderr[-3000:]
    assert fixed["attn_implementation"] == "sdpa" and fixed["warmup_steps_excluded"] == 1
    for step in data["per_step"]["fixed"]:
        # 2 packed rows of 256: the old count summed the 4D mask (about 2 x 256 x 256 / 2)
        assert 0 < step["real_tokens"] <= step["padded_tokens"] <= 2 * 256
    assert fixed["real_tokens_per_s"] > 0


def test_one_slow_steady_step_moves_the_figure_little() -> None:
    """Another process on the machine slows one step: tokens/s stays tokens per step over the median step."""
    summary = comparison.summarize({"steps": _steps([3.0, 1.0, 1.0, 1.02, 4.0, 0.98, 1.0, 1.01])})
    assert summary["warmup_steps_excluded"] == 1
    assert summary["real_tokens_per_s"] == pytest.approx(4000 / summary["median_step_s"])
    assert summary["real_tokens_per_s"] == pytest.approx(4000, rel=0.05)
