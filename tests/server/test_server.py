"""`cfgopt server` driven by a real LSP client over stdio (pygls's own `LanguageClient`): open the seed pair,
diagnostics arrive; a change updates them; a code action's edit, applied, fixes the finding; hover gives the
rule's docs and completion the judged release's keys and choices. And the lint path never imports pygls."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rule_cases import ROOT

pytest.importorskip("pygls", reason="the `server` extra (pip install -e '.[server]')")

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

SEED = ROOT / "fixtures" / "seed"


def _apply(text: str, edits: list[lsp.TextEdit]) -> str:
    """Text edits applied as an editor does (ASCII text: characters are UTF-16 units)."""
    lines = text.split("\n")

    def offset(p: lsp.Position) -> int:
        return sum(len(line) + 1 for line in lines[: p.line]) + p.character

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


class Editor:
    """An LSP client with the diagnostics the server published, by URI and version."""

    def __init__(self) -> None:
        self.client = LanguageClient("test-editor", "1")
        self.published: dict[str, asyncio.Queue] = {}

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _published(params: lsp.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, asyncio.Queue()).put_nowait(params)

    async def diagnostics(self, uri: str, version: int) -> list[lsp.Diagnostic]:
        queue = self.published.setdefault(uri, asyncio.Queue())
        while True:
            params = await asyncio.wait_for(queue.get(), 20)
            if params.version == version:
                return params.diagnostics


async def _session(folder: Path) -> None:
    editor = Editor()
    await editor.client.start_io(sys.executable, "-m", "cfgopt", "server")
    await editor.client.initialize_async(
        lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=folder.as_uri())
    )
    editor.client.initialized(lsp.InitializedParams())
    yaml_path, json_path = folder / "llama3_lora_sft.yaml", folder / "ds_z3_config.json"
    yaml_uri, json_uri = yaml_path.as_uri(), json_path.as_uri()
    text = yaml_path.read_text()
    for uri, path, language in ((json_uri, json_path, "json"), (yaml_uri, yaml_path, "yaml")):
        editor.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=path.read_text())
            )
        )
    found = await editor.diagnostics(yaml_uri, 1)
    codes = {d.code for d in found}
    assert {"LF003", "LF001"} <= codes and all(d.source == "cfgopt" for d in found)

    # a keystroke: `flash_attn: true` -> `flash_attn: sdpa`: LF003 goes, the others stay
    text = text.replace("flash_attn: true", "flash_attn: sdpa")
    editor.client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=yaml_uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    found = await editor.diagnostics(yaml_uri, 2)
    assert "LF003" not in {d.code for d in found} and "LF001" in {d.code for d in found}

    # the code action of `compute_type` (LF001, safe): applied, the finding is gone
    compute = next(d for d in found if d.code == "LF001" and "compute_type" in d.message)
    actions = await editor.client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=yaml_uri),
            range=compute.range,
            context=lsp.CodeActionContext(diagnostics=[compute]),
        )
    )
    quick = next(a for a in actions if a.kind == lsp.CodeActionKind.QuickFix and a.title.startswith("LF001"))
    assert quick.is_preferred and quick.edit is not None
    fix_all = [a.title for a in actions if a.kind == lsp.CodeActionKind.SourceFixAll]
    assert any("unsafe" in t for t in fix_all)
    text = _apply(text, quick.edit.changes[yaml_uri])
    editor.client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=yaml_uri, version=3),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    found = await editor.diagnostics(yaml_uri, 3)
    assert not any("compute_type" in d.message for d in found)

    # hover on a finding: the rule's page; completion after `flash_attn:`: the release's choices
    rest = next(d for d in found if d.code == "LF001")
    hover = await editor.client.text_document_hover_async(
        lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=yaml_uri), position=rest.range.start)
    )
    assert hover is not None and "LF001" in hover.contents.value and "## Why" in hover.contents.value
    line = next(i for i, t in enumerate(text.split("\n")) if t.startswith("flash_attn:"))
    completion = await editor.client.text_document_completion_async(
        lsp.CompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri=yaml_uri),
            position=lsp.Position(line=line, character=len("flash_attn: ")),
        )
    )
    assert {"sdpa", "fa2", "disabled"} <= {item.label for item in completion.items}

    await editor.client.shutdown_async(None)
    editor.client.exit(None)
    await editor.client.stop()


def test_open_change_diagnostics_code_action_apply(tmp_path: Path) -> None:
    folder = tmp_path / "seed"
    shutil.copytree(SEED, folder)
    asyncio.run(asyncio.wait_for(_session(folder), 60))


def test_lint_never_imports_pygls() -> None:
    code = (
        "import sys; from cfgopt.cli import main; main(['lint', '-q', 'fixtures/seed']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'cfgopt.server')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    assert out.strip().splitlines()[-1] == "[]"


async def _linked_session(link: Path) -> None:
    """Through a symlinked folder: diagnostics and fix-all edits go to the URIs the editor opened; fix-all's
    edit comes on `codeAction/resolve`; a bad cfgopt.toml is one diagnostic, and hover answers without error."""
    editor = Editor()
    await editor.client.start_io(sys.executable, "-m", "cfgopt", "server")
    resolve = lsp.ClientCodeActionResolveOptions(properties=["edit"])
    capabilities = lsp.ClientCapabilities(
        text_document=lsp.TextDocumentClientCapabilities(
            code_action=lsp.CodeActionClientCapabilities(resolve_support=resolve)
        )
    )
    await editor.client.initialize_async(lsp.InitializeParams(capabilities=capabilities, root_uri=link.as_uri()))
    editor.client.initialized(lsp.InitializedParams())
    yaml_uri = (link / "llama3_lora_sft.yaml").as_uri()
    for name, language in (("ds_z3_config.json", "json"), ("llama3_lora_sft.yaml", "yaml")):
        item = lsp.TextDocumentItem(
            uri=(link / name).as_uri(), language_id=language, version=1, text=(link / name).read_text()
        )
        editor.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    found = await editor.diagnostics(yaml_uri, 1)
    assert "LF003" in {d.code for d in found}
    whole = lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(40, 0))
    actions = await editor.client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=yaml_uri),
            range=whole,
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    )
    fix_all = next(a for a in actions if a.kind == lsp.CodeActionKind.SourceFixAll)
    assert fix_all.edit is None
    resolved = await editor.client.code_action_resolve_async(fix_all)
    assert resolved.edit is not None and set(resolved.edit.changes) <= {yaml_uri, (link / "ds_z3_config.json").as_uri()}
    assert yaml_uri in resolved.edit.changes

    (link / "cfgopt.toml").write_text("target = [\n")
    editor.client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=yaml_uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text="stage: sft\n")],
        )
    )
    (problem,) = await editor.diagnostics(yaml_uri, 2)
    assert "invalid TOML" in problem.message and "\n" not in problem.message
    hover = await editor.client.text_document_hover_async(
        lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=yaml_uri), position=lsp.Position(0, 1))
    )
    assert hover is None
    await editor.client.shutdown_async(None)
    editor.client.exit(None)
    await editor.client.stop()


def test_symlinked_folder_resolve_and_bad_project_config(tmp_path: Path) -> None:
    shutil.copytree(SEED, tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    asyncio.run(asyncio.wait_for(_linked_session(tmp_path / "link"), 60))


async def _surrogate_session(folder: Path) -> None:
    editor = Editor()
    await editor.client.start_io(sys.executable, "-m", "cfgopt", "server")
    await editor.client.initialize_async(
        lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=folder.as_uri())
    )
    editor.client.initialized(lsp.InitializedParams())
    uri = (folder / "sur.json").as_uri()
    text = '{"zero_optimization": {"stage": 2}, "x\ud800": 1}'  # sent as the JSON escape `\ud800`
    item = lsp.TextDocumentItem(uri=uri, language_id="json", version=1, text=text)
    editor.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    (problem,) = await editor.diagnostics(uri, 1)
    assert problem.range.start == lsp.Position(0, 0) and "lone surrogate (U+D800 on line 1)" in problem.message
    await editor.client.shutdown_async(None)
    editor.client.exit(None)
    await editor.client.stop()


def test_a_lone_surrogate_gets_one_diagnostic_at_the_top(tmp_path: Path) -> None:
    """An editor may send text no UTF-8 file can hold: it was published nothing at all, silently."""
    asyncio.run(asyncio.wait_for(_surrogate_session(tmp_path), 60))
