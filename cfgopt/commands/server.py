"""`cfgopt server`: the language server, over stdio (cfgopt/server/; set-up in docs/editor.md). Needs the `server`
extra (`pip install 'cfgopt[server]'`: pygls); nothing else imports it."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Editors' LSP clients often pass --stdio; stdio is the only transport, so it is accepted and changes nothing.
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default and only way)")


def run(args: argparse.Namespace) -> int:
    try:
        from cfgopt.server.lsp import serve
    except ImportError as exc:
        raise SystemExit(f"cfgopt server: {exc.name} is not installed: pip install 'cfgopt[server]'") from None
    return serve()
