"""What DeepSpeed's batch arithmetic says of the GPU count (DS007 on the JSON's own values, XF002 on the values a
LLaMA-Factory config gives it): `train_batch_size == micro x accumulation x GPUs`, deepspeed 0.19.8 runtime/config.py
`_batch_assertion`. Without `--gpus` the advice assumes one GPU; an explicit `train_batch_size` that holds on one
other count only is said, so the output does not contradict itself."""

from __future__ import annotations

from cfgopt.text.user_text import is_number

PLAUSIBLE = range(1, 1025)  # GPU counts, and values an "auto" may be filled with


def pinned_world(train: object, micro: object, accum: object) -> int | None:
    """The one GPU count for which an explicit `train_batch_size` equals micro x accumulation x GPUs, when it is
    not 1 (the count assumed without `--gpus`); None where the values leave the count free or make it 1."""
    if not (is_number(train) and is_number(micro) and is_number(accum)) or not min(train, micro, accum) > 0:
        return None  # NaN too: no count holds
    per_gpu = micro * accum
    try:
        world = train / per_gpu
    except OverflowError:  # 400-digit integers: no GPU count of PLAUSIBLE
        return None
    if not world.is_integer() or world == 1 or int(world) not in PLAUSIBLE or train != per_gpu * int(world):
        return None
    return int(world)


def gpu_count_note(world: int, train: object, micro: object, accum: object) -> str:
    """An info finding's words for a batch that holds on one GPU count only, when no count was given."""
    return (
        f"`train_batch_size` {train} = {micro} x {accum} x {world}: the batch sizes hold only on {world} GPUs "
        f"(DeepSpeed stops on any other count); no GPU count was given and the advice assumes 1 (`--gpus {world}` "
        'judges the job for it; "auto" lets the Trainer fill train_batch_size for any count)'
    )
