"""What the synthetic tokenizer supports, importable without tokenizers/transformers (parent side)."""

SUPPORTED_TEMPLATES = {"llama3", "qwen", "qwen3", "qwen3_nothink", "default", "empty", "chatml"}
