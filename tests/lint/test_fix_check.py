"""`cfgopt.lint.fix_check.damage`: the fixer's rule-independent last word on an edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.lint.fix_check import apply_edits, damage
from cfgopt.text.diagnostics import Edit

YAML = Path("cfg.yaml")


def edit_at(text: str, old: str, new: str) -> Edit:
    start = text.index(old)
    return Edit(start, start + len(old), new)


@pytest.mark.parametrize(
    ("text", "old", "new", "why"),
    [
        ("a: 1\nb: 2\n", "b", "a", "repeat the key `a`"),
        ("a: &x 1\nb: *x\n", "1", "2", "also change `b`"),
        ("a: &x 1\nb: *x\n", "*x", '"1"', "alias"),
        ("a: !!int 5\n", "5", '"5"', "tag"),
        ("base: &m\n  k: 1\nc: *m\n", "1", "2", "also change `base.k`"),
        ("a: 1\n", "1", "[", "would not load"),
        ("a: 1\n", "1", "1", "changes nothing"),
    ],
)
def test_yaml_damage_is_refused(text: str, old: str, new: str, why: str) -> None:
    _, reason = damage(YAML, text, [edit_at(text, old, new)], "yaml")
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        ("a: &x 1\nb: 2\n", "1", '"1"'),  # an anchor nobody uses
        ("base: &m\n  k: 1\nc: *m\nd: 2\n", "c: *m\n", ""),  # deleting the alias's own entry
        ("a: 1  # keep\nb: 2\n", "a", "c"),  # a rename names both keys
        ("a: 1\nb: 2", "b: 2", "b: 2\nc: 3"),  # an insert names the new key
    ],
)
def test_yaml_named_changes_pass(text: str, old: str, new: str) -> None:
    assert damage(YAML, text, [edit_at(text, old, new)], "yaml")[1] is None


def test_json_duplicate_and_unnamed_change() -> None:
    text = '{"a": 1, "b": {"c": 2}}'
    assert "repeat" in (damage(Path("ds.json"), text, [edit_at(text, '"b"', '"a"')], "json")[1] or "")
    assert damage(Path("ds.json"), text, [edit_at(text, "2", "3")], "json")[1] is None


def test_script_protected_text() -> None:
    text = "cat > g.yaml <<EOF\nlr: 1\nEOF\nllamafactory-cli train --lr $LR --flash_attn Fa\n"
    assert "heredoc" in (damage(Path("run.sh"), text, [edit_at(text, "lr: 1", "lr: 2")], "script")[1] or "")
    assert "shell computes" in (damage(Path("run.sh"), text, [edit_at(text, "$LR", "1")], "script")[1] or "")
    assert damage(Path("run.sh"), text, [edit_at(text, "Fa", "sdpa")], "script")[1] is None


def test_apply_edits_reports_where_each_replacement_landed() -> None:
    new, images = apply_edits("abcdef", [Edit(4, 5, "XYZ"), Edit(1, 2, "")])
    assert new == "acdXYZf" and images == [(1, 1), (3, 6)]
