"""cfgopt: lint and auto-fix LLaMA-Factory training YAML and the DeepSpeed JSON it points to."""

__version__ = "0.1.0"


def __getattr__(name: str):  # the API is imported on first use, so `cfgopt lint` pays nothing for it
    if name in ("lint_text", "fix_text"):
        from cfgopt import api

        return getattr(api, name)
    raise AttributeError(name)
