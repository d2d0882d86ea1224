"""The editor's side of the server: documents, when they are linted, what is published and offered.

A change is linted after a short pause (`debounce`), so a burst of keystrokes costs one lint; a
lint still waiting when the next change comes is dropped, one already running has its result
dropped. Only the findings of a document's current text are published, and only they back code
actions (their edits are offsets into that text). A text that is not valid Python yet keeps the
last findings shown; so does a lint that runs past `timeLimit` seconds, which the server gives up
(ending the lint process, `linter.py`), says so in a `window/showMessage`, and does not retry for
that document until it is saved.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from torchnumlint import __version__
from torchnumlint.findings import Finding
from torchnumlint.server import lsp, messages, rule_docs
from torchnumlint.server.linter import GaveUp, Linter

DEBOUNCE = 0.05  # seconds of quiet after a change before it is linted
TIME_LIMIT = 10.0  # seconds one lint or fix-all may take before the server gives it up
# Seconds past the time limit a lint may run before its process is ended: the analysis stops
# itself at the limit, but checks its clock only between nodes (LibCST's parse not at all).
GRACE = 2.0


@dataclass
class _Document:
    """What the server knows of one open document."""

    linted: Optional[Tuple[int, str, List[Finding]]] = None  # version, text, findings published
    own_facts: bool = False  # linted with its own facts while the project's were being gathered
    task: Optional[asyncio.Task] = None  # the lint waiting or running
    current: Optional[asyncio.Future] = None  # the findings of the current version, once linted
    given_up: bool = False
    fixed: Optional[Tuple[int, messages.Fixed]] = None  # fix-all of a version
    said: Set[str] = field(default_factory=set)  # messages shown about it (each once)


class TorchNumLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(lsp.SOURCE, __version__)
        self.debounce = DEBOUNCE
        self.time_limit = TIME_LIMIT
        self.documents: Dict[str, _Document] = {}
        self.docs: Dict[str, str] = {}  # rule code -> its documentation
        self.links: Dict[str, str] = {}  # rule code -> the URI of its documentation
        self.gathered: Set[str] = set()  # the roots of the projects whose facts the lint process holds
        self.linter = Linter(self._event)

    def configure(self, options: object) -> None:
        debounce, time_limit = _settings(options)
        self.debounce = self.debounce if debounce is None else debounce
        self.time_limit = self.time_limit if time_limit is None else time_limit

    # -- what the lint process says unasked -------------------------------------------------------
    def _event(self, event: object) -> None:
        if isinstance(event, messages.Ready):  # a fresh lint process: it gathers the facts again
            self.gathered.clear()
            if not self.docs:
                self.docs = event.docs
                self.links = rule_docs.write(event.docs)
        elif isinstance(event, messages.Refused):
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"{lsp.SOURCE}: {event.message}"))
        elif isinstance(event, messages.FactsReady):
            self.gathered.add(event.root)
            self.window_log_message(
                types.LogMessageParams(
                    types.MessageType.Info,
                    f"{lsp.SOURCE}: the facts of {event.files:,} files of {event.root} gathered in {event.seconds:.1f} s",
                )
            )
            for uri, state in self.documents.items():
                if state.own_facts and _within(self._path(uri), event.root):
                    self.schedule(uri, 0)

    # -- linting ------------------------------------------------------------------------------------
    @staticmethod
    def _path(uri: str) -> str:
        return to_fs_path(uri) or "untitled.py"

    def schedule(self, uri: str, delay: float) -> None:
        """Lint the document's current text after `delay` seconds; what was pending is dropped."""
        state = self.documents.setdefault(uri, _Document())
        if state.task is not None and state.task is not asyncio.current_task():
            state.task.cancel()
        if state.current is not None and not state.current.done():
            state.current.set_result(None)  # superseded: no findings for that version
        state.current = asyncio.get_running_loop().create_future()
        state.fixed = None
        if state.given_up:
            state.current.set_result(None)
            return
        state.task = asyncio.get_running_loop().create_task(self._lint(uri, state, state.current, delay))

    async def _lint(self, uri: str, state: _Document, current: asyncio.Future, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        document = self.workspace.get_text_document(uri)
        version, text = document.version, document.source
        request = messages.Lint(self._path(uri), text, self.time_limit)
        try:
            result = await self.linter.request(request, self.time_limit + GRACE)
        except GaveUp as exc:  # ended past the time limit and its grace: the limit is what was set
            result = messages.Refused("gave-up", f"no result within {self.time_limit:g} s" if exc.timed_out else str(exc))
        except asyncio.CancelledError:  # superseded, or the server is closing
            if not current.done():
                current.set_result(None)
            raise
        if isinstance(result, messages.Refused) and result.kind == "gave-up":
            state.given_up = True
            self._say(
                uri,
                state,
                types.MessageType.Warning,
                f"gave up on {os.path.basename(request.path)} ({len(text):,} characters): {result.message}; "
                "the diagnostics shown are from its last lint. It is linted again when saved.",
            )
        findings = self._settle(uri, state, version or 0, text, result)
        if not current.done():
            current.set_result(findings)

    def _settle(self, uri: str, state: _Document, version: int, text: str, result: object) -> Optional[List[Finding]]:
        """Publish what a lint gave; the findings of this version, or None where it gave none."""
        if isinstance(result, messages.Linted):
            state.own_facts = not result.project
            self._publish(uri, state, version, text, result.findings)
            if state.own_facts and any(_within(self._path(uri), root) for root in self.gathered):
                self.schedule(uri, 0)  # the facts came while it was linted
            return result.findings
        if isinstance(result, messages.Refused):
            if result.kind in ("excluded", "config"):
                self._publish(uri, state, version, text, [])
            if result.kind == "config":
                self._say(uri, state, types.MessageType.Error, result.message)
            elif result.kind == "failed":
                self._say(uri, state, types.MessageType.Warning, f"{os.path.basename(self._path(uri))}: {result.message}")
            return [] if result.kind in ("excluded", "config") else None
        return None

    def _publish(self, uri: str, state: _Document, version: int, text: str, findings: List[Finding]) -> None:
        if state.linted == (version, text, findings):
            return  # linted again with the project's facts, to the same findings
        state.linted = (version, text, findings)
        lines = lsp.Lines(text, self.workspace.position_codec)
        diagnostics = [lsp.diagnostic(lines, f, self.links.get(f.code)) for f in findings]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))

    def _say(self, uri: str, state: _Document, kind: types.MessageType, message: str) -> None:
        if message not in state.said:
            state.said.add(message)
            self.window_show_message(types.ShowMessageParams(kind, f"{lsp.SOURCE}: {message}"))

    async def findings_now(self, document: TextDocument) -> Optional[List[Finding]]:
        """The findings of the document's current text (waiting for its lint), None where its
        lint gave none (not Python yet, given up, changed again meanwhile)."""
        version = document.version
        state = self.documents.get(document.uri)
        while state is not None and state.current is not None and document.version == version:
            current = state.current
            found = await asyncio.shield(current)
            if found is not None or state.current is current:
                return found
            # superseded: linted again (the project's facts came) or changed again
        return None

    async def fix_all(self, document: TextDocument, state: _Document) -> Optional[messages.Fixed]:
        """Every fix `--fix` would make in the document's current text (once per version)."""
        version = document.version or 0
        if state.fixed is None or state.fixed[0] != version:
            request = messages.FixAll(self._path(document.uri), document.source)
            try:  # the fix loop has no time limit of its own: the process is ended at ours
                result = await self.linter.request(request, self.time_limit)
            except GaveUp as exc:
                self._say(document.uri, state, types.MessageType.Warning, f"gave up fixing all of {os.path.basename(request.path)}: {exc}")
                return None
            if not isinstance(result, messages.Fixed) or document.version != version:
                return None
            state.fixed = (version, result)
        return state.fixed[1]

    def close(self, uri: str) -> None:
        state = self.documents.pop(uri, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        if state is not None and state.current is not None and not state.current.done():
            state.current.set_result(None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def project_changed(self, path: str) -> None:
        """A file changed on disk: lint again the open documents of its project (their facts may be
        different now)."""
        from torchnumlint.discovery import project_root

        root = project_root(Path(os.path.abspath(path)).parent, {})
        for uri in self.documents:
            other = self._path(uri)
            if other != path and root is not None and _within(other, str(root)):
                self.schedule(uri, self.debounce)


def _within(path: str, folder: str) -> bool:
    return os.path.abspath(path).startswith(folder.rstrip(os.sep) + os.sep)


def _settings(options: object) -> Tuple[Optional[float], Optional[float]]:
    """`debounce` and `timeLimit` (seconds) from the client's settings (initializationOptions or
    workspace/didChangeConfiguration), at their top level or under "torchnumlint"."""
    if isinstance(options, dict) and isinstance(options.get(lsp.SOURCE), dict):
        options = options[lsp.SOURCE]
    if not isinstance(options, dict):
        return None, None

    def seconds(key: str) -> Optional[float]:
        value = options.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None

    return seconds("debounce"), seconds("timeLimit")


def create_server() -> TorchNumLintServer:
    """A server with its handlers (a fresh one per session: the tests start several)."""
    server = TorchNumLintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchNumLintServer, params: types.InitializeParams) -> None:
        ls.configure(params.initialization_options)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: TorchNumLintServer, params: types.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TorchNumLintServer, params: types.InitializedParams) -> None:
        ls.linter.start()  # after the answer to initialize: the editor does not wait for libcst
        watched = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=f"**/*{suffix}") for suffix in (".py", ".pyi")]
            )
            registration = types.Registration(
                id=f"{lsp.SOURCE}-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
            )
            await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TorchNumLintServer, params: None) -> None:
        ls.linter.close()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchNumLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchNumLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchNumLintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        path = ls._path(uri)
        ls.linter.notify(messages.Saved(path, document.source))
        state = ls.documents.setdefault(uri, _Document())
        state.given_up, state.said = False, set()  # a save tries again, and says again what fails
        ls.schedule(uri, 0)  # the file's configuration may have changed too
        ls.project_changed(path)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchNumLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TorchNumLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            path = ls._path(change.uri)
            ls.linter.notify(messages.Saved(path))
            ls.project_changed(path)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: TorchNumLintServer, params: types.HoverParams) -> Optional[types.Hover]:
        state = ls.documents.get(params.text_document.uri)
        if state is None or state.linted is None:
            return None
        _, text, findings = state.linted
        lines = lsp.Lines(text, ls.workspace.position_codec)
        here = [(f, ls.docs.get(f.code, "")) for f in findings if lsp.contains(lsp.finding_range(lines, f), params.position)]
        return lsp.hover(here) if here else None

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, lsp.FIX_ALL], resolve_provider=False),
    )
    async def code_action(ls: TorchNumLintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        version = document.version
        findings = await ls.findings_now(document)
        state = ls.documents.get(uri)
        if findings is None or state is None or state.linted is None or state.linted[0] != version:
            return []
        text = state.linted[1]
        lines = lsp.Lines(text, ls.workspace.position_codec)
        only = params.context.only
        actions: List[types.CodeAction] = []
        fixes_here = False
        if lsp.wanted(types.CodeActionKind.QuickFix, only):
            for finding in findings:
                if not lsp.overlaps(lsp.finding_range(lines, finding), params.range):
                    continue
                docs = ls.links.get(finding.code)
                if finding.fix is not None:
                    actions.append(lsp.fix_action(uri, lines, finding, docs))
                    fixes_here = True
                noqa = lsp.noqa_action(uri, lines, text, finding, docs)
                if noqa is not None:
                    actions.append(noqa)
        # fix-all: as the source action editors run on save, and beside a finding's own fix
        kinds = [lsp.FIX_ALL] if lsp.wanted(lsp.FIX_ALL, only) else []
        kinds += [types.CodeActionKind.QuickFix] if fixes_here else []
        if kinds and any(f.fix is not None for f in findings):
            fixed = await ls.fix_all(document, state)
            if fixed is not None and fixed.applied and document.version == version:
                actions += lsp.fix_all_actions(uri, lines, text, fixed.text, fixed.applied, fixed.unsafe, kinds)
        return actions

    return server


def main() -> None:
    """Serve one editor over stdio until it exits."""
    create_server().start_io()
