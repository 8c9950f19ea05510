"""LLaMA-Factory launches inside shell scripts, read the way LLaMA-Factory reads `sys.argv`.

How cfgopt reports a command line (documented in docs/command-lines.md): every launch of LLaMA-Factory's
training in a `.sh`/`.bash` file becomes one source whose entries are its `--key value` arguments, spans on
the tokens. The script is read once by the shell tokenizer (`cfgopt.loaders.shell.scan`); each simple command
is stripped of what runs it without being it (`nohup`, `time`, `env A=1`, `do`, `VAR=value` ...) and matched
against the launch shapes: `llamafactory-cli train`, `python src/train.py`, `python -m llamafactory.cli train`,
`deepspeed`/`torchrun`/`accelerate launch` of LLaMA-Factory's entry points. The launcher's own options are
not LLaMA-Factory's, and only the GPU count they imply is kept (`command["launcher_gpus"]`).
Without a YAML, LLaMA-Factory hands the arguments to `HfArgumentParser`, whose argparse rejects an invalid
choice or a non-boolean at once (exit 2); the rules report exactly that. With a YAML
(`llamafactory-cli train cfg.yaml key=value`), the YAML is linted as its own file.

One module per concern, in the order a script passes through them:
- `commands`: the script's commands in the order they run, one `Source` per launch (`find_commands`, here too);
- `environment`: the script's variables, arrays and exports so far, and a command's words expanded with them;
- `functions`: the shell functions a script defines, read at each call;
- `prefixes`: what runs a command without being it (`nohup`, `env A=1`, `VAR=value` ...), skipped;
- `shapes`: which command is a launch, and how it is launched (`launch_of`, `Launch`);
- `options`: the options of launchers, `python` and MPI / Slurm wrappers, read as words;
- `gpus`: the GPU count a launch states (`launcher_gpus`);
- `source`: the `Source` of one launch, its arguments as argparse reads them;
- `cut_off`: a launch cut in two by a missing `\\` or a commented-out line (LF053);
- `line_endings`: what bash passes a launch in a script with CRLF line endings (LF055).
"""

from __future__ import annotations

from cfgopt.loaders.launch.commands import find_commands

__all__ = ["find_commands"]
