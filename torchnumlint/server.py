"""The language server (`torchnumlint server`, the `server` extra: pygls): findings as the editor
types, each fix one click away.

Over stdio, as editors start language servers. A document is linted when it is opened, changed
and saved; its findings are published as diagnostics (a warning each, code and source named) and
the fix of each finding that has one is offered as a quick-fix code action on its range (an
UNSAFE fix says so in its title: it changes results, which `--fix` applies only with
`--unsafe-fixes`). Closing a document clears its diagnostics.

Each document gets the configuration its path would get on the command line: the nearest
`[tool.torchnumlint]` (read again at each lint, so an edited pyproject.toml applies at once), its
selection, per-file-ignores and `strict`. Project facts are the document's own, as in the flake8
plugin: the editor's text of one file is linted without walking the project on every keystroke,
so a finding that needs a helper from another module is reported only by `torchnumlint`.
Positions follow the encoding the client negotiated (UTF-16 by default; the linter counts code
points).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from torchnumlint import __version__
from torchnumlint.config import ConfigError, Settings
from torchnumlint.engine import ParseError, lint_text
from torchnumlint.findings import Finding, Safety

SOURCE = "torchnumlint"


class TorchNumLintServer(LanguageServer):
    """The last findings of each open document, by URI with the version they were made for: code
    actions are asked for far more often than the text changes."""

    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.linted: Dict[str, Tuple[Optional[int], List[Finding]]] = {}

    def findings(self, document: TextDocument) -> List[Finding]:
        version, found = self.linted.get(document.uri, (None, None))
        if found is None or version != document.version:
            found = self.lint(document)
        return found

    def lint(self, document: TextDocument) -> List[Finding]:
        """Lint the document's text with its path's configuration, and remember the findings."""
        path = document.path or "untitled.py"
        try:
            settings = Settings()
            strict = settings.config_of(path).strict
            found = lint_text(path, document.source, settings.rules_for(path), strict=strict)
        except ConfigError as exc:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"{SOURCE}: {exc}"))
            found = []
        except ParseError:  # the editor's own Python support shows syntax errors
            found = []
        self.linted[document.uri] = (document.version, found)
        return found

    def publish(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        diagnostics = [_diagnostic(document, finding) for finding in self.lint(document)]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=document.version)
        )


def _range(document: TextDocument, finding: Finding) -> types.Range:
    return document.range_to_client_units(
        ServerTextRange(
            ServerTextPosition(finding.line - 1, finding.col - 1),
            ServerTextPosition(finding.end_line - 1, finding.end_col - 1),
        )
    )


def _diagnostic(document: TextDocument, finding: Finding) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(document, finding),
        message=finding.message,
        severity=types.DiagnosticSeverity.Warning,
        code=finding.code,
        source=SOURCE,
    )


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> Tuple[int, int]:
        return p.line, p.character

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _action(document: TextDocument, finding: Finding) -> types.CodeAction:
    assert finding.fix is not None
    unsafe = finding.fix.safety is Safety.UNSAFE
    edits = [
        types.TextEdit(
            range=types.Range(document.client_position_at_offset(e.start), document.client_position_at_offset(e.end)),
            new_text=e.content,
        )
        for e in finding.fix.edits
    ]
    return types.CodeAction(
        title=f"Fix {finding.code} ({finding.name})" + (": unsafe, changes results" if unsafe else ""),
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[_diagnostic(document, finding)],
        is_preferred=not unsafe,
        edit=types.WorkspaceEdit(changes={document.uri: edits}),
    )


def create_server() -> TorchNumLintServer:
    """A server with its handlers (a fresh one per session: the tests start several)."""
    server = TorchNumLintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchNumLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchNumLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchNumLintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchNumLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.linted.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix], resolve_provider=False),
    )
    def code_action(ls: TorchNumLintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
        document = ls.workspace.get_text_document(params.text_document.uri)
        return [
            _action(document, finding)
            for finding in ls.findings(document)
            if finding.fix is not None and _overlaps(_range(document, finding), params.range)
        ]

    return server


def main() -> None:
    """Serve one editor over stdio until it exits."""
    create_server().start_io()


if __name__ == "__main__":
    main()
