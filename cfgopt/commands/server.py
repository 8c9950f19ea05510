"""`cfgopt server`: the language server, over stdio (cfgopt/server/; set-up in docs/editor.md). Needs the `server`
extra of the `cfgopt-lint` distribution (`pip install '.[server]'` in the checkout: pygls); nothing else imports it."""

from __future__ import annotations

import argparse

DISTRIBUTION = "cfgopt-lint"  # pyproject.toml's `name`; `cfgopt` on the package index is an unrelated project


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Editors' LSP clients often pass --stdio; stdio is the only transport, so it is accepted and changes nothing.
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default and only way)")


def run(args: argparse.Namespace) -> int:
    try:
        from cfgopt.server.lsp import serve
    except ImportError as exc:
        raise SystemExit(missing_message(exc.name)) from None
    return serve()


def missing_message(module: str | None) -> str:
    """What to install: the `server` extra of this distribution (`cfgopt` on the package index is another project)."""
    return (
        f"cfgopt server: {module or 'pygls'} is not installed; the server needs the `server` extra of cfgopt's "
        f"distribution, {DISTRIBUTION}: `pip install '.[server]'` in cfgopt's checkout (docs/editor.md)"
    )
