"""The tokens one micro-batch trains on, counted from the batch's structure (never by summing its mask).

LLaMA-Factory 0.9.5's collators (`llamafactory/data/collator.py`) hand the trainer one of these:

- unpacked (sft, pt, kto; pairwise: the chosen rows, then the rejected ones): a 2D mask of 1 / 0, 0 is padding;
- `neat_packing`: the packer's mask holds segment indices 1, 2, 3 .., 0 is padding (counted as such where a
  batch carries it); the SFT collator turns it into
  - with sdpa / eager (also `fa2` where flash-attn is not installed: the model falls back to sdpa), a 4D mask
    (`prepare_4d_attention_mask`, bsz x 1 x seq x seq), 0.0 where a query attends, dtype-min where masked; a
    padding position's query row attends to nothing;
  - with flash-attn 2 (bsz 1), no mask, the padding cut out (`_unpad_packed_features`);
- plain `packing`: a 2D mask of all 1, the pad too ("more efficient flash_attn"); the pad is the trailing run
  of position ids 0.

Summing a 4D mask counts bsz x seq x seq entries (about 8 million for 2 rows of 2,048), which is how verify
once printed an MFU of 90,726%. KTO's `kl_*` inputs (run forward without a gradient) are not counted.
This module only calls tensor methods: it imports nothing heavy and runs on the CPU with tiny tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

IGNORE_INDEX = -100  # LLaMA-Factory's label of a token not trained on (prompt, padding)


@dataclass
class BatchTokens:
    """What one micro-batch holds: rows of input_ids, real (non-padding) tokens, all positions, supervised."""

    sequences: int = 0
    real: int = 0
    padded: int = 0
    supervised: int = 0


def _trailing_run(row: Any, value: int) -> int:
    """How many entries at the end of a 1D tensor equal `value`."""
    values = row.tolist()
    count = 0
    for item in reversed(values):
        if item != value:
            break
        count += 1
    return count


def _rows_2d(tensor: Any, ids: Any) -> bool:
    return tensor is not None and tensor.dim() == 2 and tuple(tensor.shape) == tuple(ids.shape)


def _from_4d_mask(mask: Any) -> int:
    """A block mask: a real token's query row attends at least to itself (causal, same segment), a padding row
    to nothing, so the diagonal says which positions are real. A float mask attends where it is 0 (LLaMA-Factory,
    HF's additive masks); a bool or integer mask where it is True / non-zero."""
    diagonal = mask[:, 0].diagonal(dim1=-2, dim2=-1)  # (bsz, seq); every head has the same mask
    attends = diagonal == 0 if diagonal.is_floating_point() else diagonal != 0
    return int(attends.sum())


def _from_positions(position_ids: Any) -> int:
    """Packed rows restart their position ids at 0 for each sequence, and LLaMA-Factory pads a packed row with
    position id 0 (`processor/supervised.py`): the trailing run of zeros is padding. (A last sequence of one
    token is counted as padding: at most one token a row.)"""
    total = 0
    for row in position_ids:
        total += int(row.numel()) - _trailing_run(row, 0)
    return total


def _from_labels(labels: Any) -> int:
    """Rows padded on the right, whose sequences end with a trained token (the answer's end): the trailing run
    of ignored labels is padding. A row with no trained token is counted whole (nothing says where it ends)."""
    total = 0
    for row in labels:
        run = _trailing_run(row, IGNORE_INDEX)
        total += int(row.numel()) - (run if run < row.numel() else 0)
    return total


def _from_2d_mask(mask: Any, position_ids: Any) -> int:
    """0 / 1 or segment indices: non-zero is real. A row whose mask marks no padding at all is a plain-packed
    row (its pad is 1 too): its position ids say where the padding starts."""
    total = 0
    for index, row in enumerate(mask):
        nonzero = int((row != 0).sum())
        if nonzero == row.numel() and position_ids is not None:
            total += _from_positions(position_ids[index : index + 1])
        else:
            total += nonzero
    return total


def real_tokens(inputs: dict[str, Any]) -> int:
    """The real (non-padding) tokens of one micro-batch, by its structure; never more than its input_ids."""
    ids = inputs.get("input_ids")
    if ids is None:
        return 0
    numel = int(ids.numel())
    mask = inputs.get("attention_mask")
    position_ids = inputs.get("position_ids")
    position_ids = position_ids if _rows_2d(position_ids, ids) else None  # mrope's 3D ids are not rows
    labels = inputs.get("labels")
    if mask is not None and mask.dim() == 4:
        real = _from_4d_mask(mask)
    elif mask is not None and _rows_2d(mask, ids):
        real = _from_2d_mask(mask, position_ids)
    elif position_ids is not None:
        real = _from_positions(position_ids)
    elif _rows_2d(labels, ids):
        real = _from_labels(labels)
    else:
        real = numel
    return min(real, numel)


def count_batch(inputs: dict[str, Any]) -> BatchTokens:
    """One micro-batch as the worker records it. `sequences` counts rows: two a sample in the pairwise stages
    (the collator stacks the chosen rows, then the rejected ones), one elsewhere."""
    ids = inputs.get("input_ids")
    labels = inputs.get("labels")
    counted = BatchTokens()
    if ids is not None:
        counted.padded = int(ids.numel())
        counted.sequences = int(ids.shape[0]) if ids.dim() > 1 else 1
        counted.real = real_tokens(inputs)
    if labels is not None:
        counted.supervised = int((labels != IGNORE_INDEX).sum())
    return counted


def row_capacity(cutoff_len: int) -> int:
    """The longest row LLaMA-Factory builds at this cutoff: sequences are cut to `cutoff_len` (a packed row is
    exactly `cutoff_len`: `data_args` lowers it by one, the packer pads one back) and the SFT collator pads to a
    multiple of 8 (`pad_to_multiple_of=8`)."""
    return -(-cutoff_len // 8) * 8


def step_capacity(micro_batch: int, accumulation: int, rows_per_sample: int, cutoff_len: int) -> int:
    """The most tokens one optimizer step of one process can hold: micro-batch x accumulation x rows x row."""
    return micro_batch * accumulation * rows_per_sample * row_capacity(cutoff_len)
