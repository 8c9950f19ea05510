"""Several LLaMA-Factory / DeepSpeed releases: choosing one, the messages that name the others, DS090.

Why: users run LLaMA-Factory 0.9.4 with DeepSpeed 0.16.x next to 0.9.5 with 0.19.x; the same file can be
valid under one pair and fail (or train differently) under another, and cfgopt must say which and why.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

from cfgopt.knowledge import schema, versions
from cfgopt.knowledge.versions import VersionError, resolve_version

LF_VERSIONS = schema.shipped_versions("llamafactory")
DS_VERSIONS = schema.shipped_versions("deepspeed")
SEED = ROOT / "fixtures" / "seed"
CLEAN = ROOT / "fixtures" / "clean"
TRAIN_HEAD = "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndataset: d\ntemplate: t\n"


def lint(paths: list[Path], *args: str) -> tuple[int, list[dict]]:
    code, out, err = run_cli(["lint", "--format", "json", *map(str, paths), *args])
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["problems"] == []
    return code, data["diagnostics"]


def pick(diags: list[dict], code: str) -> list[str]:
    return [d["message"] for d in diags if d["code"] == code]


def write(tmp_path: Path, name: str, text: str) -> Path:
    if name.endswith(".json") and '"train_' not in text:  # discovery knows DeepSpeed JSON by its batch keys
        text = text.replace("{", '{"train_micro_batch_size_per_gpu": 1, ', 1)
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- the shipped snapshots


def test_the_supported_releases_are_shipped() -> None:
    assert LF_VERSIONS == ("0.9.0", "0.9.1", "0.9.2", "0.9.3", "0.9.4", "0.9.5")
    assert DS_VERSIONS == ("0.14.5", "0.15.4", "0.16.4", "0.17.6", "0.18.9", "0.19.8")  # one per minor release
    assert (LF_VERSIONS[-1], DS_VERSIONS[-1]) == (schema.LLAMAFACTORY_VERSION, schema.DEEPSPEED_VERSION)
    # each LLaMA-Factory snapshot was taken with the newest transformers that release accepts
    transformers = {v: schema.llamafactory(v).transformers for v in LF_VERSIONS}
    assert transformers == {
        "0.9.0": "4.45.0",
        "0.9.1": "4.46.1",
        "0.9.2": "4.49.0",
        "0.9.3": "4.52.4",
        "0.9.4": "4.57.1",
        "0.9.5": "5.6.0",
    }
    for v in DS_VERSIONS:
        assert schema.deepspeed(v).version == v


def test_version_index_is_current() -> None:
    """version-index.json is derived from the snapshots alone; it must match them."""
    shipped = json.loads((schema.SCHEMA_DIR / versions.INDEX_FILE).read_text(encoding="utf-8"))
    assert shipped == versions.build_index()
    assert shipped["deepspeed"]["versions"] == list(DS_VERSIONS)


def test_deepspeed_key_tables_are_current_and_judge_as_the_snapshots() -> None:
    """ds-keys.json (what the history of an unknown DeepSpeed key reads instead of every snapshot) is derived
    from the snapshots; every key of every release, and keys around them, get the same status from both."""
    shipped = json.loads((schema.SCHEMA_DIR / versions.KEYS_FILE).read_text(encoding="utf-8"))
    assert shipped == versions.build_ds_keys()
    assert list(shipped["releases"]) == list(DS_VERSIONS)
    assert len(shipped["models"]) < sum(len(t["models"]) for t in shipped["releases"].values())  # shared once
    dotted = {"amp", "bf16.loss_scale", "zero_optimization.stage3_parition_grads", "no_such_block.x", "a.b.c"}
    for v in DS_VERSIONS:
        ds = schema.deepspeed(v)
        dotted |= set(ds.top_level_keys) | set(ds.plain_reads) | set(ds.plain_defaults) | set(ds.removed_top_level)
        dotted |= {f"zero_optimization.{key}" for key in ds.removed_zero}
        for section, model in ds.sections.items():
            for name in ds.field_names(model):
                dotted |= {f"{section}.{name}", f"{section}.{name}.inner", f"{section}.{name}x"}
    for v in DS_VERSIONS:
        full, table = schema.deepspeed(v), versions.ds_keys(v)
        assert [versions.ds_key_status(table, d) for d in sorted(dotted)] == [
            versions.ds_key_status(full, d) for d in sorted(dotted)
        ]


def test_changed_defaults_come_from_the_snapshots() -> None:
    """The knowledge file's §1.7 table, found by comparing the snapshots (no list in the code)."""
    changed = versions.index()["deepspeed"]["changed_defaults"]
    before = {v: 0.0 for v in DS_VERSIONS[:-1]}
    assert changed["gradient_clipping"] == {**before, "0.19.8": 1.0}
    assert changed["zero_optimization.offload_optimizer.pin_memory"] == {
        **{v: False for v in DS_VERSIONS[:-1]},
        "0.19.8": True,
    }
    assert changed["zero_optimization.offload_param.pin_memory"]["0.19.8"] is True
    # 0.14-0.16 have no such key (bf16 was a plain block)
    assert changed["bf16.check_grad_overflow"] == {"0.17.6": False, "0.18.9": False, "0.19.8": True}


# ---------------------------------------------------------------- the version matrix


@pytest.mark.parametrize(("lf", "ds"), list(itertools.product(LF_VERSIONS, DS_VERSIONS)))
def test_seed_and_clean_under_every_pair(lf: str, ds: str) -> None:
    args = ("--llamafactory-version", lf, "--deepspeed-version", ds)
    _, diags = lint([SEED], *args)
    mine = {"DS001", "LF001", "LF003"}
    errors = sorted((Path(d["file"]).name, d["code"], d["key"]) for d in diags if d["code"] in mine)
    # the seed's unknown keys and bad choices are fatal under every supported release
    assert errors == [
        ("ds_z3_config.json", "DS001", "zero_optimization.stage3_parition_grads"),
        ("llama3_lora_sft.yaml", "LF001", "compute_type"),
        ("llama3_lora_sft.yaml", "LF001", "disable_torch_compile"),
        ("llama3_lora_sft.yaml", "LF003", "flash_attn"),
        ("train.sh", "LF003", "flash_attn"),
    ]
    assert all(f"LLaMA-Factory {lf}" in m for m in pick(diags, "LF001"))
    assert all(f"DeepSpeed {ds}" in m for m in pick(diags, "DS001"))
    _, diags = lint([CLEAN], *args)
    assert [d for d in diags if d["severity"] == "error"] == []


@pytest.mark.parametrize(
    ("key", "valid_in", "message"),
    [
        ("use_eaft_loss", "0.9.5", "`use_eaft_loss` was added after LLaMA-Factory 0.9.4: valid in 0.9.5"),
        ("kt_mode", "0.9.4", "`kt_mode` is valid in LLaMA-Factory 0.9.4 but was removed by 0.9.5"),
        (
            "group_by_length",
            "0.9.4",
            "`group_by_length` is valid in LLaMA-Factory 0.9.0 (transformers 4.45.0) to 0.9.4 (transformers 4.57.1) "
            "but was removed by 0.9.5 (transformers 5.6.0)",
        ),
    ],
)
def test_lf_key_of_one_release_errors_in_the_other(tmp_path: Path, key: str, valid_in: str, message: str) -> None:
    cfg = write(tmp_path, "cfg.yaml", TRAIN_HEAD + f"{key}: true\n")
    for lf in ("0.9.4", "0.9.5"):
        _, diags = lint([cfg], "--llamafactory-version", lf, "--select", "LF001")
        if lf == valid_in:
            assert diags == []
        else:
            (msg,) = pick(diags, "LF001")
            assert f"Unknown key `{key}`: LLaMA-Factory {lf} stops" in msg and message in msg


def test_lf_history_on_the_command_line(tmp_path: Path) -> None:
    script = write(tmp_path, "train.sh", "llamafactory-cli train --model_name_or_path m --use_eaft_loss true\n")
    _, diags = lint([script], "--llamafactory-version", "0.9.4", "--select", "LF001")
    assert "was added after LLaMA-Factory 0.9.4: valid in 0.9.5" in pick(diags, "LF001")[0]


def test_ds_strict_key_ignored_by_016_rejected_since_017(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{"bf16": {"enabled": true, "loss_scale": 0}}')
    assert lint([ds], "--deepspeed-version", "0.16", "--select", "DS001")[1] == []
    for v in ("0.17.6", "0.19.8"):
        (msg,) = pick(lint([ds], "--deepspeed-version", v, "--select", "DS001")[1], "DS001")
        assert f"DeepSpeed {v} rejects it" in msg
        assert (
            "`bf16.loss_scale` passes DeepSpeed 0.14.5 to 0.16.4, which ignore it, but is rejected by 0.17.6 to 0.19.8"
            in msg
        )


def test_ds_strict_key_added_later(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{"zero_optimization": {"stage": 3, "zenflow": {}, "allgather_sequential": true}}')
    msgs = pick(lint([ds], "--deepspeed-version", "0.16", "--select", "DS001")[1], "DS001")
    assert any(
        "`zero_optimization.zenflow` was added after DeepSpeed 0.16.4: valid in 0.17.6 to 0.19.8" in m for m in msgs
    )
    assert any(
        "`zero_optimization.allgather_sequential` was added after DeepSpeed 0.16.4: valid in 0.18.9 and 0.19.8" in m
        for m in msgs
    )
    assert all("did you mean" not in m for m in msgs)  # a real key of another release is no typo
    msgs = pick(lint([ds], "--deepspeed-version", "0.19", "--select", "DS001")[1], "DS001")
    assert msgs == []


def test_ds_top_level_key_added_later(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{"torch_autocast": {"enabled": false}}')
    (msg,) = pick(lint([ds], "--deepspeed-version", "0.16.4", "--select", "DS002")[1], "DS002")
    assert "`torch_autocast` is not a key DeepSpeed 0.16.4 reads" in msg
    assert (
        "`torch_autocast` was added after DeepSpeed 0.16.4: valid in 0.17.6 to 0.19.8 (0.14.5 and 0.15.4 ignore it)"
        in msg
    )
    assert lint([ds], "--deepspeed-version", "0.17", "--select", "DS002")[1] == []


def test_ds_top_level_key_renamed_keeps_the_spelling_hint(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{"seq_parallel_comm_data_type": "fp32"}')
    assert lint([ds], "--deepspeed-version", "0.16", "--select", "DS002")[1] == []
    (msg,) = pick(lint([ds], "--deepspeed-version", "0.19", "--select", "DS002")[1], "DS002")
    assert "valid in DeepSpeed 0.14.5 to 0.16.4 but was removed by 0.19.8 (0.17.6 and 0.18.9 ignore it)" in msg
    assert "did you mean `seq_parallel_communication_data_type`?" in msg


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"compression_training": {"weight_quantization": {}}}', "compression_training"),
        ('{"sparse_attention": {"mode": "fixed"}}', "sparse_attention"),
        ('{"progressive_layer_drop": {"enabled": true}}', "progressive_layer_drop"),
        ('{"zero_optimization": {"stage": 3, "mics_shard_size": 8}}', "zero_optimization.mics_shard_size"),
    ],
)
def test_ds_removed_block_names_the_releases_that_read_it(tmp_path: Path, text: str, key: str) -> None:
    ds = write(tmp_path, "ds.json", text)
    for v in ("0.14", "0.16", "0.17", "0.18"):
        assert lint([ds], "--deepspeed-version", v, "--select", "DS004,DS001,DS002")[1] == []
    (msg,) = pick(lint([ds], "--deepspeed-version", "0.19", "--select", "DS004")[1], "DS004")
    assert msg.startswith(f"`{key}` was removed from DeepSpeed after 0.18.9: 0.14.5 to 0.18.9 still read it; ")
    assert "DeepSpeed 0.19.8 stops with:" in msg


def test_compression_removal_says_the_model_would_train_unquantized(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{"compression_training": {}}')
    (msg,) = pick(lint([ds], "--select", "DS004")[1], "DS004")
    assert "the model would train unquantized" in msg


def test_key_unknown_everywhere_gets_no_history(tmp_path: Path) -> None:
    assert versions.lf_key_history("no_such_key", "train", "0.9.5") is None
    assert versions.ds_key_history("zero_optimization.no_such_key", "0.19.8") is None
    assert versions.ds_key_history("zero_optimisation", "0.16.4") is None


def test_key_status_per_release() -> None:
    status = {v: versions.ds_key_status(schema.deepspeed(v), "bf16.loss_scale") for v in DS_VERSIONS}
    assert status == {
        "0.14.5": "ignored",
        "0.15.4": "ignored",
        "0.16.4": "ignored",
        "0.17.6": "rejected",
        "0.18.9": "rejected",
        "0.19.8": "rejected",
    }
    assert versions.ds_key_status(schema.deepspeed("0.16.4"), "fp16.loss_scale") == "known"  # read when enabled
    assert versions.ds_key_status(schema.deepspeed("0.19.8"), "amp") == "removed"
    assert (
        versions.ds_key_status(schema.deepspeed("0.19.8"), "zero_optimization.stage3_prefetch_bucket_size") == "known"
    )


# ---------------------------------------------------------------- DS090 changed defaults


def ds090(tmp_path: Path, text: str, version: str) -> list[str]:
    ds = write(tmp_path, "ds.json", text)
    return pick(lint([ds], "--deepspeed-version", version, "--select", "DS090")[1], "DS090")


def test_gradient_clipping_default(tmp_path: Path) -> None:
    (msg,) = ds090(tmp_path, '{"train_micro_batch_size_per_gpu": 1}', "0.19")
    assert msg == (
        "`gradient_clipping` is not set, so DeepSpeed's default applies, and it differs between the shipped "
        "snapshots: 1.0 in DeepSpeed 0.19.8, but 0.0 (no clipping) in 0.14.5 to 0.18.9; set it to say which you mean"
    )
    (msg,) = ds090(tmp_path, '{"train_micro_batch_size_per_gpu": 1}', "0.16")
    assert "0.0 (no clipping) in DeepSpeed 0.16.4, but 1.0 in 0.19.8" in msg
    for value in ("1.0", "0", '"auto"'):
        assert ds090(tmp_path, f'{{"gradient_clipping": {value}}}', "0.19") == []


def test_pin_memory_default(tmp_path: Path) -> None:
    text = '{"gradient_clipping": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}'
    (msg,) = ds090(tmp_path, text, "0.17")
    assert msg.startswith("`zero_optimization.offload_optimizer.pin_memory` is not set")
    assert "false (pageable host buffers) in DeepSpeed 0.17.6, but true (pinned host buffers) in 0.19.8" in msg


def test_check_grad_overflow_default(tmp_path: Path) -> None:
    (msg,) = ds090(tmp_path, '{"gradient_clipping": 1, "bf16": {"enabled": true}}', "0.19")
    assert "`bf16.check_grad_overflow`" in msg and "(0.14.5, 0.15.4, 0.16.4 have no such key)" in msg
    assert "true (steps with inf/nan gradients are skipped) in DeepSpeed 0.19.8" in msg
    # 0.16.4 does not know the key: nothing to compare there
    assert ds090(tmp_path, '{"gradient_clipping": 1, "bf16": {"enabled": true}}', "0.16") == []


@pytest.mark.parametrize(
    "text",
    [
        '{"gradient_clipping": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none"}}}',
        '{"gradient_clipping": 1, "zero_optimization": {"stage": 3, "offload_param": {}}}',  # device defaults to none
        '{"gradient_clipping": 1, "bf16": {"enabled": false}}',
        '{"gradient_clipping": 1, "bf16": {}}',
        '{"gradient_clipping": 1, "bf16": {"enabled": true, "check_grad_overflow": false}}',
        '{"gradient_clipping": 1, "zero_optimization": {"offload_optimizer": {"device": "cpu", "pin_memory": true}}}',
    ],
)
def test_no_warning_where_the_default_is_unused_or_overridden(tmp_path: Path, text: str) -> None:
    assert ds090(tmp_path, text, "0.19") == []


def test_ds090_fix_writes_the_selected_default(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{\n  "train_micro_batch_size_per_gpu": 1\n}\n')
    run_cli(["fix", "--write", "--unsafe-fixes", "--select", "DS090", "--deepspeed-version", "0.16", str(ds)])
    assert json.loads(ds.read_text()) == {"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 0.0}


# ---------------------------------------------------------------- choosing the version


def test_cli_exact_and_prefix(tmp_path: Path) -> None:
    ds = write(tmp_path, "ds.json", '{"zero_optimization": {"stage": 3, "zenflow": {}}}')
    for value, shown in (("0.16.4", "0.16.4"), ("0.16", "0.16.4"), ("0", "0.19.8"), ("latest", "0.19.8")):
        diags = lint([ds], "--deepspeed-version", value, "--select", "DS001,DS090")[1]
        assert any(f"DeepSpeed {shown}" in d["message"] for d in diags), value
    assert versions.match_version("llamafactory", "0.9") == "0.9.5"
    assert versions.match_version("deepspeed", "0.17") == "0.17.6"


@pytest.mark.parametrize("option", ["--deepspeed-version", "--llamafactory-version"])
@pytest.mark.parametrize("value", ["0.13", "1.0", "0.16.40", "x"])
def test_cli_bad_version_exits_2_with_the_list(option: str, value: str) -> None:
    code, out, err = run_cli(["lint", option, value, str(CLEAN)])
    assert code == 2 and out == ""
    assert f"cfgopt: error: {option}:" in err and "shipped:" in err
    shipped = DS_VERSIONS if option == "--deepspeed-version" else LF_VERSIONS
    assert ", ".join(shipped) in err


def test_fix_takes_the_options_too(tmp_path: Path) -> None:
    code, _, err = run_cli(["fix", "--deepspeed-version", "0.13", str(tmp_path)])
    assert code == 2 and "--deepspeed-version" in err


@pytest.mark.parametrize(
    ("installed", "chosen"),
    [
        ("0.16.4", "0.16.4"),
        ("0.16.9", "0.16.4"),  # same minor series: the nearest shipped patch
        ("0.17.1", "0.17.6"),
        ("0.19.3", "0.19.8"),
        ("0.19.10", "0.19.8"),
        ("0.18.4", "0.18.9"),
        ("0.13.2", "0.14.5"),  # older than every snapshot: the oldest
        ("0.20.0", "0.19.8"),  # newer than every snapshot: the newest
        (None, "0.19.8"),  # not installed: the newest
    ],
)
def test_installed_release_snaps_to_a_shipped_snapshot(installed: str | None, chosen: str) -> None:
    assert resolve_version("deepspeed", None, installed) == chosen
    assert resolve_version("deepspeed", "0.17", installed) == "0.17.6"  # an explicit choice wins


def test_installed_llamafactory_snaps() -> None:
    assert resolve_version("llamafactory", None, "0.9.4") == "0.9.4"
    assert resolve_version("llamafactory", None, "0.9.3") == "0.9.3"  # every 0.9.x release has its own
    assert resolve_version("llamafactory", None, "0.9.2.dev0") == "0.9.1"  # the release before, never 0.9.2
    assert resolve_version("llamafactory", None, "0.8.3") == "0.9.0"  # older than every snapshot: the oldest
    assert resolve_version("llamafactory", None, "0.9.6.dev0") == "0.9.5"
    with pytest.raises(VersionError, match=r"shipped: 0\.9\.0, 0\.9\.1, .*0\.9\.5"):
        resolve_version("llamafactory", "0.8.3", None)


@pytest.mark.parametrize(
    ("selected", "spec", "judged"),
    [
        ("0.9.5", None, ("0.9.5",)),  # nothing stated: the selected (newest) release
        ("0.9.3", "==0.9.3", ("0.9.3",)),  # an exact pin reaches one release
        ("0.9.5", ">=0.9.3", ("0.9.3", "0.9.4", "0.9.5")),  # a range: every shipped release it allows
        ("0.9.4", ">=0.9.3,<0.9.5", ("0.9.3", "0.9.4")),
        ("0.9.0", "<0.8", ("0.9.0",)),  # a range that reaches no snapshot: the one that judges it
    ],
)
def test_the_releases_a_job_is_judged_for(selected: str, spec: str | None, judged: tuple[str, ...]) -> None:
    """What a rule whose failure exists in some releases only (LF019: 0.9.5's) asks: the range the project allows,
    else the selected release."""
    rng = versions.VersionRange("llamafactory", spec, "requirements.txt") if spec else None
    assert versions.judged_releases(selected, rng) == judged


def fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")


def test_the_doctor_reads_dist_info_without_importing(tmp_path: Path) -> None:
    """The one reading of what a node has installed (`cfgopt doctor`'s stack): dist-info folders, never an
    import; a release read there snaps to its snapshot."""
    from cfgopt.environment.node import read_stack

    site = tmp_path / "site"
    fake_dist(site, "deepspeed", "0.16.9")
    fake_dist(site, "llamafactory", "0.9.4")
    imported_before = "deepspeed" in sys.modules  # (the oracle tests of the same session may have imported it)
    stack = read_stack(str(tmp_path), site_dirs=[str(site)], env={})
    assert (stack.environment.version("deepspeed"), stack.environment.version("llamafactory")) == ("0.16.9", "0.9.4")
    assert resolve_version("deepspeed", installed=stack.environment.version("deepspeed")) == "0.16.4"
    assert resolve_version("llamafactory", installed=stack.environment.version("llamafactory")) == "0.9.4"
    assert resolve_version("llamafactory") == "0.9.5"
    assert ("deepspeed" in sys.modules) == imported_before  # detection never imports the package


def test_the_doctors_reading_agrees_with_importlib_metadata(tmp_path: Path) -> None:
    """Same answer as `importlib.metadata.version` (which the stack mirrors without importing it)."""
    import importlib.metadata

    from cfgopt.environment.node import read_stack

    stack = read_stack(str(tmp_path), env={})
    for name in ("pytest", "pydantic", "pydantic_core", "PyYAML", "pyyaml"):
        assert stack.environment.version(name) == importlib.metadata.version(name), name
    assert stack.environment.version("no-such-distribution-cfgopt") is None


def test_the_installed_release_decides_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter cfgopt runs in is not the job's (issue 32, docs/environment.md): with nothing stated, the
    newest snapshots judge, whatever is installed here; a stated environment names the release."""
    site = tmp_path / "site"  # an older release installed in the interpreter cfgopt runs in
    fake_dist(site, "deepspeed", "0.16.9")
    fake_dist(site, "llamafactory", "0.9.4")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    cfg = write(tmp_path, "cfg.yaml", TRAIN_HEAD + "group_by_length: true\n")
    assert pick(lint([cfg], "--select", "LF001")[1], "LF001")  # judged by 0.9.5, not the 0.9.4 installed
    node = write(tmp_path, "node.txt", "llamafactory==0.9.4\n")
    assert lint([cfg], "--select", "LF001", "--environment", str(node))[1] == []  # valid in 0.9.4


def test_lint_reads_only_the_selected_snapshots() -> None:
    """Snapshots load lazily: a run with nothing unknown reads the chosen pair and the small index only."""
    code = (
        "import json, sys\n"
        "from cfgopt.knowledge import schema, versions\n"
        "read = []\n"
        "orig = schema._read.__wrapped__\n"
        "schema._read = lambda name: read.append(name) or orig(name)\n"
        "from cfgopt.cli import main\n"
        "main(['lint', '--exit-zero', '--format', 'json', '--deepspeed-version', '0.16', 'fixtures/clean'])\n"
        "print(json.dumps(sorted(set(read))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == ["deepspeed-0.16.4.json", "llamafactory-0.9.5.json"]


def test_ds027_knows_every_block_the_table_names() -> None:
    """DS027 judges a key only where the probe table names it (PROBED_BLOCKS, so a clean lint reads no table):
    the constant must hold every block of every release the table holds."""
    from cfgopt.rules.ds027_section_not_an_object import PROBED_BLOCKS

    table = json.loads((ROOT / "cfgopt/knowledge/schemas/ds-section-values.json").read_text())
    named = {block for release in table.values() for block in release["sections"]}
    assert named == PROBED_BLOCKS
