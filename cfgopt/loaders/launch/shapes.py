"""The launch shapes: which simple command is a launch of LLaMA-Factory (`launch_of`) and how it is launched
(`Launch`): `llamafactory-cli train`, `python src/train.py`, `python -m llamafactory.cli train`,
`deepspeed` / `torchrun` / `accelerate launch` of its entry points, behind an MPI or Slurm wrapper
(`mpirun -np 16 ...`, `srun -N 2 torchrun ...`), and another project's script run by the HF Trainer.
"""

from __future__ import annotations

import re

from cfgopt.loaders.launch.options import gpu_count, is_script_path, read_options, wrapper_options
from cfgopt.loaders.launch.prefixes import skip_prefixes
from cfgopt.loaders.shell import Word
from cfgopt.text.record import Record

SUBCOMMAND_GROUP = {
    "train": "train",
    "chat": "infer",
    "export": "infer",
    "api": "infer",
    "webchat": "infer",
    "eval": "eval",
}
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
# Keys only LLaMA-Factory's arguments have: a `src/train.py` of another project is not LLaMA-Factory's.
_SIGNATURE_KEYS = ("--stage", "--finetuning_type", "--template")


class Launch(Record):
    """One launch of LLaMA-Factory found in a script."""

    name: Word  # the word that names what runs (`llamafactory-cli`, `deepspeed`, `python`, ...)
    kind: str  # what reads the options before LLaMA-Factory's: "cli", "python", "deepspeed", "torchrun", "accelerate"
    launcher: str  # how it is launched, as the docs name it
    subcommand: str  # `train`, `chat`, ...: LLaMA-Factory's subcommand (`train` for the training scripts)
    subcommand_word: Word | None
    args: list[Word]  # LLaMA-Factory's arguments
    options: dict[str, Word]  # the launcher's options (name -> value word; a flag's value is its own word)
    env: dict[str, Word]  # `VAR=value` prefixes and `env VAR=value` of this command
    # the processes an MPI / Slurm wrapper starts (`mpirun -np 16 python ...`) and what says so; None: no wrapper
    # or no count stated
    processes: tuple[int, str] | None = None
    # whose arguments these are: "llamafactory", or "hf" for another project's script run by the HF Trainer
    # (`torchrun train.py --deepspeed ds.json --bf16 --output_dir out`), read by its TrainingArguments names only
    trainer: str = "llamafactory"


def launch_of(words: list[Word]) -> Launch | None:
    """The LLaMA-Factory launch a simple command is, or None."""
    env: dict[str, Word] = {}
    k = skip_prefixes(words, 0, env)
    if k >= len(words) or not words[k].literal:
        return None
    name = words[k]
    program = name.text.rsplit("/", 1)[-1]
    if program in ("llamafactory-cli", "lmf"):
        return _cli(name, "cli", program, words[k + 1 :], {}, env)
    if _PYTHON.fullmatch(program):
        return _python(name, words, k + 1, env)
    if program in ("deepspeed", "torchrun"):
        return _launcher(name, program, words, k + 1, env)
    if program == "accelerate" and k + 1 < len(words) and words[k + 1].text == "launch":
        return _launcher(name, "accelerate", words, k + 2, env, "accelerate launch")
    if program in _WRAPPERS:
        return _wrapped(program, words, k + 1, env)
    return None


# Programs that start another one on every rank (MPI, Slurm): `mpirun -np 16 python src/train.py ...`
_WRAPPERS = frozenset({"mpirun", "mpiexec", "orterun", "srun"})
_LAUNCHED = re.compile(r"python(\d+(\.\d+)?)?|torchrun|deepspeed|accelerate|llamafactory-cli|lmf")


def _wrapped(wrapper: str, words: list[Word], k: int, env: dict[str, Word]) -> Launch | None:
    """The launch an MPI or Slurm wrapper runs: its first word naming a launcher or Python (the wrapper's
    options before it are its own); the processes it starts where it says how many."""
    inner = next(
        (j for j in range(k, len(words)) if words[j].literal and _LAUNCHED.fullmatch(words[j].text.rsplit("/", 1)[-1])),
        None,
    )
    if inner is None:
        return None
    launch = launch_of(words[inner:])
    if launch is None:
        return None
    options = wrapper_options(words[k:inner])
    shown = f"{wrapper} {launch.launcher}"
    launch = launch._replace(launcher=shown, env={**env, **launch.env}, processes=_processes(wrapper, options))
    nodes = options.get("--nodes") or options.get("-N")
    one_task_per_node = not any(o in options for o in ("--ntasks", "-n", "--ntasks-per-node"))
    if wrapper == "srun" and launch.kind == "torchrun" and nodes is not None and one_task_per_node:
        # `srun -N 2 torchrun --nproc_per_node 8 ...`: one torchrun per node, each starting its ranks
        launch = launch._replace(options={"--nnodes": nodes, **launch.options})
    return launch


def _processes(wrapper: str, options: dict[str, Word]) -> tuple[int, str] | None:
    if wrapper != "srun":
        for option in ("-np", "-n", "--np", "-c"):
            count = gpu_count(options.get(option))
            if count is not None:
                return count, f"`{wrapper} {option} {count}`"
        return None
    count = gpu_count(options.get("--ntasks") or options.get("-n"))
    if count is not None:
        return count, f"`srun --ntasks {count}`"
    per_node = gpu_count(options.get("--ntasks-per-node"))
    nodes = gpu_count(options.get("--nodes") or options.get("-N")) or (None if per_node is None else 1)
    if per_node is not None and nodes is not None:
        return per_node * nodes, f"`srun --ntasks-per-node {per_node}` x {nodes} node(s)"
    return None


def _cli(
    name: Word, kind: str, shown: str, rest: list[Word], options: dict[str, Word], env: dict[str, Word]
) -> Launch | None:
    if not rest or rest[0].text not in SUBCOMMAND_GROUP:
        return None
    return Launch(name, kind, shown, rest[0].text, rest[0], rest[1:], options, env)


def _python(name: Word, words: list[Word], k: int, env: dict[str, Word]) -> Launch | None:
    """`python [-u] src/train.py ...`, `python -m llamafactory.cli train ...`, `python -m torch.distributed.run
    ...` (torchrun)."""
    options, k = read_options(words, k, "python")
    module = options.get("-m")
    if "-c" in options:
        return None
    if module is not None:
        if module.text in ("torch.distributed.run", "torch.distributed.launch"):
            return _launcher(name, "torchrun", words, k, env, f"python -m {module.text}")
        return _entry_point(name, "python", f"python -m {module.text}", module.text, True, words[k:], options, env)
    if k >= len(words) or not is_script_path(words[k]):
        return None
    shown = f"python {words[k].text}"
    return _entry_point(name, "python", shown, words[k].text, False, words[k + 1 :], options, env)


def _launcher(name: Word, kind: str, words: list[Word], k: int, env: dict[str, Word], shown: str = "") -> Launch | None:
    """`deepspeed [options] SCRIPT ...`, `torchrun [options] SCRIPT ...`, `accelerate launch [options] SCRIPT
    ...`: the options before the script are the launcher's."""
    options, k = read_options(words, k, kind)
    if k >= len(words) or not is_script_path(words[k]):
        return None
    module = any(flag in options for flag in ("-m", "--module"))
    shown = f"{shown or kind} {words[k].text}"
    return _entry_point(name, kind, shown, words[k].text, module, words[k + 1 :], options, env)


def _entry_point(
    name: Word,
    kind: str,
    shown: str,
    target: str,
    module: bool,
    rest: list[Word],
    options: dict[str, Word],
    env: dict[str, Word],
) -> Launch | None:
    """LLaMA-Factory's arguments when `target` (a script path, or a module name) is one of its entry points."""
    if module:
        if target == "llamafactory.cli":
            return _cli(name, "cli" if kind == "python" else kind, shown, rest, options, env)
        if target == "llamafactory.launcher":
            return Launch(name, kind, shown, "train", None, rest, options, env)
        return None
    path = target.replace("\\", "/")
    if path.endswith(("llamafactory/launcher.py", "train_bash.py")):
        return Launch(name, kind, shown, "train", None, rest, options, env)
    if path == "src/train.py" or path.endswith("/src/train.py"):
        signed = (rest and is_config(rest[0])) or any(w.text.partition("=")[0] in _SIGNATURE_KEYS for w in rest)
        if signed:
            return Launch(name, kind, shown, "train", None, rest, options, env)
    if path.endswith(".py") and _hf_trainer_arguments(rest):
        return Launch(name, kind, shown, "train", None, rest, options, env, trainer="hf")
    return None


def _hf_trainer_arguments(words: list[Word]) -> bool:
    """Do the arguments read as the HF Trainer's (`HfArgumentParser` over TrainingArguments)? `--output_dir` with
    `--per_device_train_batch_size`, or with a `--deepspeed` naming a JSON file (DeepSpeed's own `--deepspeed`
    is a flag, its file `--deepspeed_config`)."""
    keys = [w.text.partition("=") for w in words]
    if not any(key == "--output_dir" for key, _, _ in keys):
        return False
    for i, (key, eq, inline) in enumerate(keys):
        if key == "--per_device_train_batch_size":
            return True
        if key == "--deepspeed":
            value = inline if eq else (words[i + 1].text if i + 1 < len(words) else "")
            if value.endswith(".json"):
                return True
    return False


def is_config(word: Word) -> bool:
    return word.text.endswith(CONFIG_SUFFIXES) and not word.text.startswith("-")
