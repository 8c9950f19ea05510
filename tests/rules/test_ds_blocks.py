"""The facts XF005 / XF002 / DS025 state about DeepSpeed's `optimizer` and `scheduler` blocks
(cfgopt/rules/support/ds_blocks.py), held to the installed DeepSpeed's classes."""

from __future__ import annotations

import inspect

import pytest

from cfgopt.rules.support import ds_blocks

deepspeed = pytest.importorskip("deepspeed")
torch = pytest.importorskip("torch")
from deepspeed.runtime import lr_schedules  # noqa: E402


def _defaults(cls: type) -> dict[str, object]:
    return {
        name: param.default
        for name, param in inspect.signature(cls.__init__).parameters.items()
        if param.default is not inspect.Parameter.empty
    }


@pytest.mark.parametrize(
    ("kind", "module", "cls"),
    [
        ("adamw", "deepspeed.ops.adam.fused_adam", "FusedAdam"),
        ("adamw", "deepspeed.ops.adam.cpu_adam", "DeepSpeedCPUAdam"),
        ("lamb", "deepspeed.ops.lamb.fused_lamb", "FusedLamb"),
        ("lion", "deepspeed.ops.lion.fused_lion", "FusedLion"),
        ("lion", "deepspeed.ops.lion.cpu_lion", "DeepSpeedCPULion"),
    ],
)
def test_optimizer_defaults_are_deepspeeds(kind: str, module: str, cls: str) -> None:
    real = _defaults(getattr(__import__(module, fromlist=[cls]), cls))
    for key, value in ds_blocks.optimizer_defaults(kind, {}).items():
        assert ds_blocks.same_number(list(real[key]) if key == "betas" else real[key], value), (cls, key)


def test_torch_adam_weight_decay_is_torch_adamws() -> None:
    assert _defaults(torch.optim.AdamW)["weight_decay"] == ds_blocks.TORCH_ADAMW_WEIGHT_DECAY
    assert ds_blocks.optimizer_defaults("AdamW", {"torch_adam": True})["weight_decay"] == 0.01
    assert ds_blocks.optimizer_defaults("Adam", {"torch_adam": True, "adam_w_mode": False})["weight_decay"] == 0.0


def test_scheduler_defaults_and_required_arguments() -> None:
    assert _defaults(lr_schedules.WarmupDecayLR)["warmup_max_lr"] == ds_blocks.DECAY_MAX_LR_DEFAULT
    for name in ds_blocks.WARMUP_SCHEDULERS:
        assert _defaults(getattr(lr_schedules, name))["warmup_num_steps"] == ds_blocks.WARMUP_STEPS_DEFAULT
    for name, required in ds_blocks.REQUIRED_SCHEDULER_PARAMS.items():
        assert not set(required) & set(_defaults(getattr(lr_schedules, name))), name


def _optimizer(lr: float = 1e-3):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_warmuplr_stays_flat_after_the_warm_up() -> None:
    scheduler = lr_schedules.WarmupLR(_optimizer(), warmup_max_lr=1e-4, warmup_num_steps=10)
    rates = []
    for _ in range(200):
        scheduler.step()
        rates.append(scheduler.get_last_lr()[0])
    assert rates[10:] == [pytest.approx(1e-4)] * len(rates[10:])
    assert "never decays" in ds_blocks.schedule_curve("WarmupLR", {"warmup_max_lr": 1e-4}, "0.19.8")


def test_warmuplr_peak_is_the_optimizers_lr_when_not_given() -> None:
    scheduler = lr_schedules.WarmupLR(_optimizer(lr=5e-5), warmup_num_steps=2)
    for _ in range(5):
        scheduler.step()
    assert scheduler.get_last_lr()[0] == pytest.approx(5e-5)
    assert not ds_blocks.ignores_learning_rate("WarmupLR", {}, "0.19.8")
    assert ds_blocks.ignores_learning_rate("WarmupLR", {}, "0.17.1")
    assert ds_blocks.ignores_learning_rate("WarmupDecayLR", {"total_num_steps": 10}, "0.19.8")


@pytest.mark.parametrize("steps", [0, -1, 10.0])
def test_a_warm_up_that_is_not_a_positive_integer_stops_this_deepspeed(steps: object) -> None:
    assert tuple(int(p) for p in deepspeed.__version__.split(".")[:3]) >= ds_blocks.POSITIVE_WARMUP_FROM
    with pytest.raises(ValueError, match="positive integer"):
        lr_schedules.WarmupLR(_optimizer(), warmup_num_steps=steps)


@pytest.mark.parametrize(
    ("steps", "ratio", "expected"),
    [(0, 0.0, 0), (0, None, 0), (100, 0.0, 100), (100, None, 100), (0, 0.1, None), (0.1, None, None)],
)
def test_trainer_warmup_is_known_only_without_a_ratio(steps: object, ratio: object, expected: int | None) -> None:
    assert ds_blocks.trainer_warmup(steps, ratio).steps == expected


def test_trainer_warmup_agrees_with_transformers() -> None:
    transformers = pytest.importorskip("transformers")
    for steps, ratio in ((0, None), (100, None)):
        args = transformers.TrainingArguments(output_dir="unused", warmup_steps=steps, warmup_ratio=ratio)
        for total in (10, 1000):
            assert args.get_warmup_steps(total) == ds_blocks.trainer_warmup(steps, ratio).steps


@pytest.mark.parametrize("steps", [float("inf"), float("nan"), "100", True])
def test_trainer_warmup_of_a_value_that_is_no_finite_number_is_unknown(steps: object) -> None:
    assert ds_blocks.trainer_warmup(steps, None).steps is None


def test_trainer_warmup_of_a_huge_count_is_that_count() -> None:
    assert ds_blocks.trainer_warmup(10**400, None).steps == 10**400


def test_same_number_of_a_huge_integer_does_not_raise() -> None:
    assert not ds_blocks.same_number(10**400, 1e-3)
    assert ds_blocks.same_number([0.9, 0.999], [0.9, 0.999])
