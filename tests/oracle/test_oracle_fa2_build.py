"""What `flash_attn: fa2` really does with a flash-attn whose extension cannot load (a CUDA wheel on ROCm torch), and
without flash-attn: LLaMA-Factory 0.9.5 and transformers 5.6.0 run in a fresh interpreter, with torch reporting a
GPU as ROCm torch does on an MI300X. cfgopt's one answer (`fa2_outcome`, which the speed plan ranks by and LF049
judges the YAML by) must agree: the model load stops with the wheel, SDPA is kept without it.

The CUDA wheel is stood in for by its Python entry point alone (flash-attn v2.7.4.post1 flash_attn_interface.py
L11-15 imports the compiled `flash_attn_2_cuda` unless FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE): here the extension
is absent, on a ROCm node it is present and cannot load CUDA's libraries; an ImportError either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cfgopt.environment import Environment
from cfgopt.environment.stated import fa2_outcome
from cfgopt.knowledge.targets import TARGETS

pytest.importorskip("llamafactory")
pytest.importorskip("transformers")

pytestmark = pytest.mark.oracle

# flash-attn's import as its wheels ship it (`flash_attn/__init__.py` -> `flash_attn_interface.py`)
_STUB_INIT = '__version__ = "2.7.4.post1"\nimport flash_attn_2_cuda  # the compiled extension (CUDA build)\n'

# Runs in the child: torch reports a GPU (ROCm torch on an MI300X does), LLaMA-Factory picks the attention for a
# tiny Llama saved to disk, and transformers loads it; prints what happened as JSON.
_CHILD = """
import json, sys, tempfile
import torch
torch.cuda.is_available = lambda: True
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from llamafactory.hparams import ModelArguments
from llamafactory.model.model_utils.attention import configure_attn_implementation
folder = sys.argv[1]
LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=2, vocab_size=64)).save_pretrained(folder)
config = AutoConfig.from_pretrained(folder)
configure_attn_implementation(config, ModelArguments(model_name_or_path=folder, flash_attn="fa2"))
out = {"requested": getattr(config, "_attn_implementation", None)}
try:
    model = AutoModelForCausalLM.from_pretrained(folder, config=config, dtype=torch.bfloat16)
    out["loaded"] = model.config._attn_implementation
except ImportError as exc:
    out["stopped"] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def _load_with(tmp_path: Path, flash_attn: bool) -> dict[str, str]:
    site = tmp_path / "site"
    if flash_attn:
        (site / "flash_attn").mkdir(parents=True)
        (site / "flash_attn" / "__init__.py").write_text(_STUB_INIT)
        info = site / "flash_attn-2.7.4.post1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash_attn\nVersion: 2.7.4.post1\n")
        (info / "top_level.txt").write_text("flash_attn\n")
        (info / "RECORD").write_text("flash_attn/__init__.py,,\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    env.update(DISABLE_VERSION_CHECK="1", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    env.pop("FLASH_ATTENTION_TRITON_AMD_ENABLE", None)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "model")], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cuda_flash_attn_on_rocm_stops_the_model_load_as_lf049_says(tmp_path: Path) -> None:
    ran = _load_with(tmp_path, flash_attn=True)
    assert ran["requested"] == "flash_attention_2"  # the package's metadata is all LLaMA-Factory asks about
    assert "flash_attn_2_cuda" in ran.get("stopped", ""), ran  # no fall-back: the load stops
    wheel = "@ https://example.invalid/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    outcome = fa2_outcome(Environment({"flash_attn": wheel}, "requirements.txt"), TARGETS["mi300x"])
    assert not outcome.runs and "CUDA build" in (outcome.stops or "")


def test_without_flash_attn_fa2_keeps_sdpa_as_the_plan_ranks_it(tmp_path: Path) -> None:
    ran = _load_with(tmp_path, flash_attn=False)
    assert ran["requested"] is None and ran["loaded"] == "sdpa"  # a warning, then transformers' default
    outcome = fa2_outcome(Environment({}, "requirements.txt"), TARGETS["mi300x"])
    assert not outcome.runs and outcome.stops is None
