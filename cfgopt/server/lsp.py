"""The protocol side of `cfgopt server` (pygls): documents in, diagnostics, code actions, hover and completion
out. Everything cfgopt knows comes from `analysis.Session`."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from cfgopt import __version__
from cfgopt.server.analysis import Session, Span, TextEdit, span_of
from cfgopt.text.diagnostics import Applicability, Diagnostic, Severity

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
}
FIX_ALL_SAFE = "cfgopt: apply every safe fix"
FIX_ALL_UNSAFE = "cfgopt: apply every fix, unsafe ones and the speed plan included"


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


def _whole(server: CfgoptServer, fixed: dict[Path, str]) -> lsp.WorkspaceEdit:
    """Each fixed file replaced whole (the fixer's text, checked as `cfgopt fix` checks it)."""
    changes = {}
    for path, text in fixed.items():
        uri = from_fs_path(str(path)) or path.as_uri()
        old = server.session.texts[path]
        lines = old.split("\n")
        end = lsp.Position(line=len(lines) - 1, character=len(lines[-1].encode("utf-16-le")) // 2)
        changes[uri] = [lsp.TextEdit(range=lsp.Range(start=lsp.Position(0, 0), end=end), new_text=text)]
    return lsp.WorkspaceEdit(changes=changes)


class CfgoptServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("cfgopt", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.session = Session()

    def relint(self, uri: str) -> None:
        path = Path(to_fs_path(uri) or uri)
        document = self.workspace.get_text_document(uri)
        for changed in self.session.update(path, document.source):
            problems = [
                lsp.Diagnostic(
                    range=lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(0, 0)),
                    severity=lsp.DiagnosticSeverity.Error,
                    source="cfgopt",
                    message=p.message,
                )
                for p in self.session.problems.get(changed, [])
            ]
            changed_uri = from_fs_path(str(changed)) or changed.as_uri()
            opened = self.workspace.text_documents.get(changed_uri)
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=changed_uri,
                    diagnostics=[_diagnostic(d) for d in self.session.findings.get(changed, [])] + problems,
                    version=opened.version if opened is not None else None,
                )
            )


server = CfgoptServer()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def _did_open(ls: CfgoptServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.relint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def _did_change(ls: CfgoptServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.relint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def _did_close(ls: CfgoptServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.session.close(Path(to_fs_path(params.text_document.uri) or params.text_document.uri))
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll]),
)
def _code_action(ls: CfgoptServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    """A quick fix per finding under the cursor (safe ones preferred; unsafe ones, the speed plan with its
    expected gain among them, say so in the title; display-only ones shown disabled), and the two fix-all
    actions, through the fixer and its checks."""
    uri = params.text_document.uri
    path = Path(to_fs_path(uri) or uri)
    actions = []
    for d in ls.session.at(path, _span(params.range)):
        if d.fix is None:
            continue
        applicability = d.fix.applicability
        action = lsp.CodeAction(
            title=f"{d.code}: {d.fix.description}"
            + ("" if applicability == Applicability.SAFE else f" ({applicability})"),
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=[_diagnostic(d)],
            is_preferred=applicability == Applicability.SAFE,
        )
        if applicability == Applicability.DISPLAY:
            action.disabled = lsp.CodeActionDisabled(reason="display-only: cfgopt never applies it; edit by hand")
        else:
            action.edit = _edit(uri, ls.session.fix_edits(d))
        actions.append(action)
    for title, unsafe in ((FIX_ALL_SAFE, False), (FIX_ALL_UNSAFE, True)):
        fixed = ls.session.fix_all(path, unsafe)
        if fixed:
            actions.append(lsp.CodeAction(title=title, kind=lsp.CodeActionKind.SourceFixAll, edit=_whole(ls, fixed)))
    return actions


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def _hover(ls: CfgoptServer, params: lsp.HoverParams) -> lsp.Hover | None:
    path = Path(to_fs_path(params.text_document.uri) or params.text_document.uri)
    text = ls.session.hover(path, (params.position.line, params.position.character))
    if text is None:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[":", '"', " "]))
def _completion(ls: CfgoptServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    path = Path(to_fs_path(params.text_document.uri) or params.text_document.uri)
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
