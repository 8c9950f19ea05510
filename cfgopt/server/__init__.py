"""`cfgopt server`: a language server (LSP over stdio) for LLaMA-Factory YAML, DeepSpeed JSON and launch scripts.

`analysis` is the editor-independent part (the open documents, the lint of each change with the same engine,
project configs and cross-file job as `cfgopt lint`, fixes as text edits, hover and completion from the rules'
docs and the judged release's schemas); `lsp` is the pygls wiring. Only `cfgopt server` imports this package:
the lint path never loads pygls (tests/server/test_server.py). Set-up for VS Code and Neovim: docs/editor.md.
"""
