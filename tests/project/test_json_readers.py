"""The search for a DeepSpeed JSON's readers outside the run (`cfgopt.project.json_readers`): a config or launch line
whose `deepspeed` resolves to the JSON as the loader resolves it, under any name of it; none where the name is another
folder's file; the JSON kept where the search gives up."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.job.settings import Settings
from cfgopt.loaders.json_loader import load_json
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.project import json_readers
from cfgopt.text.document import Document
from cfgopt.text.source import Kind, Source

DS = '{"zero_optimization": {"stage": 3}}\n'


def _source(path: Path) -> Source:
    doc = Document.from_bytes(path, path.read_bytes())
    return load_json(doc, Kind.DEEPSPEED) if path.suffix == ".json" else load_yaml(doc, Kind.LF_TRAIN)


def _readers(json_path: Path, *run: Path) -> json_readers.OutsideReaders:
    return json_readers.outside_readers(_source(json_path), [_source(p) for p in run], Settings().lf_schema)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository (its own `.git`) with a JSON and the config of the run that reads it."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "z3.json").write_text(DS)
    (tmp_path / "train.yaml").write_text("model_name_or_path: m\ndeepspeed: ds/z3.json\n")
    return tmp_path


def test_the_run_alone_reads_it(project: Path) -> None:
    assert not _readers(project / "ds" / "z3.json", project / "train.yaml").keeps_json


def test_a_launch_line_through_a_variable_and_a_link_of_another_name_are_readers(project: Path) -> None:
    """`--deepspeed $DS` as bash expands it, and a YAML naming a symbolic link to the JSON under another name."""
    (project / "jobs").mkdir()
    (project / "jobs" / "run.sh").write_text(
        "DS=ds/z3.json\nllamafactory-cli train --model_name_or_path m --stage sft --deepspeed $DS\n"
    )
    (project / "ds" / "zero3.json").symlink_to("z3.json")
    (project / "jobs" / "big.yaml").write_text("model_name_or_path: m\ndeepspeed: ds/zero3.json\n")
    found = _readers(project / "ds" / "z3.json", project / "train.yaml")
    assert sorted(p.name for p in found.found) == ["big.yaml", "run.sh"]


def test_a_comment_or_another_folders_file_is_no_reader(project: Path) -> None:
    """A commented-out key names the JSON's path but is no key; `other/b.yaml` names `ds/z3.json`, which resolves
    to its own folder's file first (the loader's order)."""
    (project / "a.yaml").write_text("model_name_or_path: m\n# deepspeed: ds/z3.json\n")
    (project / "other" / "ds").mkdir(parents=True)
    (project / "other" / "ds" / "z3.json").write_text(DS)
    (project / "other" / "b.yaml").write_text("model_name_or_path: m\ndeepspeed: ds/z3.json\n")
    assert not _readers(project / "ds" / "z3.json", project / "train.yaml").keeps_json


def test_a_search_past_its_bound_keeps_the_json(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_readers, "MAX_SEARCHED", 2)
    for name in "abc":
        (project / f"{name}.yaml").write_text("model_name_or_path: m\n")
    found = _readers(project / "ds" / "z3.json", project / "train.yaml")
    assert found.keeps_json and not found.found and found.stopped.startswith("more than 2 configs and scripts")


def test_a_quoted_value_and_a_continued_launch_line_are_readers(project: Path) -> None:
    """The look before parsing never drops a reader: a quoted value (a `#` in quotes is no comment) and an option
    whose value is on the next line of a continued launch line are parsed and found."""
    (project / "quoted.yaml").write_text(
        'model_name_or_path: m  # ds/z3.json in a comment too\ndeepspeed: "ds/z3.json"\n'
    )
    (project / "run.sh").write_text(
        "llamafactory-cli train --model_name_or_path m --stage sft --deepspeed \\\n  ds/z3.json\n"
    )
    found = _readers(project / "ds" / "z3.json", project / "train.yaml")
    assert sorted(p.name for p in found.found) == ["quoted.yaml", "run.sh"]


def test_readers_come_in_the_walk_order_of_iter_files(project: Path) -> None:
    """The search walks by name (no Path per file): the readers it finds are those `discovery.iter_files` would
    give, in its order, upper-case suffixes and a hidden file's included, a hidden folder's and a `.json` left out."""
    from cfgopt.loaders import discovery

    names = ["b.YAML", "a/run.Sh", "a/z.yml", ".hidden.yaml", ".git/x.yaml", "c.json", "node_modules/n.yaml"]
    for name in names:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("model_name_or_path: m\ndeepspeed: ds/z3.json\n")
    (project / "a" / "run.Sh").write_text("llamafactory-cli train --model_name_or_path m --deepspeed ds/z3.json\n")
    found = _readers(project / "ds" / "z3.json", project / "train.yaml").found
    walked = [p for p, _ in discovery.iter_files([project]) if p in found]
    assert [p.relative_to(project).as_posix() for p in found] == [".hidden.yaml", "b.YAML", "a/run.Sh", "a/z.yml"]
    assert list(found) == walked


@pytest.mark.parametrize("name", ["a.yaml", "a.b.YML", ".yaml", "..yaml", "a.", "a..", "a", ".", "a.tar.gz", ".a.sh"])
def test_a_suffix_is_read_as_pathlib_reads_it(name: str) -> None:
    assert json_readers._suffix(name) == Path(name).suffix
