"""cfgopt: lint and auto-fix LLaMA-Factory training YAML and the DeepSpeed JSON it points to."""

__version__ = "0.1.0"
