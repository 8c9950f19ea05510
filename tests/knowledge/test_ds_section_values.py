"""Oracle group: DS027's table of the blocks DeepSpeed's config reader rejects when they are not objects
(cfgopt/knowledge/schemas/ds-section-values.json) is what the installed DeepSpeed does, re-run here; so the
table cannot drift from the real tool (regenerate with `python scripts/probe_ds_sections.py`)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from repo_paths import ROOT

pytest.importorskip("deepspeed")


def _probe_module():
    spec = importlib.util.spec_from_file_location("probe_ds_sections", ROOT / "scripts" / "probe_ds_sections.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_what_the_installed_deepspeed_does() -> None:
    version, sections = _probe_module().probe()
    table = json.loads((ROOT / "cfgopt" / "knowledge" / "schemas" / "ds-section-values.json").read_text())
    assert table[version]["sections"] == sections
