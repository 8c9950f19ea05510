"""cfgopt's DeepSpeed validators against DeepSpeed's own pydantic config classes (oracle group).

For generated section contents (valid values, typos, wrong types, out-of-range numbers, bad enum
values, nested blocks), cfgopt's validator must reject exactly when DeepSpeed's class does. DeepSpeed's
model validators (cross-field rules such as `offload_optimizer.ratio < 1` needing stage 3) are not
part of the snapshot; the generator keeps to single-field changes so the comparison is like for like.
"""

from __future__ import annotations

import importlib
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfgopt.knowledge import schema
from cfgopt.rules.support.deepspeed import validate_section

pytestmark = pytest.mark.oracle
EXAMPLES = int(os.environ.get("CFGOPT_PARITY_EXAMPLES", "300"))
# Fields whose real class runs extra validators or deprecation rewrites: left out of generation.
CROSS_FIELD = {
    "overlap_comm",
    "cpu_offload",
    "cpu_offload_param",
    "cpu_offload_use_pin_memory",
    "stage3_gather_fp16_weights_on_model_save",
    "legacy_stage1",
    "zenflow",
    "leaf_module",
    "super_offload",
    "elastic_checkpoint",
    "nvme_path",
    "bf16_optimizer_states",
    "bf16_master_weights_and_grads",
}


def _real_class(model_name: str):
    pytest.importorskip("deepspeed")
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    for module in (
        "deepspeed.runtime.zero.config",
        "deepspeed.runtime.precision_config",
        "deepspeed.runtime.zero.offload_config",
        "deepspeed.compile.config",
        "deepspeed.comm.config",
        "deepspeed.monitor.config",
        "deepspeed.runtime.tensor_parallel.config",
        "deepspeed.runtime.config",
    ):
        mod = importlib.import_module(module)
        if hasattr(mod, model_name):
            return getattr(mod, model_name)
    pytest.skip(f"{model_name} not found in deepspeed")


def _values(field: dict) -> st.SearchStrategy:
    good: list = []
    kinds = field.get("types") or []
    if field.get("enum"):
        good = list(field["enum"]["values"])
    if "bool" in kinds:
        good += [True, False, "true", "false", 1, 0]
    if "int" in kinds:
        good += [0, 1, 5e8, 500000000, "500", -1, 1.5, "5e8", 10**12]
    if "float" in kinds:
        good += [0.5, 1, -0.5, "0.1", 1e-4]
    if "str" in kinds:
        good += ["cpu", "none", "x"]
    if "null" in kinds:
        good.append(None)
    bad = ["auto", "CPU", [], {}, "yes", 4, 3, "3"]
    return st.sampled_from(good + bad)


def _section_strategy(ds: schema.DeepSpeedSchema, model: str) -> st.SearchStrategy:
    fields = {k: v for k, v in ds.raw_models[model]["fields"].items() if k not in CROSS_FIELD and not v.get("model")}
    names = sorted(fields)
    key = st.one_of(st.sampled_from(names), st.sampled_from([n + "x" for n in names] + ["stage3_parition_grads"]))

    @st.composite
    def section(draw):
        out = {}
        for _ in range(draw(st.integers(0, 4))):
            k = draw(key)
            spec = fields.get(k)
            out[k] = draw(_values(spec)) if spec else True
        return out

    return section()


@pytest.mark.parametrize(
    "model",
    [
        "DeepSpeedZeroConfig",
        "DeepSpeedFP16Config",
        "DeepSpeedBF16Config",
        "DeepSpeedZeroOffloadOptimizerConfig",
        "DeepSpeedZeroOffloadParamConfig",
    ],
)
def test_validator_rejects_exactly_when_deepspeed_does(model: str) -> None:
    real = _real_class(model)
    ds = schema.deepspeed()

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_section_strategy(ds, model))
    def check(section: dict) -> None:
        try:
            real(**section)
            real_ok = True
        except Exception:  # noqa: BLE001 - any rejection by DeepSpeed counts
            real_ok = False
        ours_ok = not validate_section(model, section)  # drops "auto" as DeepSpeedConfigModel.__init__ does
        assert ours_ok == real_ok, f"{model}({section}): deepspeed ok={real_ok}, cfgopt ok={ours_ok}"

    check()
