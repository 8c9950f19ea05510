"""Tests for the shipped schema snapshots and ``scripts/sync_schemas.py``.

Why: the linter trusts ``cfgopt/knowledge/schemas/*.json`` blindly, so (1) every CI run checks the files parse and have
the documented shape, and (2) oracle runs (real llamafactory/deepspeed installed) regenerate them and fail on
drift, plus spot-check facts the lint rules depend on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import sys
from types import ModuleType
from typing import Any

import pytest
from repo_paths import ROOT

SCHEMAS = ROOT / "cfgopt" / "knowledge" / "schemas"
SCRIPT = ROOT / "scripts" / "sync_schemas.py"
LF_PATH = SCHEMAS / "llamafactory-0.9.5.json"
DS_PATH = SCHEMAS / "deepspeed-0.19.8.json"
# Every shipped release (docs/versions.md): the pins above plus the ones `--allow-versions` snapshotted.
LF_PATHS = sorted(SCHEMAS.glob("llamafactory-*.json"))
DS_PATHS = sorted(SCHEMAS.glob("deepspeed-*.json"))
KINDS = {"bool", "int", "float", "str", "dict", "list", "null", "any"}


def _load(path: pathlib.Path) -> dict[str, Any]:
    """Plain-json load: the lint path must not need anything fancier."""
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- structure (always runs, no oracle)


def test_every_supported_release_is_shipped() -> None:
    assert [p.name for p in LF_PATHS] == [f"llamafactory-0.9.{n}.json" for n in range(6)]
    assert [p.name for p in DS_PATHS] == [
        f"deepspeed-{v}.json" for v in ("0.14.5", "0.15.4", "0.16.4", "0.17.6", "0.18.9", "0.19.8")
    ]
    assert _load(LF_PATH)["transformers"] == "5.6.0"
    assert _load(SCHEMAS / "llamafactory-0.9.4.json")["transformers"] == "4.57.1"


@pytest.mark.parametrize("path", LF_PATHS, ids=lambda p: p.stem)
def test_llamafactory_snapshot_structure(path: pathlib.Path) -> None:
    doc = _load(path)
    assert doc["package"] == "llamafactory" and path.name == f"llamafactory-{doc['version']}.json"
    assert doc["transformers"]
    assert {"train", "infer"} <= set(doc["groups"])
    # LLaMA-Factory's own TrainingArguments subclass since 0.9.2; HF's Seq2SeqTrainingArguments before
    assert {"TrainingArguments", "Seq2SeqTrainingArguments"} & set(doc["groups"]["train"])
    known = {name for names in doc["groups"].values() for name in names}
    assert len(doc["fields"]) > 280  # 283 in 0.9.0, 361 in 0.9.4
    for name, field in doc["fields"].items():
        assert set(field) >= {"dataclasses", "types", "choices", "choices_kind", "default", "help"}, name
        assert field["dataclasses"] and set(field["dataclasses"]) <= known, name
        assert field["types"] and set(field["types"]) <= KINDS, name
        assert field["choices_kind"] in {None, "enum", "literal", "argparse"}, name
        assert (field["choices"] is None) == (field["choices_kind"] is None), name
    assert doc["not_settable"] == sorted(doc["not_settable"])
    assert not set(doc["not_settable"]) & set(doc["fields"])


@pytest.mark.parametrize("path", DS_PATHS, ids=lambda p: p.stem)
def test_deepspeed_snapshot_structure(path: pathlib.Path) -> None:
    doc = _load(path)
    assert doc["package"] == "deepspeed" and path.name == f"deepspeed-{doc['version']}.json"
    assert doc["transformers"] and doc["accelerate"]  # hf_auto_keys depend on them
    models = doc["models"]
    for section, model in doc["sections"].items():
        assert model in models, section
        assert section.split(".")[0] in doc["top_level_keys"], section
    for name, model in models.items():
        assert model["extra"] in {"forbid", "allow", "ignore"}, name
        for fname, field in model["fields"].items():
            assert set(field["types"]) <= KINDS | {"model", "path"}, (name, fname)
            if field["model"] is not None:
                assert field["model"] in models, (name, fname)
                assert "model" in field["types"], (name, fname)
            assert set(field["constraints"]) <= {"ge", "gt", "le", "lt"}, (name, fname)
            assert isinstance(field["required"], bool) and isinstance(field["deprecated"], bool)
    assert doc["top_level_keys"] == sorted(doc["top_level_keys"])
    assert not set(doc["removed_top_level"]) & set(doc["top_level_keys"])
    assert all(isinstance(v, str) and v for v in doc["removed_top_level"].values())
    assert all(isinstance(v, str) and v for v in doc["removed_zero"].values())
    assert "train_micro_batch_size_per_gpu" in doc["hf_auto_keys"]
    assert doc["plain_reads"] == sorted(doc["plain_reads"])
    assert all(k.split(".")[0] in doc["top_level_keys"] for k in doc["plain_reads"])
    for key, default in doc["plain_defaults"].items():
        assert key.split(".")[0] in set(doc["top_level_keys"]) | set(doc["removed_top_level"]), key
        assert default is None or isinstance(default, bool | int | float | str), key
    assert isinstance(doc["plain_defaults"]["gradient_clipping"], float)


def test_snapshots_are_canonically_serialised() -> None:
    """Files must be exactly what the script's serialiser produces (sorted, indent 1, trailing newline)."""
    for path in sorted(SCHEMAS.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        canon = json.dumps(json.loads(text), sort_keys=True, indent=1, ensure_ascii=False) + "\n"
        assert text == canon, path.name


# ---------------------------------------------------------------- oracle (real packages installed)


@pytest.fixture(scope="module")
def sync() -> ModuleType:
    """Import the script as a module (``scripts/`` is not a package)."""
    pytest.importorskip("llamafactory", reason="oracle packages not installed")
    pytest.importorskip("deepspeed", reason="oracle packages not installed")
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    spec = importlib.util.spec_from_file_location("sync_schemas", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sync_schemas"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered(sync: ModuleType) -> dict[str, str]:
    """Regenerate once per module; the introspection is the slow part."""
    try:
        return sync.render_all()
    except sync.VersionMismatch as exc:
        pytest.skip(f"installed versions are not the pins: {exc}")


@pytest.mark.oracle
def test_no_drift(rendered: dict[str, str]) -> None:
    for name, text in rendered.items():
        assert (SCHEMAS / name).read_text(encoding="utf-8") == text, f"{name} is stale: run scripts/sync_schemas.py"


@pytest.mark.oracle
def test_check_cli_detects_drift(
    sync: ModuleType,
    rendered: dict[str, str],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sync, "render_all", lambda: rendered)
    for name, text in rendered.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert sync.main(["--check", "--out-dir", str(tmp_path)]) == 0
    lf = tmp_path / sync.LF_FILE
    lf.write_text(lf.read_text(encoding="utf-8").replace('"fa3"', '"fa4"'), encoding="utf-8")
    assert sync.main(["--check", "--out-dir", str(tmp_path)]) == 1
    assert "fa4" in capsys.readouterr().err


@pytest.mark.oracle
def test_refuses_wrong_versions(sync: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setitem(sync.PINS, "deepspeed", "0.0.1")
    assert sync.main(["--out-dir", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


@pytest.mark.oracle
def test_allow_versions_snapshots_the_installed_release(
    sync: ModuleType, rendered: dict[str, str], tmp_path: pathlib.Path
) -> None:
    """`--allow-versions` runs the same introspection; with the pins installed it writes the same files."""
    assert sync.main(["--allow-versions", "--only", "deepspeed", "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / sync.DS_FILE).read_text(encoding="utf-8") == rendered[sync.DS_FILE]
    assert not (tmp_path / sync.LF_FILE).exists()
    index = json.loads((tmp_path / "version-index.json").read_text(encoding="utf-8"))
    assert index["deepspeed"]["versions"] == [sync.PINS["deepspeed"]]
    assert index["deepspeed"]["changed_defaults"] == {}  # one release: nothing to compare
    assert sync.main(["--allow-versions", "--check", "--out-dir", str(SCHEMAS)]) == 0


@pytest.mark.oracle
def test_allow_versions_without_the_package(sync: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(sync, "installed_versions", lambda: {"transformers": "5.6.0"})
    assert sync.main(["--allow-versions", "--out-dir", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


@pytest.mark.oracle
def test_render_is_deterministic(sync: ModuleType, rendered: dict[str, str]) -> None:
    assert sync.render_all() == rendered


@pytest.mark.oracle
def test_llamafactory_facts(rendered: dict[str, str], sync: ModuleType) -> None:
    from llamafactory.extras.constants import AttentionFunction

    doc = json.loads(rendered[sync.LF_FILE])
    fields = doc["fields"]
    assert fields["flash_attn"]["choices"] == ["auto", "disabled", "sdpa", "fa2", "fa3"]
    assert fields["flash_attn"]["choices"] == [m.value for m in AttentionFunction]
    assert fields["flash_attn"]["choices_kind"] == "enum"
    assert "compute_type" not in fields
    assert {"compute_dtype", "device_map", "model_max_length"} <= set(doc["not_settable"])
    assert fields["optim"]["choices_kind"] == "enum" and "adamw_torch" in fields["optim"]["choices"]
    assert fields["lr_scheduler_type"]["choices_kind"] == "enum"
    assert fields["finetuning_type"]["choices"] == ["lora", "oft", "freeze", "full"]
    assert fields["finetuning_type"]["choices_kind"] == "literal"
    assert fields["bf16"]["types"] == ["bool"]
    assert fields["predict_with_generate"]["dataclasses"] == ["TrainingArguments"]  # Seq2Seq field


@pytest.mark.oracle
def test_deepspeed_facts(rendered: dict[str, str], sync: ModuleType) -> None:
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from pydantic import ValidationError

    doc = json.loads(rendered[sync.DS_FILE])
    zero = doc["models"][doc["sections"]["zero_optimization"]]
    assert zero["extra"] == "forbid"
    assert zero["fields"]["stage"]["alias"] is None
    assert zero["fields"]["stage"]["enum"]["values"] == [0, 1, 2, 3]
    assert zero["fields"]["prefetch_bucket_size"]["alias"] == "stage3_prefetch_bucket_size"
    assert zero["fields"]["offload_param"]["model"] in doc["models"]
    assert doc["sections"]["bf16"] == doc["sections"]["bfloat16"] == "DeepSpeedBF16Config"
    assert "compression_training" in doc["removed_top_level"]
    assert "mics_shard_size" in doc["removed_zero"]
    assert "zero_optimisation" not in doc["top_level_keys"]
    assert "zero_optimization.stage3_prefetch_bucket_size" in doc["hf_auto_keys"]
    # the defaults DS090 compares across releases are DeepSpeed's own
    from deepspeed.runtime import constants
    from deepspeed.runtime.zero.offload_config import DeepSpeedZeroOffloadOptimizerConfig

    assert doc["plain_defaults"]["gradient_clipping"] == constants.GRADIENT_CLIPPING_DEFAULT
    offload = doc["models"][zero["fields"]["offload_optimizer"]["model"]]
    assert offload["fields"]["pin_memory"]["default"] == DeepSpeedZeroOffloadOptimizerConfig().pin_memory
    with pytest.raises(ValidationError) as err:
        DeepSpeedZeroConfig(**{"stage": 3, "stage3_parition_grads": True})
    assert any(e["type"] == "extra_forbidden" for e in err.value.errors())
