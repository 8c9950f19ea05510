"""cfgopt: lint and auto-fix LLaMA-Factory training YAML and the DeepSpeed JSON it points to.

The Python API is `cfgopt.lint_text` and `cfgopt.fix_text` (cfgopt/api.py); the command line is cfgopt/cli.py.
"""

from cfgopt.api import fix_text, lint_text
from cfgopt.version import __version__

__all__ = ["__version__", "fix_text", "lint_text"]
