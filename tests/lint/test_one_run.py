"""A lint is one run (`cfgopt.text.real_paths.one_run`): what it keeps of the file system (each path's real path)
is asked again by the next run in the same process, as the editor server's lints after each edit are."""

from __future__ import annotations

from pathlib import Path

from cfgopt.lint.engine import lint_paths
from cfgopt.lint.project_config import Resolver


def test_two_lints_in_one_process_follow_a_relinked_deepspeed_json(tmp_path: Path) -> None:
    """The editor server lints again in the same process: the JSON a config's `deepspeed:` reaches through a link
    is the one the link names at that lint."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "z2.json").write_text('{"zero_optimization": {"stage": 2}}\n')
    (tmp_path / "z3.json").write_text('{"zero_optimization": {"stage": 3}}\n')
    (tmp_path / "ds.json").symlink_to(tmp_path / "z2.json")
    config = tmp_path / "train.yaml"
    config.write_text(
        "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
        "dataset: identity\ntemplate: llama3\noutput_dir: out\ndeepspeed: ds.json\n"
    )

    def linked() -> set[Path]:
        result = lint_paths([config], Resolver(isolated=True, cwd=tmp_path))
        return set(result.file_settings) - {config.resolve()}

    assert linked() == {(tmp_path / "z2.json").resolve()}
    (tmp_path / "ds.json").unlink()
    (tmp_path / "ds.json").symlink_to(tmp_path / "z3.json")
    assert linked() == {(tmp_path / "z3.json").resolve()}
