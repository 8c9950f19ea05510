"""`load_job`: the job of one training YAML and the DeepSpeed JSON it names, read and linked as the lint engine
reads them (`project.project`), for `estimate`, `verify` and `tune`; apart from `cfgopt.job.job`, which the rules
read."""

from __future__ import annotations

from pathlib import Path

from cfgopt.project.project import Project, build_project, missing_reason
from cfgopt.text.source import Kind
from cfgopt.text.user_files import looked_at

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.job import Job
    from cfgopt.job.settings import Settings
    from cfgopt.text.source import Source


class JobError(Exception):
    """A config that cannot be made a job: the message is one line for the user."""


def _not_a_training_config(path: Path, project: Project) -> str:
    """Why `path` is no job, in words a user acts on (a DeepSpeed JSON, a script, another YAML)."""
    from cfgopt.loaders import discovery

    kinds = {s.kind for s in project.sources}
    if path.suffix.lower() in discovery.SCRIPT_SUFFIXES:
        return f"{path}: a shell script; give the training YAML it passes to llamafactory-cli"
    if Kind.DEEPSPEED in kinds:
        return f"{path}: a DeepSpeed config; give the LLaMA-Factory training YAML that names it (`deepspeed:`)"
    return f"{path}: not a LLaMA-Factory training config (no `model_name_or_path`)"


def _launched(path: Path, project: Project) -> Source | None:
    """For a launch script, its one `llamafactory-cli train` line: the job lint judges there, the YAML it names
    under the line's overrides (`finetuning_type=full cutoff_len=32768`), never the YAML alone; JobError when
    the script launches several jobs (each is its own estimate) or its line's arguments are known only at run
    time. None for a file that is not a script."""
    from cfgopt.text.document import real_path

    key = real_path(path)
    lines = [s for s in project.sources if s.kind == Kind.LF_CLI and real_path(s.document.path) == key]
    trains = [s for s in lines if s.command.get("group", "train") == "train"]
    if not trains:
        return None
    if len(trains) > 1:
        at = ", ".join(str(s.document.position(s.command.get("start", 0))[0]) for s in trains[:5])
        raise JobError(
            f"{path}: launches {len(trains)} training jobs (lines {at}); `estimate` judges one: "
            "give a script with that line alone, or its YAML with the line's overrides written in"
        )
    if trains[0].command.get("open"):
        raise JobError(
            f"{path}: its launch line's arguments are known only at run time (`$@`, a variable): no estimate"
        )
    return trains[0]


def load_job(path: Path, settings: Settings) -> Job:
    """The job of one LLaMA-Factory training YAML and the DeepSpeed JSON it names, read as the real tools read
    them (the lint engine's loaders and reference resolution). Raises JobError with a one-line reason."""
    if not looked_at(path, "is_file"):
        raise JobError(f"{path}: {missing_reason(path) if not looked_at(path) else 'not a file'}")
    project = build_project([path], settings, any_reference=True)
    for problem in project.problems:
        raise JobError(f"{problem.path}: {problem.message}")
    src = _launched(path, project) or next(
        (s for s in project.sources if s.kind in (Kind.LF_TRAIN, Kind.LF_INFER)), None
    )
    if src is None:
        raise JobError(_not_a_training_config(path, project))
    if src.error is not None or not isinstance(src.data, dict):
        why = src.error.message if src.error is not None else "not a mapping"
        raise JobError(f"{path}: not a LLaMA-Factory YAML config ({why})")
    ctx = project.context(src)
    ref = src.data.get("deepspeed")
    if isinstance(ref, str) and ref:
        ds = ctx.deepspeed
        if ds is None:
            searched = ", ".join(ctx.deepspeed_searched[:3])
            raise JobError(f"deepspeed: {ref} not found (searched {searched} ...)")
        if ds.error is not None or not isinstance(ds.data, dict):
            why = ds.error.message if ds.error is not None else "not a JSON object"
            raise JobError(f"{ds.document.path}: not a readable DeepSpeed JSON ({why}); run `cfgopt lint` first")
    return ctx.job
