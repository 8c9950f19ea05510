"""The winner of `cfgopt tune` as changes to the user's files: the YAML edited in place by `cfgopt.plan.knob_edits`
(the speed plan's writer: comments, order and quoting stay as they are), a DeepSpeed JSON the winner needs
written beside the config (or beside the user's JSON); shown as a unified diff, or written with --write."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.plan import space
from cfgopt.plan.knob_edits import knob_edits
from cfgopt.text.document import Document
from cfgopt.tune import search

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass
class FixPlan:
    yaml_before: str
    yaml_after: str
    ds_file: Path | None = None  # a new DeepSpeed JSON to write beside the config
    ds_text: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _new_deepspeed(
    config_path: Path, src: Any, winner: search.Candidate, user_ds_path: Path | None
) -> tuple[Path, str]:
    """Where the winner's new DeepSpeed JSON goes (beside the user's JSON when there is one, else beside the
    config) and how the YAML names it (relative as the user's own `deepspeed:` value is)."""
    name = f"{config_path.stem}.tune-{winner.knobs.zero}.json"
    if user_ds_path is not None and isinstance(winner.config.get("deepspeed"), str):
        return user_ds_path.parent / name, str(Path(str(src.data.get("deepspeed"))).parent / name)
    return config_path.parent / name, str(config_path.parent / name)


def plan_fix(
    config_path: Path,
    doc: Document,
    src: Any,
    winner: search.Candidate,
    base: space.Knobs,
    user_ds: dict[str, Any] | None,
    user_ds_path: Path | None,
) -> FixPlan:
    """The YAML edits (and new DeepSpeed JSON) that turn the user's config into the winner; no re-serialising."""
    from cfgopt.lint.fixer import apply_edits

    changes = space.changed_keys(winner.knobs, base)
    action, ds = space.deepspeed_for(winner.knobs, base, user_ds)
    plan = FixPlan(doc.text, doc.text, changes=dict(changes))
    if action == "new":
        assert ds is not None
        plan.ds_file, raw_ref = _new_deepspeed(config_path, src, winner, user_ds_path)
        plan.ds_text = json.dumps(ds, indent=2) + "\n"
        changes["deepspeed"] = plan.changes["deepspeed"] = raw_ref
    if action == "drop":
        plan.changes["deepspeed"] = None
    made = knob_edits(src, changes, ("deepspeed",) if action == "drop" else ())
    if made is None:
        plan.problems.append(f"{config_path} is not a mapping of keys; set {changes} by hand")
        return plan
    for key in made.failed:
        if key in changes:
            plan.problems.append(f"`{key}` cannot be edited in place; set `{key}: {changes[key]}` by hand")
        else:
            plan.problems.append(f"`{key}` cannot be removed in place; remove it by hand")
    plan.yaml_after = apply_edits(doc.text, made.edits)
    _check(config_path, plan, set(made.failed), made.renamed)
    return plan


def _check(config_path: Path, plan: FixPlan, failed: set[str], renamed: dict[str, str]) -> None:
    """The edited YAML read back: every change reads as meant (a precision key renamed away reads as off)."""
    check = load_yaml(Document(path=config_path, text=plan.yaml_after)).data
    for key, value in plan.changes.items():
        got = check.get(key) if isinstance(check, dict) else None
        if key in renamed and got is None and value is False:
            continue
        if key not in failed and got != value:
            plan.problems.append(f"the edited YAML reads `{key}` as {got!r}, not {value!r}; nothing written")


def render_diff(config_path: Path, plan: FixPlan) -> str:
    out = list(
        difflib.unified_diff(
            plan.yaml_before.splitlines(keepends=True),
            plan.yaml_after.splitlines(keepends=True),
            fromfile=f"a/{config_path}",
            tofile=f"b/{config_path}",
        )
    )
    if plan.ds_file is not None and plan.ds_text is not None:
        out += list(difflib.unified_diff([], plan.ds_text.splitlines(keepends=True), "/dev/null", f"b/{plan.ds_file}"))
    return "".join(out)


def write_fix(config_path: Path, doc: Document, plan: FixPlan) -> list[str]:
    """Write the plan; returns the problems (empty: written)."""
    from cfgopt.text.writer import ChangedOnDisk, atomic_write, why_not_written, write_new

    if plan.problems:
        return plan.problems
    if plan.ds_file is not None and plan.ds_text is not None:
        if plan.ds_file.exists() and _text_of(plan.ds_file) != plan.ds_text:
            return [f"{plan.ds_file} exists with other content; not overwritten (nothing written)"]
        try:
            write_new(plan.ds_file, plan.ds_text.encode("utf-8"))
        except OSError as exc:
            return [f"{plan.ds_file}: not written: {why_not_written(plan.ds_file, exc)} (nothing written)"]
    try:
        atomic_write(config_path, doc.to_bytes(plan.yaml_after), expected=doc.to_bytes())
    except (ChangedOnDisk, OSError) as exc:
        return [f"{config_path}: not written: {why_not_written(config_path, exc)}"]
    return []


def apply(args: argparse.Namespace, doc: Document, plan: FixPlan) -> int:
    """The winner's changes: written (--write) or shown as a diff. 2 when they could not be written."""
    config_path: Path = args.config
    if not args.write:
        sys.stdout.write(render_diff(config_path, plan))
        for p in plan.problems:
            sys.stderr.write(f"cfgopt tune: {p}\n")
        return 0
    problems = write_fix(config_path, doc, plan)
    for p in problems:
        sys.stderr.write(f"cfgopt tune: {p}\n")
    if problems:
        return 2
    written = f" and {plan.ds_file}" if plan.ds_file else ""
    sys.stderr.write(f"cfgopt tune: wrote {config_path}{written}\n")
    return 0


def _text_of(path: Path) -> str | None:
    """The text of a file already at the winner's DeepSpeed name (bounded: a FIFO or /dev/zero there is no
    text); None when it cannot be read."""
    from cfgopt.text.user_files import read_bounded

    try:
        return read_bounded(path).decode("utf-8", errors="replace")
    except OSError:
        return None
