"""Versions as pip reports them (`--llamafactory-version`, `--deepspeed-version`, the installed release): a
development or pre-release version is judged with the release before it, never the one it leads to; a post or
local build with its release; a release newer than every snapshot with the newest; each with a note on stderr."""

from __future__ import annotations

import pytest
from rule_cases import run_cli

from cfgopt.knowledge import versions


@pytest.mark.parametrize(
    ("package", "value", "judged"),
    [
        ("llamafactory", "0.9.6.dev0", "0.9.5"),
        ("llamafactory", "0.9.2.dev0", "0.9.1"),
        ("llamafactory", "0.9.5rc1", "0.9.4"),
        ("llamafactory", "0.9.5.post1", "0.9.5"),
        ("llamafactory", "0.9.5+cu121", "0.9.5"),
        ("llamafactory", "0.9.6", "0.9.5"),
        ("deepspeed", "0.20.0.dev0", "0.19.8"),
        ("deepspeed", "0.18.9+abc123", "0.18.9"),
    ],
)
def test_pip_versions_are_judged_with_a_shipped_snapshot(package, value, judged, capsys):
    versions._NOTED.clear()
    assert versions.match_version(package, value) == judged
    assert f"note: {versions.LABELS[package]} {value}:" in capsys.readouterr().err


def test_installed_development_version_is_never_upgraded(capsys):
    versions._NOTED.clear()
    assert versions.snap_version("llamafactory", "0.9.5.dev0") == "0.9.4"
    assert "0.9.4 snapshot" in capsys.readouterr().err
    assert versions.snap_version("llamafactory", "0.9.5") == "0.9.5"


@pytest.mark.parametrize("value", ["0.8.3", "0.9.0rc1", "bogus"])
def test_versions_before_every_snapshot_are_refused_with_llamafactory_hints(value):
    with pytest.raises(versions.VersionError, match=r"a prefix such as 0\.9 .*>=0\.9\.3,<0\.9\.6"):
        versions.match_version("llamafactory", value)


def test_the_cli_accepts_a_development_version(tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(
        "model_name_or_path: m\nstage: sft\ndo_train: true\ndataset: d\ntemplate: llama3\noutput_dir: o\n"
    )
    versions._NOTED.clear()
    code, _, err = run_cli(["lint", "--select", "LF001", "--llamafactory-version", "0.9.6.dev0", str(config)])
    assert code == 0, err
    assert "judged with the 0.9.5 snapshot" in err


@pytest.mark.parametrize(
    ("spec", "reached"),
    [("==0.9.2.dev0", ("0.9.1",)), ("==0.9.6rc1", ("0.9.5",)), ("==0.9.5", ("0.9.5",))],
)
def test_an_exact_pin_of_a_development_version_reaches_the_snapshot_that_judges_it(spec, reached, capsys):
    """`--show-settings` and a range given as an option say the same snapshot as the note: a comparison of
    release numbers alone admits 0.9.2 for `==0.9.2.dev0`."""
    versions._NOTED.clear()
    assert versions.VersionRange("llamafactory", spec, "requirements.txt").shipped() == reached
    assert versions.explicit_range("llamafactory", spec, "--llamafactory-version").version == reached[-1]
