from __future__ import annotations

import math
from collections.abc import Iterator

from cfgopt.environment.stated import transformers_at_least
from cfgopt.knowledge.requirement_pins import CHECKED
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import consumer_entry
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, training
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import stays_below
from cfgopt.text.user_text import is_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.knowledge.model_shapes import ModelShape

# DeepSpeed's default `offload_param.buffer_size` (runtime/zero/offload_config.py: `pp_int(1e8)` elements)
DEFAULT_BUFFER = 100_000_000
# where the job's transformers is not known and only a fused experts tensor overflows the buffer
UNDER_5 = " under transformers 5 (4.x holds each expert as its own linears; the job states no transformers version)"


def experts_fused(job, shape: ModelShape) -> bool | None:
    """Does the job's transformers hold a mixture of experts' experts as fused 3-D parameters? True under 5.x (or for
    a family fused before it), False where every transformers the job may run is 4.x (its environment's pin, or the
    ranges of the LLaMA-Factory releases judged: 0.9.4 and older), None where it is not known."""
    from cfgopt.knowledge import model_experts  # here, not at import: only a mixture of experts asks (start-up)

    if model_experts.family_of(shape.model_type) in model_experts.FUSED_BEFORE_5:
        return True
    env = job.environment
    if transformers_at_least(env, (5,)):
        return True
    releases = [".".join(v.split(".")[:3]) for v in job.settings.llamafactory_releases]
    ranges = [CHECKED.get(v, {}).get("transformers", "") for v in releases]
    if stays_below(env.packages.get("transformers", ""), (5,)) or (
        ranges and all(stays_below(r, (5,)) for r in ranges)
    ):
        return False
    return None


def _gpus(hardware) -> str:
    """The GPU count judged, in words, saying when it is assumed."""
    count = f"{hardware.gpus} GPU{'s' if hardware.gpus != 1 else ''}"
    return count if hardware.gpus_stated else f"{count} (GPU count assumed; --gpus)"


class NvmeParamBufferTooSmall(Rule):
    code = "XF006"
    name = "nvme-param-buffer-too-small"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"deepspeed"})
    summary = "ZeRO-3 NVMe parameter offload whose swap buffer is smaller than the largest parameter's partition"
    why = (
        "Confidence: certain for the code. With `offload_param.device: nvme`, `zero.Init` gives each parameter's "
        "partition (its elements over the GPUs) a swap buffer of `offload_param.buffer_size` elements (default "
        "1e8) and asserts the partition fits. A Llama-3-8B embedding has 525M elements: its partition is 131M on "
        "4 GPUs, more than the default buffer, so the run stops while the model is built. Judged with the GPU count "
        "and the model's shape (the largest of the embedding, the MLP and attention projections, and a mixture of "
        "experts' fused `gate_up_proj`, experts x 2 x moe width x hidden: 940M elements in Mixtral-8x7B, 7.5B in "
        "DeepSeek-V3, as transformers 5 builds it; transformers 4 held most families' experts as one linear each, "
        "so where the job's transformers is not known and only the fused tensor overflows, a warning)."
    )
    fails_when = "At model load (inside `deepspeed.zero.Init`): `AssertionError: More elements X than buffer size Y`."
    evidence = (
        "deepspeed 0.19.8 runtime/swap_tensor/partitioned_param_swapper.py L357 (`get_buffer`), "
        "runtime/zero/partition_parameters.py L1816-1823 (partition size = aligned numel / world); the same in "
        "0.14.5 and 0.16.4",
        "deepspeed 0.19.8 runtime/zero/offload_config.py L36 (`buffer_size` default 1e8)",
        "transformers 5.6.0 models/mixtral/modeling_mixtral.py L70 and models/deepseek_v3/modeling_deepseek_v3.py "
        "L163 (`gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate_dim, hidden_dim))`)",
    )
    example = (
        'Llama-3-8B, 4 GPUs, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}  ->  '
        '"buffer_size": 2e8 (or 8 GPUs)'
    )
    fix_safety = "No fix: the buffer is pinned host memory the user sizes (x `buffer_count`)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx):
            return
        job = ctx.job
        known, ds = job.deepspeed
        zero = ds.get("zero_optimization") if known and isinstance(ds, dict) else None
        offload = zero.get("offload_param") if isinstance(zero, dict) else None
        if not isinstance(offload, dict) or offload.get("device") != "nvme" or job.zero_stage != 3:
            return
        shape = job.shape
        buffer = offload.get("buffer_size", DEFAULT_BUFFER)
        if shape is None or not is_number(buffer) or buffer <= 0:
            return
        from cfgopt.knowledge.model_shapes import largest_parameter  # here, not at import: only NVMe offload asks

        hardware = job.hardware(1)
        fused = experts_fused(job, shape) if shape.is_moe else True
        largest, what = largest_parameter(shape, experts_fused=fused is not False)
        per_gpu = math.ceil(largest / hardware.gpus)
        if per_gpu <= buffer:
            return
        # transformers not known: 5.x fuses the experts into one parameter, 4.x keeps one linear per expert
        only_fused = fused is None and math.ceil(largest_parameter(shape, False)[0] / hardware.gpus) <= buffer
        needed = math.ceil(largest / buffer)
        entry = consumer_entry(ctx.source, "deepspeed")
        if entry is None:
            return
        layout = UNDER_5 * only_fused
        yield self.at_entry(
            ctx,
            entry,
            f"ZeRO-3 NVMe parameter offload on {_gpus(hardware)}: {shape.name}'s largest parameter, {what} "
            f"({largest:,} elements){layout}, is {per_gpu:,} per GPU, more than `offload_param.buffer_size` "
            f"({buffer:,.0f}); {ctx.ds_label}'s `zero.Init` stops at model load (`More elements ... than buffer "
            f"size`). Set `buffer_size` to at least {per_gpu:,}, or train on {needed} GPUs or more",
            severity=Severity.ERROR if hardware.gpus_stated and not only_fused else Severity.WARNING,
        )
