"""Signal over noise: the default selection, the unstated target, and DS090 judged against the releases the
user's project allows (a `deepspeed-version` range, or the repository's own dependency pins).

Why: on real configs DS090 warned about releases the user may never run, and ROCm / 192 GiB advice reached
configs written for 80 GB NVIDIA clusters because a target was assumed silently (issue 14).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rule_cases import run_cli

from cfgopt.environment import pins
from cfgopt.knowledge import versions
from cfgopt.knowledge.versions import VersionRange
from cfgopt.text.requirements.pip_files import line_pins

DS_JSON = (
    '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}'
)
ROCM_JSON = '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}'
TRAIN = (
    "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndataset: d\ntemplate: t\n"
    "output_dir: o\nper_device_train_batch_size: 1\n"
)


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    """A repository (a folder with `.git`) holding `files`, and a DeepSpeed JSON in configs/."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "configs").mkdir(exist_ok=True)
    (root / "configs" / "ds.json").write_text(DS_JSON)
    return root


def codes(*args: str) -> list[tuple[str, str]]:
    code, out, err = run_cli(["lint", "--format", "json", *args])
    assert code in (0, 1), err
    return [(d["code"], d["message"]) for d in json.loads(out)["diagnostics"]]


def ds090(*args: str) -> list[str]:
    return [m for c, m in codes(*args) if c == "DS090"]


# ---------------------------------------------------------------- DS090 and the user's version range


def test_ds090_quiet_when_no_range_is_known(tmp_path: Path) -> None:
    root = repo(tmp_path, {})
    assert ds090(str(root / "configs" / "ds.json")) == []


def test_ds090_compares_the_range_of_the_project_config(tmp_path: Path) -> None:
    root = repo(tmp_path, {"cfgopt.toml": 'deepspeed-version = ">=0.16,<0.20"\n'})
    msgs = ds090(str(root / "configs" / "ds.json"))
    assert len(msgs) == 2  # gradient_clipping and the offload pin_memory
    assert any("0.0 (no clipping) in 0.16.4 to 0.18.9" in m for m in msgs)
    assert all("(DeepSpeed >=0.16,<0.20)" in m and "0.14.5" not in m for m in msgs)


def test_ds090_quiet_for_a_range_that_spans_no_change(tmp_path: Path) -> None:
    root = repo(tmp_path, {"cfgopt.toml": 'deepspeed-version = ">=0.16,<0.19"\n'})
    assert ds090(str(root / "configs" / "ds.json")) == []


@pytest.mark.parametrize(
    ("name", "text", "fires"),
    [
        ("requirements.txt", "torch\ndeepspeed>=0.14,<0.20  # any\n", True),
        ("requirements-train.txt", "deepspeed>=0.10.0,<=0.16.9\n", False),  # 0.14-0.16: same defaults
        ("requirements.txt", "deepspeed==0.19.8\n", False),  # an exact pin: nothing drifts
        ("requirements.txt", "deepspeed\n", True),  # unpinned: any release
        ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["deepspeed>=0.15"]\n', True),
        ("pyproject.toml", '[tool.poetry.dependencies]\ndeepspeed = "^0.15.0"\n', False),
        ("uv.lock", 'version = 1\n[[package]]\nname = "deepspeed"\nversion = "0.17.6"\n', False),
        ("setup.py", 'setup(extras_require={"ds": ["deepspeed>=0.18,<0.20"]})\n', True),
    ],
)
def test_ds090_follows_the_repository_pins(tmp_path: Path, name: str, text: str, fires: bool) -> None:
    root = repo(tmp_path, {name: text})
    msgs = ds090(str(root / "configs" / "ds.json"))
    assert bool(msgs) == fires, msgs
    if fires:
        assert f"the releases {name} allows" in msgs[0] or name in msgs[0]


def test_pins_are_ignored_with_isolated(tmp_path: Path) -> None:
    root = repo(tmp_path, {"requirements.txt": "deepspeed>=0.14\n"})
    assert ds090(str(root / "configs" / "ds.json"))
    assert ds090("--isolated", str(root / "configs" / "ds.json")) == []


def test_ds090_selected_by_name_compares_every_snapshot(tmp_path: Path) -> None:
    root = repo(tmp_path, {})
    (msg, _) = ds090("--extend-select", "DS090", str(root / "configs" / "ds.json"))
    assert "the shipped snapshots" in msg and "0.14.5 to 0.18.9" in msg
    assert ds090("--extend-select", "DS0", str(root / "configs" / "ds.json")) == []  # a prefix is not a name


def test_pins_choose_the_judging_release(tmp_path: Path) -> None:
    root = repo(tmp_path, {"requirements.txt": "deepspeed>=0.14,<0.16\nllamafactory==0.9.2\n"})
    (root / "configs" / "train.yaml").write_text(TRAIN)
    _, out, _ = run_cli(["lint", "--show-settings", str(root / "configs" / "ds.json")])
    assert 'deepspeed-version = "0.15.4"' in out and 'llamafactory-version = "0.9.2"' in out
    assert "DeepSpeed >=0.14,<0.16 -> releases 0.14.5, 0.15.4" in out


def test_explicit_version_beats_the_pins(tmp_path: Path) -> None:
    root = repo(tmp_path, {"requirements.txt": "deepspeed>=0.14\n"})
    _, out, _ = run_cli(["lint", "--show-settings", "--deepspeed-version", "0.16", str(root / "configs")])
    assert 'deepspeed-version = "0.16.4"' in out and "->" not in out
    assert ds090("--deepspeed-version", "0.16", str(root / "configs" / "ds.json")) == []


def test_a_range_reaching_no_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run_cli(["lint", "--deepspeed-version", "<0.10", str(tmp_path)])
    assert code == 2 and "reaches no shipped DeepSpeed snapshot" in err


def test_closest_pins_win_and_the_walk_stops_at_the_repository(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("deepspeed==0.14.5\n")  # outside the repository: not read
    root = repo(tmp_path, {"requirements.txt": "deepspeed>=0.16\n", "sub/requirements.txt": "deepspeed==0.17.6\n"})
    assert pins.find_pins(root / "sub")["deepspeed"].spec == "==0.17.6"
    assert pins.find_pins(root / "configs")["deepspeed"].spec == ">=0.16"
    (root / "requirements.txt").unlink()
    assert "deepspeed" not in pins.find_pins(root / "configs")


def test_a_llamafactory_fork_is_judged_by_its_own_release(tmp_path: Path) -> None:
    root = repo(tmp_path, {"src/llamafactory/extras/env.py": 'VERSION = "0.9.1.dev0"\n'})
    assert pins.find_pins(root / "configs")["llamafactory"].spec == "==0.9.1.dev0"
    _, out, err = run_cli(["lint", "--show-settings", str(root / "configs" / "ds.json")])
    # a development version before 0.9.1 is judged with the release before it, and says so (issue 24)
    assert 'llamafactory-version = "0.9.0"' in out and "a development version before 0.9.1" in err


@pytest.mark.parametrize(
    ("spec", "reached", "chosen"),
    [
        (">=0.16,<0.20", ("0.16.4", "0.17.6", "0.18.9", "0.19.8"), "0.19.8"),
        ("<=0.16.9", ("0.14.5", "0.15.4", "0.16.4"), "0.16.4"),
        ("<0.16.5", ("0.14.5", "0.15.4", "0.16.4"), "0.16.4"),  # a series counts when any release is admitted
        ("~=0.16.0", ("0.16.4",), "0.16.4"),
        ("==0.18.*", ("0.18.9",), "0.18.9"),
        ("^0.14.0", ("0.14.5",), "0.14.5"),
        ("==0.12.6", (), "0.14.5"),  # older than every snapshot: the oldest
    ],
)
def test_version_ranges(spec: str, reached: tuple[str, ...], chosen: str) -> None:
    rng = VersionRange("deepspeed", spec, "x")
    assert rng.shipped() == reached
    assert versions.resolve_range(rng) == chosen


# ---------------------------------------------------------------- the default selection and the target


def test_advice_that_holds_for_the_job_is_on_by_default_and_the_speculative_is_opt_in(tmp_path: Path) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(TRAIN + "lora_dropout: 0.1\n")  # no bf16/fp16 (PF002), no packing (PF006), dropout (PF010)
    found = {c for c, _ in codes(str(cfg))}
    assert {"PF002", "PF006"} <= found  # certain for the job: on by default
    assert "PF010" not in found  # speculative (a regulariser the author may want): opt-in
    assert "PF010" in {c for c, _ in codes("--extend-select", "PF010", str(cfg))}
    assert "PF010" in {c for c, _ in codes("--select", "ALL", str(cfg))}
    (tmp_path / "cfgopt.toml").write_text('extend-select = ["PF010"]\n')
    assert {c for c, _ in codes(str(cfg))} >= {"PF010"}


def test_every_opt_in_rule_says_why_it_is_speculative() -> None:
    from cfgopt.rules import all_rules

    assert all(r.opt_in_because for r in all_rules() if not r.default_on)
    assert not [r.code for r in all_rules() if r.default_on and r.opt_in_because]


def test_rules_and_rule_say_whether_a_rule_is_on_by_default() -> None:
    _, out, _ = run_cli(["rules"])
    assert "default" in out.splitlines()[0]
    assert any(line.startswith("PF001") and " on " in line for line in out.splitlines())
    assert any(line.startswith("PF010") and " opt-in " in line for line in out.splitlines())
    _, page, _ = run_cli(["rule", "PF010"])
    assert "default: off (opt-in with `--extend-select PF010`: " in page
    _, page, _ = run_cli(["rule", "PF001"])
    assert "default: on" in page


def test_hardware_rules_judge_only_a_stated_target(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text(ROCM_JSON)
    assert "DS023" not in {c for c, _ in codes(str(ds))}  # ROCm advice for a target nobody stated
    assert "DS023" in {c for c, _ in codes("--target", "mi300x", str(ds))}
    assert "DS023" not in {c for c, _ in codes("--target", "h100", str(ds))}
    cfg = tmp_path / "train.yaml"
    cfg.write_text(TRAIN + "bf16: true\ntf32: true\n")
    assert "LF007" not in {c for c, _ in codes(str(cfg))}  # tf32 is refused on ROCm only
    assert "LF007" in {c for c, _ in codes("--target", "mi300x", str(cfg))}


def test_show_settings_says_the_target_is_not_stated(tmp_path: Path) -> None:
    _, out, _ = run_cli(["lint", "--show-settings", "--isolated", str(tmp_path)])
    assert "# target: not stated (hardware rules quiet)" in out and "\ntarget =" not in out


# ---------------------------------------------------------------- XF004, settled by bench/xf004


def xf004_case(tmp_path: Path, ds_text: str, yaml_extra: str) -> Path:
    (tmp_path / "ds.json").write_text(ds_text)
    (tmp_path / "train.yaml").write_text(TRAIN + "deepspeed: ds.json\n" + yaml_extra)
    return tmp_path


def test_xf004_missing_accumulation_alone_is_not_reported(tmp_path: Path) -> None:
    """Measured: the Trainer drives DeepSpeed's accumulation boundary; the run is unchanged."""
    folder = xf004_case(
        tmp_path,
        '{"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": "auto", "zero_optimization": {"stage": 2}}',
        "gradient_accumulation_steps: 4\n",
    )
    assert codes("--select", "XF004", str(folder)) == []


@pytest.mark.parametrize("micro", ['"auto"', "1"])
def test_xf004_missing_accumulation_with_both_batch_keys_is_an_error(tmp_path: Path, micro: str) -> None:
    """Measured: DeepSpeed's batch assertion stops the run (`4 != 1 * 1 * 1`)."""
    folder = xf004_case(
        tmp_path,
        f'{{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": {micro}, "gradient_clipping": "auto", '
        '"zero_optimization": {"stage": 2}}',
        "gradient_accumulation_steps: 4\n",
    )
    code, out, _ = run_cli(["lint", "--format", "json", "--select", "XF004", str(folder)])
    (diag,) = json.loads(out)["diagnostics"]
    assert code == 1 and diag["severity"] == "error" and "Check batch related parameters" in diag["message"]


@pytest.mark.parametrize("batch", ['"auto"', "4"])
def test_xf004_train_batch_size_without_micro_batch_runs_and_is_an_info(tmp_path: Path, batch: str) -> None:
    """Measured (bench/xf004 `batch_only`): DeepSpeed derives the micro batch, the run trains as configured."""
    folder = xf004_case(
        tmp_path,
        f'{{"train_batch_size": {batch}, "gradient_clipping": "auto", "zero_optimization": {{"stage": 2}}}}',
        "gradient_accumulation_steps: 4\n",
    )
    code, out, _ = run_cli(["lint", "--format", "json", "--select", "XF004", "--gpus", "1", str(folder)])
    (diag,) = json.loads(out)["diagnostics"]
    assert code == 0 and diag["severity"] == "info", diag
    assert "(1 x 4 = 4 per GPU)" in diag["message"] and "the run trains as train.yaml says" in diag["message"]


@pytest.mark.parametrize(
    ("version", "said"), [("0.19", "clips at its default 1.0"), ("0.18", "does not clip (its default is 0.0)")]
)
def test_xf004_clipping_names_the_selected_release(tmp_path: Path, version: str, said: str) -> None:
    folder = xf004_case(
        tmp_path, '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {}}', "max_grad_norm: 0.5\n"
    )
    (msg,) = [m for c, m in codes("--select", "XF004", "--deepspeed-version", version, str(folder)) if c == "XF004"]
    assert said in msg and "max_grad_norm` (0.5 in train.yaml)" in msg


def test_a_rule_firing_on_a_quarter_of_real_configs_says_why_it_is_worth_it() -> None:
    """docs/rule-rates.json (scripts/rule_rates.py on the shared corpus) against `Rule.worth_it`."""
    from rule_cases import ROOT

    from cfgopt.rules import by_code

    measured = json.loads((ROOT / "docs" / "rule-rates.json").read_text())
    rates = measured["rules"]
    # with no target, and judged for a stated target (the speed and memory rules need one)
    columns = [rates, *measured["judged"].values()]
    assert len(columns) >= 3
    noisy = {code for column in columns for code, r in column.items() if r["rate"] > 0.25}
    assert all(by_code(code).worth_it for code in noisy if by_code(code).default_on), noisy
    assert rates["DS090"]["rate"] <= 0.10  # issue 14: at default settings, at most 10% of the DeepSpeed JSON


def test_the_rule_rates_are_those_the_rules_have_now(tmp_path: Path) -> None:
    """docs/rule-rates.json is what scripts/rule_rates.py measures with today's rules (it fell a file behind once,
    unnoticed: MEM004 after KTO's priors); rules/README.md renders it. Needs the real-config corpus."""
    import importlib.util

    from oracle_harness import CORPUS, CORPUS_SKIP
    from rule_cases import ROOT

    if not CORPUS.is_dir():
        pytest.skip(CORPUS_SKIP)
    spec = importlib.util.spec_from_file_location("rule_rates", ROOT / "scripts" / "rule_rates.py")
    assert spec is not None and spec.loader is not None
    rule_rates = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rule_rates)
    out = tmp_path / "rule-rates.json"
    assert rule_rates.main([str(CORPUS), "--out", str(out)]) == 0
    fresh = "python scripts/rule_rates.py <corpus>, then python scripts/gen_rule_docs.py"
    assert json.loads(out.read_text()) == json.loads((ROOT / "docs" / "rule-rates.json").read_text()), fresh


_PYPROJECTS = [
    '[project]\nname = "x"\ndependencies = ["torch", "deepspeed>=0.15,<0.17"]\n',
    "[project]\ndependencies = [\n  \"deepspeed[autotuning] >= 0.16 ; sys_platform == 'linux'\",\n]\n",
    '[project.optional-dependencies]\ntrain = ["llamafactory==0.9.3", "deepspeed~=0.16.0"]\n',
    '[dependency-groups]\ndev = ["llamafactory>=0.9.2", {include-group = "x"}]\n',
    '[tool.poetry.dependencies]\npython = "^3.10"\ndeepspeed = "^0.15.0"\n',
    '[tool.poetry.dependencies]\ndeepspeed = { version = ">=0.14,<0.16", optional = true }\nllamafactory = "*"\n',
    '[tool.poetry.group.train.dependencies]\nllama-factory = "0.9.1"\n',
    '[project]\n# dependencies = ["deepspeed==0.10.0"]\ndependencies = ["deepspeed==0.16.4"]\n',
]


def _pins_by_toml_parse(text: str) -> dict[str, str]:
    """The pins as a TOML parser reads them: the reference the text reading is held to."""
    import tomllib

    data = tomllib.loads(text)
    project = data.get("project", {})
    lines = list(project.get("dependencies", []))
    for group in project.get("optional-dependencies", {}).values():
        lines += group
    for group in data.get("dependency-groups", {}).values():
        lines += [item for item in group if isinstance(item, str)]
    out = pins._first_specs(pins._stated(line_pins(lines)))
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [poetry.get("dependencies", {})] + [g.get("dependencies", {}) for g in poetry.get("group", {}).values()]
    for table in tables:
        for name, value in table.items():
            spec = value.get("version") if isinstance(value, dict) else value
            if pins._package_of(name) and pins._package_of(name) not in out:
                out[pins._package_of(name)] = "" if spec == "*" else spec
    return out


@pytest.mark.parametrize("text", _PYPROJECTS)
def test_toml_pins_read_as_text_match_a_toml_parse(tmp_path: Path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    assert pins._pyproject(tmp_path / "pyproject.toml") == _pins_by_toml_parse(text)


def test_lock_files_read_as_text(tmp_path: Path) -> None:
    text = (
        'version = 1\n[[package]]\nname = "torch"\nversion = "2.4.0"\n\n'
        '[[package]]\nname = "deepspeed"\nversion = "0.16.4"\nsource = { registry = "https://pypi.org/simple" }\n'
    )
    (tmp_path / "uv.lock").write_text(text)
    assert pins._lock(tmp_path / "uv.lock") == {"deepspeed": "==0.16.4"}


def test_lint_does_not_load_a_toml_parser_for_pins(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pyproject.toml": '[project]\ndependencies = ["deepspeed>=0.15"]\n'})
    code = (
        "import sys; from cfgopt.cli import main; main(['lint', '-q', sys.argv[1]]); "
        "print('tomllib' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(root / "configs")], capture_output=True, text=True, check=False
    ).stderr
    assert out.strip().splitlines()[-1] == "False"
