"""`cfgopt schema export`: JSON Schema files for editors. Every file the real parsers accept in the corpus
validates; the seed's broken files do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oracle_harness import CORPUS, CORPUS_SKIP
from rule_cases import ROOT, run_cli

from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.text.document import Document

jsonschema = pytest.importorskip("jsonschema")

SEED = ROOT / "fixtures" / "seed"
CLEAN = ROOT / "fixtures" / "clean"


def yaml_data(path: Path):
    return load_yaml(Document.read(path)).data  # as LLaMA-Factory reads it (OmegaConf, YAML 1.1)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, jsonschema.protocols.Validator]:
    out = tmp_path_factory.mktemp("schemas")
    code, stdout, _ = run_cli(["schema", "export", "--out", str(out)])
    assert code == 0 and "yaml-language-server" in stdout
    validators = {}
    for name in ("llamafactory-train", "deepspeed"):
        schema = json.loads((out / f"{name}.schema.json").read_text())
        jsonschema.Draft7Validator.check_schema(schema)
        validators[name] = jsonschema.Draft7Validator(schema)
    return validators


def messages(validator, data) -> list[str]:
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(data)]


def test_clean_fixtures_validate(exported) -> None:
    assert messages(exported["llamafactory-train"], yaml_data(CLEAN / "llama3_lora_sft.yaml")) == []
    assert messages(exported["deepspeed"], json.loads((CLEAN / "ds_z2_config.json").read_text())) == []


def test_seed_fails(exported) -> None:
    lf = messages(exported["llamafactory-train"], yaml_data(SEED / "llama3_lora_sft.yaml"))
    assert any("flash_attn" in m and "True is not one of" in m for m in lf), lf
    assert any("'compute_type'" in m for m in lf) and any("'disable_torch_compile'" in m for m in lf)
    ds = messages(exported["deepspeed"], json.loads((SEED / "ds_z3_config.json").read_text()))
    assert any("stage3_parition_grads" in m for m in ds), ds


def test_values_types_and_auto(exported) -> None:
    ds = exported["deepspeed"]
    assert messages(ds, {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "gpu"}}})
    assert messages(ds, {"zero_optimization": {"stage": "three"}})
    assert messages(ds, {"bf16": {"enabled": True, "nope": 1}})
    assert messages(ds, {"compression_training": {}})  # a removed block
    assert not messages(ds, {"zero_optimization": {"stage3_prefetch_bucket_size": "auto"}, "train_batch_size": "auto"})
    assert not messages(ds, {"my_own_key": 1})  # the top level is loose in DeepSpeed
    lf = exported["llamafactory-train"]
    assert messages(lf, {"stage": "sfft"}) and messages(lf, {"per_device_train_batch_size": "four"})
    assert not messages(lf, {"stage": "sft", "learning_rate": 1e-4, "num_train_epochs": 3})


def test_descriptions_defaults_enums() -> None:
    from cfgopt.knowledge.schema_export import deepspeed_schema, llamafactory_schema

    lf = llamafactory_schema("0.9.5")["properties"]
    assert lf["flash_attn"]["enum"] == ["auto", "disabled", "sdpa", "fa2", "fa3"]
    assert lf["flash_attn"]["default"] == "auto" and "FlashAttention" in lf["flash_attn"]["description"]
    ds = deepspeed_schema("0.19.8")
    zero = ds["definitions"]["DeepSpeedZeroConfig"]
    assert zero["additionalProperties"] is False
    assert "stage3_prefetch_bucket_size" in zero["properties"]  # aliases are keys too
    assert ds["additionalProperties"] is True and "train_micro_batch_size_per_gpu" in ds["properties"]


def test_older_snapshots_export(tmp_path: Path) -> None:
    code, _, _ = run_cli(
        ["schema", "export", "--out", str(tmp_path), "--llamafactory-version", "0.9.4", "--deepspeed-version", "0.16"]
    )
    assert code == 0
    assert "0.9.4" in json.loads((tmp_path / "llamafactory-train.schema.json").read_text())["title"]
    assert "0.16.4" in json.loads((tmp_path / "deepspeed.schema.json").read_text())["title"]


@pytest.mark.skipif(not (CORPUS / "oracle-verdicts.jsonl").exists(), reason=CORPUS_SKIP)
def test_every_accepted_corpus_file_validates(exported) -> None:
    verdicts = [json.loads(x) for x in (CORPUS / "oracle-verdicts.jsonl").read_text().splitlines() if x.strip()]
    bad = {}
    checked = 0
    for v in verdicts:
        if not v["ok"]:
            continue
        path = CORPUS / v["file"]
        if v["kind"] == "deepspeed":
            found = messages(exported["deepspeed"], json.loads(path.read_text()))
        else:
            found = messages(exported["llamafactory-train"], yaml_data(path))
        checked += 1
        if found:
            bad[v["file"]] = found[:3]
    assert checked > 100 and bad == {}


def _titles(out: Path) -> tuple[str, str]:
    lf, ds = (json.loads((out / f"{n}.schema.json").read_text())["title"] for n in ("llamafactory-train", "deepspeed"))
    return lf, ds


def test_releases_are_those_lint_judges_the_folder_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The help says "default: as for lint": the repository's pins (or the project config's versions) decide, by
    lint's own resolution; a flag wins, and --isolated ignores them as lint's does."""
    (tmp_path / ".git").mkdir()  # the repository root: pins are not looked for above it
    (tmp_path / "requirements.txt").write_text("llamafactory[torch,metrics]==0.9.3\ndeepspeed==0.16.4\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(["schema", "export", "--out", ".schemas"])
    lf, ds = _titles(tmp_path / ".schemas")
    assert code == 0 and "0.9.3" in lf and "0.16.4" in ds
    assert "for LLaMA-Factory 0.9.3 and DeepSpeed 0.16.4 (requirements.txt: LLaMA-Factory ==0.9.3" in out
    settings = run_cli(["lint", "--show-settings", "."])[1]
    assert 'llamafactory-version = "0.9.3"' in settings and 'deepspeed-version = "0.16.4"' in settings
    assert run_cli(["schema", "export", "--out", ".schemas", "--llamafactory-version", "0.9.4"])[0] == 0
    lf, ds = _titles(tmp_path / ".schemas")
    assert "0.9.4" in lf and "0.16.4" in ds
    assert run_cli(["schema", "export", "--out", ".schemas", "--isolated"])[0] == 0
    lf, ds = _titles(tmp_path / ".schemas")
    assert "0.9.5" in lf and "0.19.8" in ds
    (tmp_path / "cfgopt.toml").write_text('llamafactory-version = "0.9.2"\n')
    assert run_cli(["schema", "export", "--out", ".schemas"])[0] == 0
    assert "0.9.2" in _titles(tmp_path / ".schemas")[0]


def test_the_modeline_hint_says_a_relative_path_is_read_from_the_yaml_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """yaml-language-server resolves a relative `$schema` path against the YAML file's folder
    (redhat-developer/yaml-language-server src/languageservice/services/yamlSchemaService.ts,
    `getSchemaForResource`), so a config in configs/ needs `../`; an absolute --out needs no note."""
    monkeypatch.chdir(tmp_path)
    _, out, _ = run_cli(["schema", "export", "--out", ".schemas"])
    lines = out.splitlines()
    assert lines[0] == "wrote .schemas/llamafactory-train.schema.json"
    assert "In a YAML config: # yaml-language-server: $schema=.schemas/llamafactory-train.schema.json" in lines
    assert "$schema=../.schemas/llamafactory-train.schema.json" in out
    elsewhere = tmp_path.parent / f"{tmp_path.name}-schemas"
    _, out, _ = run_cli(["schema", "export", "--out", str(elsewhere)])
    assert f"$schema={elsewhere}/llamafactory-train.schema.json" in out and "../" not in out
