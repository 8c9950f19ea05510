"""cfgopt: lint and auto-fix LLaMA-Factory training YAML and the DeepSpeed JSON it points to.

The Python API is `cfgopt.lint_text` and `cfgopt.fix_text` (cfgopt/api.py); the command line is cfgopt/cli.py.
"""

from cfgopt.text.lean_pathlib import import_pathlib

import_pathlib()  # first, before any module imports pathlib: without urllib.parse (the module says why)

from cfgopt.api import fix_text, lint_text  # noqa: E402
from cfgopt.version import __version__  # noqa: E402

__all__ = ["__version__", "fix_text", "lint_text"]
