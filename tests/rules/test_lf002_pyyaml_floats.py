"""LF002 for releases that read YAML with PyYAML (LLaMA-Factory 0.9.0-0.9.3): an unquoted `1e-4` is the string
'1e-4' there (YAML 1.1 floats need a dot and a signed exponent), a float to OmegaConf from 0.9.4. Checked against
the real readers: PyYAML's `yaml.safe_load` (what 0.9.3's parser.py calls) and `OmegaConf.create`."""

from __future__ import annotations

import pytest
import yaml

from cfgopt.rules.lf002_wrong_value_type import _pyyaml_string, _yaml11_float

omegaconf = pytest.importorskip("omegaconf")


@pytest.mark.parametrize("text", ["1e-4", "5e5", "2E-5", "1.0e4", "-3e-2", "+7e+1", "1_0e3"])
def test_a_float_pyyaml_reads_as_text_is_rewritten_to_one_both_read_alike(text: str) -> None:
    assert yaml.safe_load(f"x: {text}")["x"] == text  # the string, as 0.9.3 passes it on
    assert _pyyaml_string(text)
    written = _yaml11_float(text)
    old = yaml.safe_load(written)
    new = omegaconf.OmegaConf.create(f"x: {written}")["x"]
    assert isinstance(old, float) and old == new == float(text.replace("_", ""))


@pytest.mark.parametrize("text", ["1.0e-4", "0.1", ".5", "1.e-3", "1_000.5"])
def test_floats_pyyaml_reads_as_floats_are_left_alone(text: str) -> None:
    assert isinstance(yaml.safe_load(text), float)
    assert not _pyyaml_string(text)
