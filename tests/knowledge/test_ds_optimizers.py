"""DS025's snapshot (cfgopt/knowledge/schemas/ds-optimizers.json, scripts/sync_ds_optimizers.py) against the real
classes: the installed DeepSpeed release's entry is what the script reads from its source today, each optimizer's
parameters are those of the classes DeepSpeed builds (by `inspect`), and a misspelled type or parameter really
fails where DeepSpeed looks it up."""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from importlib import metadata

import pytest
from repo_paths import ROOT

SNAPSHOT = json.loads((ROOT / "cfgopt" / "knowledge" / "schemas" / "ds-optimizers.json").read_text(encoding="utf-8"))


def test_every_supported_release_has_a_table():
    releases = {
        path.name[len("deepspeed-") : -len(".json")]
        for path in (ROOT / "cfgopt" / "knowledge" / "schemas").glob("deepspeed-*.json")
    }
    assert releases <= set(SNAPSHOT["releases"])


def test_installed_release_matches_its_source():
    pytest.importorskip("deepspeed")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import sync_ds_optimizers as sync
    finally:
        sys.path.pop(0)
    version = metadata.version("deepspeed")
    spec = importlib.util.find_spec("deepspeed")
    location = next(iter(spec.submodule_search_locations))
    assert SNAPSHOT["releases"][version] == sync.release_table(location)


def test_parameters_are_the_real_signatures():
    torch = pytest.importorskip("torch")
    pytest.importorskip("deepspeed")
    from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
    from deepspeed.runtime import lr_schedules

    version = metadata.version("deepspeed")
    adam = set(SNAPSHOT["releases"][version]["optimizers"]["adam"])
    for cls in (FusedAdam, DeepSpeedCPUAdam):
        assert set(list(inspect.signature(cls.__init__).parameters)[2:]) <= adam
    assert "betaz" not in adam
    for name, params in SNAPSHOT["releases"][version]["schedulers"].items():
        real = list(inspect.signature(getattr(lr_schedules, name).__init__).parameters)[2:]
        assert params is None or set(params) == set(real), name
    assert SNAPSHOT["torch"]["optimizers"]["AdamW"] == sorted(
        list(inspect.signature(torch.optim.AdamW.__init__).parameters)[2:]
    )
    # what DeepSpeed does with a type it does not know: `getattr(torch.optim, type)` / `hasattr(lr_schedules, type)`
    assert not hasattr(torch.optim, "AdamWW") and "AdamWW" not in SNAPSHOT["torch"]["optimizers"]
    assert not hasattr(lr_schedules, "WarmupLRR") and not hasattr(torch.optim.lr_scheduler, "WarmupLRR")
    with pytest.raises(TypeError):
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], betaz=(0.9, 0.999))
