"""The language server in a real LSP session: pygls's client talks JSON-RPC to the server over
two OS pipes (the server on its own thread, as an editor would see it over stdio). Diagnostics on
open, change and save with the file's configuration, quick fixes as code actions whose edits give
the fixed text, UTF-16 positions, diagnostics cleared on close, a clean shutdown."""

import asyncio
import logging
import os
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from torchnumlint.server import create_server  # noqa: E402

TRAIN = textwrap.dedent(
    """\
    import torch


    def head(x, logits, y):
        tag = "🔥"; logp = torch.log(torch.softmax(x, dim=-1))
        return logp, torch.nn.functional.cross_entropy(torch.softmax(logits, dim=-1), y)
    """
)
PYPROJECT = '[tool.torchnumlint]\nper-file-ignores = { "legacy/*.py" = ["TNL103"] }\n'


def _offset(text: str, position: types.Position) -> int:
    """The string offset of an LSP position counted in UTF-16 code units."""
    lines = text.splitlines(keepends=True)
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for i, char in enumerate(line):
        if units >= position.character:
            return sum(map(len, lines[: position.line])) + i
        units += 2 if ord(char) > 0xFFFF else 1
    return sum(map(len, lines[: position.line])) + len(line)


def _apply(text: str, edits) -> str:
    spans = sorted(((_offset(text, e.range.start), _offset(text, e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


class Session:
    """A client connected to a fresh server; `published[uri]` is a queue of its diagnostics."""

    def __init__(self) -> None:
        to_server_r, to_server_w = os.pipe()
        to_client_r, to_client_w = os.pipe()
        self.server = create_server()
        self.thread = threading.Thread(
            target=self.server.start_io, args=(os.fdopen(to_server_r, "rb"), os.fdopen(to_client_w, "wb")), daemon=True
        )
        self.client = LanguageClient("test-editor", "1")
        self.client.protocol.set_writer(StdoutWriter(os.fdopen(to_server_w, "wb")))
        self.reader = StdinAsyncReader(os.fdopen(to_client_r, "rb"))
        self.stop = threading.Event()
        self.published: dict = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(ls, params: types.PublishDiagnosticsParams) -> None:
            self.queue(params.uri).put_nowait(params.diagnostics)

    def queue(self, uri: str) -> asyncio.Queue:
        return self.published.setdefault(uri, asyncio.Queue())

    async def __aenter__(self) -> "Session":
        self.thread.start()
        self.connection = asyncio.create_task(
            run_async(stop_event=self.stop, reader=self.reader, protocol=self.client.protocol,
                      logger=logging.getLogger(__name__), error_handler=lambda *_: None)
        )
        capabilities = types.ClientCapabilities(
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16])
        )
        result = await self.client.initialize_async(types.InitializeParams(capabilities=capabilities, process_id=os.getpid()))
        assert result.capabilities.code_action_provider is not None
        self.client.initialized(types.InitializedParams())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await asyncio.wait_for(self.connection, 10)  # the server closed its end: the session is over
        self.thread.join(10)
        assert not self.thread.is_alive()

    async def diagnostics(self, uri: str) -> list:
        return list(await asyncio.wait_for(self.queue(uri).get(), 30))

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )
        return uri

    async def actions(self, uri: str, diagnostic: types.Diagnostic) -> list:
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
        return await self.client.text_document_code_action_async(params)


def test_diagnostics_and_quick_fixes_in_an_editor_session(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "legacy").mkdir()
    train, legacy = tmp_path / "train.py", tmp_path / "legacy" / "old.py"

    async def scenario():
        async with Session() as session:
            uri = session.open(train, TRAIN)
            found = sorted(await session.diagnostics(uri), key=lambda d: d.range.start.line)
            assert [(d.code, d.source, d.severity) for d in found] == [
                ("TNL103", "torchnumlint", types.DiagnosticSeverity.Warning),
                ("TNL113", "torchnumlint", types.DiagnosticSeverity.Warning),
            ]
            # in UTF-16 units `torch.log(` starts one after its code point (the emoji takes two)
            log = found[0]
            assert (log.range.start.line, log.range.start.character) == (4, TRAIN.splitlines()[4].index("torch.log(") + 1)

            (safe,) = await session.actions(uri, log)
            assert safe.kind == types.CodeActionKind.QuickFix and safe.is_preferred
            assert safe.title.startswith("Fix TNL103 (log-of-softmax)")
            fixed = _apply(TRAIN, safe.edit.changes[uri])
            assert "logp = torch.log_softmax(x, dim=-1)" in fixed and fixed.count("\n") == TRAIN.count("\n")

            (unsafe,) = await session.actions(uri, found[1])
            assert "unsafe" in unsafe.title and not unsafe.is_preferred

            # the editor applies the quick fix: the change is linted, one finding is left
            session.client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)],
                )
            )
            assert [d.code for d in await session.diagnostics(uri)] == ["TNL113"]

            # saved after pyproject.toml changed: the new configuration applies
            (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nignore = ["TNL113"]\n')
            session.client.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            assert await session.diagnostics(uri) == []
            (tmp_path / "pyproject.toml").write_text(PYPROJECT)

            # per-file-ignores of the file's own configuration
            old = session.open(legacy, TRAIN)
            assert [d.code for d in await session.diagnostics(old)] == ["TNL113"]

            session.client.text_document_did_close(
                types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=old))
            )
            assert await session.diagnostics(old) == []

    asyncio.run(scenario())


def test_a_document_that_is_not_python_yet_has_no_diagnostics(tmp_path):
    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "draft.py", "import torch\ndef f(x:\n    return torch.log(torch.softmax(x, -1))\n")
            assert await session.diagnostics(uri) == []

    asyncio.run(scenario())
