"""A local model folder's `config.json`, as transformers' `AutoConfig` finds it: the one reader of it (the job's
model facts, LF051, `verify`'s synthetic model, `tune`'s memory fit).

`model_name_or_path` names a local folder when it holds a `config.json`: an absolute path as written, a relative
one tried against the config's folder, then the current folder (as LLaMA-Factory, started from either, would
resolve it). The file is read through the bounded reader (`user_files.read_bounded`: a FIFO or a device named
`config.json` is not read, a huge file is refused) and parsed as JSON it did not write (`user_files.parse_json`);
what it says is handed to `cfgopt/knowledge/model_family.py` and `model_shapes.py` as a `LocalModel`, which read
no file themselves.
"""

from __future__ import annotations

from pathlib import Path

from cfgopt.knowledge.model_family import LocalModel
from cfgopt.text.user_files import parse_json, read_bounded

CONFIG_JSON = "config.json"


def model_config(ref: str, hint: Path | None) -> tuple[Path, object] | None:
    """A local model folder's `config.json`, parsed: (folder, data) for the first of `ref` (an absolute path),
    else `hint / ref` then `ref` that holds one; None when none does, or it cannot be read or parsed."""
    path = Path(ref).expanduser()
    candidates = [path] if path.is_absolute() else [p for p in ((hint / path) if hint else None, path) if p]
    for folder in candidates:
        try:
            config_file = folder / CONFIG_JSON
            if not config_file.is_file():
                continue
            return folder, parse_json(read_bounded(config_file))
        except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8 / JSON, or nested too deeply
            return None
    return None


def local_model(ref: object, folder: Path | None) -> LocalModel | None:
    """The model folder and its config.json when `ref` (surrounding whitespace ignored) is a local folder holding
    one that reads as a JSON object; None otherwise (not a non-empty string, a hub id, a missing folder, a FIFO,
    a device, a file too large)."""
    if not isinstance(ref, str) or not ref.strip():
        return None
    found = model_config(ref.strip(), folder)
    if found is None or not isinstance(found[1], dict):
        return None
    return LocalModel(found[0], found[1])
