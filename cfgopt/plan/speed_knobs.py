"""The speed knobs the planner sets together, the rules whose findings each answers (the plan's side of
`Rule.fix_replaced_by_plan`, held equal by tests/plan/test_planner.py) and the package each needs.

Apart from `cfgopt.plan.planner` so that the rules, the fixer and the engine's plan step (`cfgopt.lint.plans`) read
them without importing the planner (which brings tune's search space and priors): a lint of a config without speed
findings never loads it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.job import Job

# The rules whose findings a knob answers: the knob is planned when one of them is selected.
OWNERS: dict[str, tuple[str, ...]] = {
    "micro": ("PF007", "MEM005", "MEM001"),
    "gc": ("MEM004", "MEM001"),
    "attn": ("PF004",),
    "packing": ("PF006",),
    "liger": ("PF009",),
    "zero": ("MEM003", "PF050"),
    # precision and optimizer: fp16 or fp32 where bf16 runs (PF001, PF002), and the memory of a full fine-tune's
    # states when it does not fit (MEM001): pure_bf16 halves them, an 8-bit AdamW or Adafactor shrinks AdamW's
    "precision": ("PF001", "PF002", "MEM001"),
    "optim": ("MEM001",),
}
PLANNED_CODES = frozenset(code for codes in OWNERS.values() for code in codes)
# The package each knob value needs: (module, distribution)
PACKAGES = {
    "liger": ("liger_kernel", "liger-kernel"),
    "fa2": ("flash_attn", "flash-attn"),
    "bnb": ("bitsandbytes", "bitsandbytes"),
}
# A DeepSpeed JSON fix the plan answers by dropping `deepspeed:` from every config that reads the JSON: shown as this
# display-only fix, and never applied by the same `cfgopt fix` on a later pass (the fixer keeps the file's finding
# unfixed there, though the JSON then has no reader left to tell it apart from a JSON linted on its own).
LEFT_ALONE = "Left as it is: every config that reads this JSON drops DeepSpeed in its speed plan"
# The DeepSpeed JSON fixes that tune how DeepSpeed runs the job (its offload: PF051, MEM002; the dtype it reduces
# gradients in: DS023): moot where every config reading the JSON drops DeepSpeed by its plan (`LEFT_ALONE`), so the
# fixer applies them only once the configs' own fixes, the plan among them, are in. DS023 offers no fix on a JSON that
# no config of the run reads (its reason is the job's accelerate), so a JSON the plan left alone stays so.
JSON_SPEED_CODES = frozenset({"PF051", "MEM002", "DS023"})


def liger_plannable(job: Job) -> bool:
    """Would a plan turn Liger on for this job once liger-kernel is installed (PF009 and ENV004 ask the same)? Its
    Triton kernels need NVIDIA compute capability 8.0+ or ROCm (`Target.runs_triton`: not V100 / T4, nor an unstated
    GPU, which may be either); its speed on ROCm is unmeasured (PF009), so there only where PF009 is selected by
    name."""
    target = job.settings.target
    return target.runs_triton and (not target.is_rocm or job.settings.named("PF009"))
