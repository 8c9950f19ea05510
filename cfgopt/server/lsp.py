"""The protocol side of `cfgopt server` (pygls): documents in, diagnostics, code actions, hover and completion
out. Everything cfgopt knows comes from `analysis.Session`; documents are known there by the path of the URI
the editor gave, and every answer goes back to that URI (a folder opened through a symlink included)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from cfgopt.server.analysis import Session, Span, TextEdit, line_index, span_of
from cfgopt.text.diagnostics import Applicability, Diagnostic, Severity
from cfgopt.version import __version__

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
}
FIX_ALL_SAFE = "cfgopt: apply every safe fix"
FIX_ALL_UNSAFE = "cfgopt: apply every fix, unsafe ones and the speed plan included"
_START = lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(0, 0))


def _range(span: Span) -> lsp.Range:
    return lsp.Range(start=lsp.Position(*span.start), end=lsp.Position(*span.end))


def _span(r: lsp.Range) -> Span:
    return Span((r.start.line, r.start.character), (r.end.line, r.end.character))


def _diagnostic(d: Diagnostic) -> lsp.Diagnostic:
    fix = d.fix.applicability if d.fix is not None else None
    return lsp.Diagnostic(
        range=_range(span_of(d)),
        severity=_SEVERITY[d.severity],
        code=d.code,
        source="cfgopt",
        message=f"{d.message} [{d.name}]" + (f"\nfix ({fix}): {d.fix.description}" if d.fix is not None else ""),
        data={"code": d.code, "fix": str(fix) if fix is not None else None},
    )


def _edit(uri: str, edits: list[TextEdit]) -> lsp.WorkspaceEdit:
    return lsp.WorkspaceEdit(
        changes={uri: [lsp.TextEdit(range=_range(e.span), new_text=e.text) for e in edits]},
    )


class CfgoptServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("cfgopt", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.session = Session()
        self.uris: dict[Path, str] = {}  # a document's path -> the URI the editor opened it by

    def path_of(self, uri: str) -> Path:
        path = Path(to_fs_path(uri) or uri)
        self.uris.setdefault(path, uri)
        return path

    def uri_of(self, path: Path) -> str:
        return self.uris.get(path) or from_fs_path(str(path)) or path.as_uri()

    def relint(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        self.publish(self.session.update(self.path_of(uri), document.source, document.version))

    def publish(self, paths: list[Path]) -> None:
        for path in paths:
            uri = self.uri_of(path)
            opened = self.workspace.text_documents.get(uri)
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=uri,
                    diagnostics=self.diagnostics(path),
                    version=opened.version if opened is not None else None,
                )
            )

    def diagnostics(self, path: Path) -> list[lsp.Diagnostic]:
        session = self.session
        found = [_diagnostic(d) for d in session.findings.get(path, [])]
        found += [
            lsp.Diagnostic(range=_START, severity=lsp.DiagnosticSeverity.Error, source="cfgopt", message=p.message)
            for p in session.problems.get(path, [])
        ]
        note = session.notes.get(path)
        if note is not None:
            found.append(
                lsp.Diagnostic(range=_START, severity=lsp.DiagnosticSeverity.Information, source="cfgopt", message=note)
            )
        return found

    def whole(self, fixed: dict[Path, str]) -> lsp.WorkspaceEdit:
        """Each fixed document replaced whole (the fixer's text, checked as `cfgopt fix` checks it), by the URI
        the editor knows it by."""
        changes = {}
        for path, text in fixed.items():
            end = line_index(self.session.documents[path].text).end()
            changes[self.uri_of(path)] = [lsp.TextEdit(range=_range(Span((0, 0), end)), new_text=text)]
        return lsp.WorkspaceEdit(changes=changes)

    def resolves_edits(self) -> bool:
        """Does the client ask for a code action's edit only when it is chosen (`codeAction/resolve`)?"""
        caps = self.client_capabilities.text_document if self.client_capabilities else None
        action = caps.code_action if caps is not None else None
        support = action.resolve_support if action is not None else None
        return support is not None and "edit" in support.properties


server = CfgoptServer()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def _did_open(ls: CfgoptServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.uris[Path(to_fs_path(params.text_document.uri) or params.text_document.uri)] = params.text_document.uri
    ls.relint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def _did_change(ls: CfgoptServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.relint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
def _did_save(ls: CfgoptServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.publish(ls.session.save(ls.path_of(params.text_document.uri)))


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def _did_close(ls: CfgoptServer, params: lsp.DidCloseTextDocumentParams) -> None:
    path = ls.path_of(params.text_document.uri)
    renewed = ls.session.close(path)
    ls.uris.pop(path, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))
    ls.publish(renewed)  # the documents that read its unsaved text: judged with its file again


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll], resolve_provider=True
    ),
)
def _code_action(ls: CfgoptServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    """A quick fix per finding under the cursor (safe ones preferred; unsafe ones, the speed plan with its
    expected gain among them, say so in the title; display-only ones shown disabled), and the two fix-all
    actions where a finding has a fix they apply: their edit comes from the fixer, run once per change and only
    when the action is chosen where the client resolves actions."""
    uri = params.text_document.uri
    path = ls.path_of(uri)
    actions = [_quick_fix(ls, uri, d) for d in ls.session.at(path, _span(params.range)) if d.fix is not None]
    for title, unsafe in ((FIX_ALL_SAFE, False), (FIX_ALL_UNSAFE, True)):
        if not ls.session.fixable(path, unsafe):
            continue
        action = lsp.CodeAction(title=title, kind=lsp.CodeActionKind.SourceFixAll, data={"uri": uri, "unsafe": unsafe})
        if ls.resolves_edits():
            actions.append(action)
            continue
        fixed = ls.session.fix_all(path, unsafe)
        if fixed:
            action.edit = ls.whole(fixed)
            actions.append(action)
    return actions


def _quick_fix(ls: CfgoptServer, uri: str, d: Diagnostic) -> lsp.CodeAction:
    applicability = d.fix.applicability
    action = lsp.CodeAction(
        title=f"{d.code}: {d.fix.description}" + ("" if applicability == Applicability.SAFE else f" ({applicability})"),
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[_diagnostic(d)],
        is_preferred=applicability == Applicability.SAFE,
    )
    if applicability == Applicability.DISPLAY:
        action.disabled = lsp.CodeActionDisabled(reason="display-only: cfgopt never applies it; edit by hand")
    else:
        action.edit = _edit(uri, ls.session.fix_edits(d))
    return action


@server.feature(lsp.CODE_ACTION_RESOLVE)
def _code_action_resolve(ls: CfgoptServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """A fix-all action chosen: the fixer's texts for the group (computed once per change)."""
    data = action.data if isinstance(action.data, dict) else {}
    if action.edit is None and "uri" in data:
        fixed = ls.session.fix_all(ls.path_of(data["uri"]), bool(data.get("unsafe")))
        action.edit = ls.whole(fixed)
    return action


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def _hover(ls: CfgoptServer, params: lsp.HoverParams) -> lsp.Hover | None:
    path = ls.path_of(params.text_document.uri)
    text = ls.session.hover(path, (params.position.line, params.position.character))
    if text is None:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[":", '"', " "]))
def _completion(ls: CfgoptServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    path = ls.path_of(params.text_document.uri)
    items = [
        lsp.CompletionItem(
            label=c.label,
            kind=lsp.CompletionItemKind.Property if c.kind == "key" else lsp.CompletionItemKind.EnumMember,
            detail=c.detail,
            documentation=c.documentation or None,
        )
        for c in ls.session.complete(path, (params.position.line, params.position.character))
    ]
    return lsp.CompletionList(is_incomplete=False, items=items)


def serve() -> int:
    server.start_io()
    return 0
