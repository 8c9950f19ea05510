"""Lint start-up: a run imports only the rule modules the files at hand need (issue 15), and never the
heavy packages. bench/lint_speed.py measures the time; these tests keep the mechanism honest."""

from __future__ import annotations

import subprocess
import sys

from rule_cases import ROOT

from cfgopt import rules
from cfgopt.knowledge import rule_catalog as _catalog
from cfgopt.rules import all_rules, codes_and_names, rule_modules, rules_for
from cfgopt.text.source import Kind

IMPORTED = (
    "import sys; from cfgopt.cli import main; code = main(['lint', '--isolated', *sys.argv[1:]]); "
    "print(); print(' '.join(sorted(m for m in sys.modules if m.startswith(('cfgopt.rules.', 'pydantic')))))"
)


def imported_after_lint(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", IMPORTED, *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout
    return set(out.strip().splitlines()[-1].split())


def test_yaml_alone_imports_no_deepspeed_rule() -> None:
    modules = imported_after_lint("fixtures/rules/LF003/flash-attn/train.yaml")
    assert "cfgopt.rules.lf003_invalid_choice" in modules
    assert not [m for m in modules if m.startswith("cfgopt.rules.ds")]


def test_selection_limits_the_imports() -> None:
    modules = imported_after_lint("fixtures/seed/llama3_lora_sft.yaml", "--select", "LF003")
    helpers = ("cfgopt.rules.base", "cfgopt.rules.support", "cfgopt.rules.suppressions", "cfgopt.rules.pages")
    assert {m for m in modules if m.startswith("cfgopt.rules.") and not m.startswith(helpers)} == {
        "cfgopt.rules.lf003_invalid_choice"
    }


def test_plain_deepspeed_sections_need_no_pydantic_core() -> None:
    """The seed's DeepSpeed file (plain values and an unknown key) is judged without pydantic-core, and
    pydantic itself (its error URLs) is never loaded, even when pydantic-core is."""
    modules = imported_after_lint("fixtures/seed/ds_z3_config.json")
    assert not [m for m in modules if m.startswith("pydantic")]
    assert not [m for m in modules if m.startswith("cfgopt.rules.lf")]


def test_catalog_lists_every_rule_module() -> None:
    assert set(_catalog.RULES) == set(rule_modules())
    for rule in all_rules():
        code, name, kinds, keys = _catalog.RULES[type(rule).__module__.rsplit(".", 1)[1]]
        assert (code, name, set(kinds.split())) == (rule.code, rule.name, {k.value for k in rule.kinds})
        assert (keys == "*") if rule.triggers is None else set(keys.split()) == rule.triggers
    assert {r.code for r in all_rules() if not r.default_on} == _catalog.OPT_IN
    codes, names = codes_and_names()
    assert codes == {r.code for r in all_rules()} and names == {r.name: r.code for r in all_rules()}


def test_every_kind_and_selection_gives_every_rule() -> None:
    assert rules_for(set(Kind), lambda code: True) == all_rules()
    assert [r.code for r in rules_for({Kind.DEEPSPEED}, lambda code: code.startswith("DS"))] == [
        r.code for r in all_rules() if r.code.startswith("DS")
    ]


def test_a_rule_missing_from_the_catalog_still_runs(monkeypatch) -> None:
    """A stale catalog (a rule added since it was generated) costs an import, never a finding."""
    catalog = dict(_catalog.RULES)
    missing = catalog.pop("lf003_invalid_choice")
    monkeypatch.setattr(rules, "CATALOG", catalog)
    assert missing[0] in [r.code for r in rules_for({Kind.LF_TRAIN}, lambda code: True)]
    assert missing[0] in codes_and_names()[0]


def test_a_lint_run_builds_only_lints_options() -> None:
    """`cfgopt lint` neither formats the other subcommands' options nor imports their modules."""
    code = (
        "import sys; from cfgopt.cli import main; main(['lint', '--isolated', 'fixtures/seed/ds_z3_config.json']); "
        "print('imported:', *(m for m in ('cfgopt.verify.options', 'cfgopt.tune.options', 'cfgopt.commands.estimate') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    assert out.splitlines()[-1] == "imported:"


def test_help_still_lists_every_subcommand() -> None:
    from cfgopt.cli import SUBCOMMANDS, build_parser

    text = build_parser().format_help()
    assert all(name in text for name in SUBCOMMANDS)
    # `cfgopt tune x.yaml`: only tune's parser is built, and it parses the words after the subcommand
    assert build_parser("tune").parse_args(["x.yaml"]).command == "tune"
    assert build_parser("tune").format_usage() == build_parser().subcommands["tune"].format_usage()


def test_the_lint_path_loads_no_dataclasses_nor_what_argparse_need_not() -> None:
    """Creating a dataclass runs `exec` per generated method (~1 ms each class); argparse's help formatter
    would import shutil (and bz2, lzma) on every option; pins are read without a TOML parser; the memory
    model only where an estimate can be made (no target stated here)."""
    code = (
        "import sys; from cfgopt.cli import main; main(['lint', 'fixtures/seed/llama3_lora_sft.yaml']); "
        "print(' '.join(m for m in ('dataclasses', 'inspect', 'shutil', 'tomllib', 'cfgopt.memory', "
        "'cfgopt.lint.fixer', 'cfgopt.rules.suppressions') if m in sys.modules), file=sys.stderr)"
    )
    err = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False).stderr
    assert err.splitlines()[-1] == "", err
