"""The memory model's classes written without `dataclasses` (its import brings `inspect`, 4 ms of a lint with a
target) keep a dataclass's behaviour: `MemoryEstimate` and `Method` are compared here with the dataclass their
own signature makes (the same constructor, repr, equality, fresh default lists); `Batch` is a record
(`cfgopt.text.record`)."""

from __future__ import annotations

import dataclasses
import inspect
import math

from cfgopt.memory.batch import Batch
from cfgopt.memory.method import Method
from cfgopt.memory.result import MemoryEstimate


def _as_dataclass(cls: type) -> type:
    """The dataclass of `cls`'s constructor: its parameters as fields, a None default read as `field(list)`."""
    spec = []
    for name, param in inspect.signature(cls).parameters.items():
        if param.default is inspect.Parameter.empty:
            spec.append((name, object))
        elif param.default is None and name in ("components", "notes", "unmodelled", "uncalibrated", "approximate"):
            spec.append((name, object, dataclasses.field(default_factory=list)))
        else:
            spec.append((name, object, dataclasses.field(default=param.default)))
    return dataclasses.make_dataclass(cls.__name__, spec)


ESTIMATE = {
    **dict(model="m", finetuning_type="lora", stage="sft", gpus=8, zero_stage=None, micro_batch=2),
    **dict(gradient_accumulation=4, seq_len=1024, tokens=2048, packing=False, fill=math.nan),
    **dict(gradient_checkpointing=True, attention="sdpa", liger=False, quantization_bit=None),
    **dict(total_params=8_000_000_000, trainable_params=20_000_000),
}


def test_a_memory_estimate_is_built_shown_and_compared_as_its_dataclass() -> None:
    assert tuple(inspect.signature(MemoryEstimate).parameters) == MemoryEstimate.FIELDS
    reference = _as_dataclass(MemoryEstimate)
    plain = MemoryEstimate(**ESTIMATE)
    assert repr(plain) == repr(reference(**ESTIMATE))
    assert plain.notes == [] and plain.notes is not MemoryEstimate(**ESTIMATE).notes  # a list of its own
    # equal field by field, a NaN only to the same NaN object, as in a tuple (the dataclass compared tuples)
    for changes in ({}, {"gpus": 1}, {"fill": float("nan")}, {"notes": ["a"]}):
        other = {**ESTIMATE, **changes}
        assert (plain == MemoryEstimate(**other)) == (reference(**ESTIMATE) == reference(**other))
    assert plain == MemoryEstimate(**ESTIMATE) and MemoryEstimate.__hash__ is None
    assert plain.as_dict()["model"] == "m" and list(plain.as_dict())[:3] == ["model", "finetuning_type", "stage"]


def test_a_method_is_built_shown_and_compared_as_its_dataclass() -> None:
    assert tuple(inspect.signature(Method).parameters) == Method.FIELDS
    reference = _as_dataclass(Method)
    cases = (({"q_proj"}, 10), ({"q_proj"}, 10, 1.5), ({"v_proj"}, 3, 0.0, 2, True, 1, True, 0.5))
    for args in cases:
        assert repr(Method(*args)) == repr(reference(*args))
        for other in cases:
            assert (Method(*args) == Method(*other)) == (reference(*args) == reference(*other))
    method = Method({"q_proj"}, 10)
    method.trainable += 5  # mutable, as the dataclass was
    assert method.trainable == 15 and Method.__hash__ is None


def test_a_batch_is_a_record() -> None:
    batch = Batch("sft", "lora", 2, 4, False, 1.0, 1024, 1)
    assert batch._fields[0] == "stage" and batch.tokens == 1024 and batch == Batch(*batch)
    assert repr(batch).startswith("Batch(stage='sft', ftype='lora', micro_batch=2")
