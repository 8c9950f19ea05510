"""The figures of the README's test command (stated in CONTRIBUTING.md) are the ones scripts/readme_figures.py reads
and checks: each is stated in the form the script reads, with its date, and the rules the docs name as opt-in are
opt-in. The script
itself (it collects the whole suite, about 15 s) is run by hand; its parsing is tested here."""

from __future__ import annotations

import importlib.util

from rule_cases import ROOT

from cfgopt.knowledge.rule_catalog import OPT_IN

_SPEC = importlib.util.spec_from_file_location("readme_figures", ROOT / "scripts" / "readme_figures.py")
figures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(figures)


def test_contributing_states_each_figure_with_its_date() -> None:
    said = figures.stated((ROOT / "CONTRIBUTING.md").read_text())
    assert figures.minutes_seconds(said.install[0]) > 0 and said.install[1].startswith("20")
    assert figures.minutes_seconds(said.run[0]) > 0 and int(said.run[1]) > 0 and said.run[2].startswith("20")
    assert said.collected[0] > 1000 and said.collected[1].startswith("20")


def test_the_docs_name_only_opt_in_rules_as_opt_in() -> None:
    assert figures.opt_in_claims(OPT_IN, figures.opt_in_docs()) == []


def test_a_rule_on_by_default_named_as_opt_in_is_caught() -> None:
    docs = {
        "README.md": "Only the speculative is opt-in (e.g. `--extend-select PF009`).",
        "docs/configuration.md": "Only the speculative is opt-in: PF003,\n  PF009-PF014, PF052, DS019, each saying why",
    }
    wrong = figures.opt_in_claims(OPT_IN, docs)
    assert len(wrong) == 2 and "PF009 as opt-in" in wrong[0] and "PF009-PF014" in wrong[1]


def test_the_collected_count_and_the_times_are_read() -> None:
    assert figures.collected_count("tests/test_x.py::test_y\n\n3300 tests collected in 10.84s\n") == 3300
    assert figures.minutes_seconds("9 min 56 s") == 596 and figures.as_minutes_seconds(596) == "9 min 56 s"
    assert figures._expand("PF003, PF010-PF014") == {"PF003", "PF010", "PF011", "PF012", "PF013", "PF014"}


def test_the_docs_have_no_unmeasured_round_figure() -> None:
    """Figures once stated wrongly are gone: each time is a measurement with its date."""
    for name in ("README.md", "CONTRIBUTING.md"):
        text = " ".join((ROOT / name).read_text().split())
        for stale in ("about 3 minutes", "about 5 minutes", "2,912 tests", "--extend-select PF009"):
            assert stale not in text, f"{name}: {stale}"


def test_the_readme_and_contributing_and_ci_run_one_test_command() -> None:
    """The README's test command (its two set-up lines), CONTRIBUTING.md's and the last two of .ci/run are one."""
    install = "pip install -q -e '.[test,oracle]' && pip uninstall -q -y torchvision torchaudio"
    run = "DISABLE_VERSION_CHECK=1 CFGOPT_REQUIRE_ORACLE=1 python -m pytest -q -n 2"
    for name in ("README.md", "CONTRIBUTING.md"):
        assert f"```sh\n{install}\n{run}\n```" in (ROOT / name).read_text(), name
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "python -m pytest -q -n 2" and ci[-2] == install
    assert f"export {run.removesuffix(' python -m pytest -q -n 2')}" in ci
