"""The language server in a real LSP session: pygls's client talks JSON-RPC to the server over
two OS pipes (the server on its own thread, as an editor would see it over stdio; its lint
process is a real child process). Each item of the server's contract in an editor's terms:
diagnostics on open, change and save with the file's configuration, UTF-16 positions, quick
fixes, `# noqa` and fix-all code actions whose edits give the expected text, hover with the
rule's docs and a docs link, excludes, the last good diagnostics kept through a syntax error and
through a lint given up (said in window/showMessage), superseded changes not linted, answers
while a lint runs, project facts kept in memory across edits, a clean shutdown.

No test asserts a duration: where a test needs a lint to be slow or a pause to be long, it sets
the time limit or the debounce far from the work involved."""

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

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
WAIT = 120  # seconds a test waits for an answer before it fails (a loaded machine is slow)


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
    """A client connected to a fresh server; `published[uri]` is a queue of its diagnostics
    notifications, `shown` one of the server's window/showMessage notifications."""

    def __init__(self, options=None) -> None:
        to_server_r, to_server_w = os.pipe()
        to_client_r, to_client_w = os.pipe()
        self.options = options
        self.server = create_server()
        self.thread = threading.Thread(
            target=self.server.start_io, args=(os.fdopen(to_server_r, "rb"), os.fdopen(to_client_w, "wb")), daemon=True
        )
        self.client = LanguageClient("test-editor", "1")
        self.client.protocol.set_writer(StdoutWriter(os.fdopen(to_server_w, "wb")))
        self.reader = StdinAsyncReader(os.fdopen(to_client_r, "rb"))
        self.stop = threading.Event()
        self.published: dict = {}
        self.shown: asyncio.Queue = asyncio.Queue()
        self.versions = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(ls, params: types.PublishDiagnosticsParams) -> None:
            self.queue(params.uri).put_nowait(params)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(ls, params: types.ShowMessageParams) -> None:
            self.shown.put_nowait(params)

    def queue(self, uri: str) -> asyncio.Queue:
        return self.published.setdefault(uri, asyncio.Queue())

    async def __aenter__(self) -> "Session":
        self.thread.start()
        self.connection = asyncio.create_task(
            run_async(
                stop_event=self.stop,
                reader=self.reader,
                protocol=self.client.protocol,
                logger=logging.getLogger(__name__),
                error_handler=lambda *_: None,
            )
        )
        capabilities = types.ClientCapabilities(
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16])
        )
        params = types.InitializeParams(capabilities=capabilities, process_id=os.getpid(), initialization_options=self.options)
        result = await self.client.initialize_async(params)
        assert result.capabilities.code_action_provider is not None
        assert result.capabilities.hover_provider
        self.client.initialized(types.InitializedParams())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await asyncio.wait_for(self.connection, 10)  # the server closed its end: the session is over
        self.thread.join(10)
        assert not self.thread.is_alive()

    async def published_params(self, uri: str) -> types.PublishDiagnosticsParams:
        return await asyncio.wait_for(self.queue(uri).get(), WAIT)

    async def diagnostics(self, uri: str) -> list:
        return list((await self.published_params(uri)).diagnostics)

    async def message(self) -> types.ShowMessageParams:
        return await asyncio.wait_for(self.shown.get(), WAIT)

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )
        return uri

    def change(self, uri: str, text: str) -> int:
        self.versions[uri] += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[uri]

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))

    def configure(self, settings) -> None:
        self.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))

    async def actions(self, uri: str, where: types.Range, only=None, diagnostics=()) -> list:
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=where,
            context=types.CodeActionContext(diagnostics=list(diagnostics), only=only),
        )
        return await asyncio.wait_for(self.client.text_document_code_action_async(params), WAIT) or []

    async def hover(self, uri: str, position: types.Position):
        params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)
        return await asyncio.wait_for(self.client.text_document_hover_async(params), WAIT)


def run(scenario) -> None:
    asyncio.run(scenario())


@pytest.fixture(autouse=True)
def _cache_home(tmp_path, monkeypatch):
    """The rules' docs files go to a cache folder of the test's own (`rule_docs.py`)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


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

            actions = await session.actions(uri, log.range, diagnostics=[log])
            safe = next(a for a in actions if a.title.startswith("Fix TNL103 (log-of-softmax)"))
            assert safe.kind == types.CodeActionKind.QuickFix and safe.is_preferred
            fixed = _apply(TRAIN, safe.edit.changes[uri])
            assert "logp = torch.log_softmax(x, dim=-1)" in fixed and fixed.count("\n") == TRAIN.count("\n")

            unsafe = next(a for a in await session.actions(uri, found[1].range) if a.title.startswith("Fix TNL113"))
            assert "unsafe" in unsafe.title and not unsafe.is_preferred

            # the editor applies the quick fix: the change is linted, one finding is left
            session.change(uri, fixed)
            assert [d.code for d in await session.diagnostics(uri)] == ["TNL113"]

            # saved after pyproject.toml changed: the new configuration applies
            (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nignore = ["TNL113"]\n')
            session.save(uri)
            assert await session.diagnostics(uri) == []
            (tmp_path / "pyproject.toml").write_text(PYPROJECT)

            # per-file-ignores of the file's own configuration
            old = session.open(legacy, TRAIN)
            assert [d.code for d in await session.diagnostics(old)] == ["TNL113"]

            session.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=old)))
            assert await session.diagnostics(old) == []

    run(scenario)


def test_noqa_and_fix_all_code_actions(tmp_path):
    train = tmp_path / "train.py"

    async def scenario():
        async with Session() as session:
            uri = session.open(train, TRAIN)
            log, ce = sorted(await session.diagnostics(uri), key=lambda d: d.range.start.line)

            noqa = next(a for a in await session.actions(uri, ce.range) if a.title.startswith("Disable TNL113"))
            assert noqa.kind == types.CodeActionKind.QuickFix
            silenced = _apply(TRAIN, noqa.edit.changes[uri])
            assert silenced.splitlines()[5].endswith("y)  # noqa: TNL113")
            session.change(uri, silenced)
            assert [d.code for d in await session.diagnostics(uri)] == ["TNL103"]

            # a second code on a line that already has a directive joins it
            noqa = next(a for a in await session.actions(uri, log.range) if a.title.startswith("Disable TNL103"))
            assert _apply(silenced, noqa.edit.changes[uri]).splitlines()[4].endswith("dim=-1))  # noqa: TNL103")

            # fix-all, as editors ask for it on save: every SAFE fix, the unsafe TNL113 fix left out
            session.change(uri, TRAIN)
            await session.diagnostics(uri)
            whole = types.Range(types.Position(0, 0), types.Position(len(TRAIN.splitlines()), 0))
            (fix_all,) = await session.actions(uri, whole, only=[types.CodeActionKind.SourceFixAll])
            assert fix_all.kind == "source.fixAll.torchnumlint" and "every safe fix, 1 in all" in fix_all.title
            fixed = _apply(TRAIN, fix_all.edit.changes[uri])
            assert "torch.log_softmax(x, dim=-1)" in fixed and "cross_entropy(torch.softmax(logits" in fixed
            # offered beside a finding's own fix as well
            kinds = [a.kind for a in await session.actions(uri, log.range) if a.title.startswith("Fix all")]
            assert kinds == ["source.fixAll.torchnumlint", types.CodeActionKind.QuickFix]

            # the file's config asks for unsafe fixes too: fix-all applies both
            (tmp_path / "pyproject.toml").write_text("[tool.torchnumlint]\nunsafe-fixes = true\n")
            session.change(uri, TRAIN + "\n")
            await session.diagnostics(uri)
            (fix_all,) = await session.actions(uri, whole, only=[types.CodeActionKind.SourceFixAll])
            assert "unsafe ones too" in fix_all.title
            fixed = _apply(TRAIN + "\n", fix_all.edit.changes[uri])
            assert "torch.log_softmax(x, dim=-1)" in fixed and "cross_entropy(logits, y)" in fixed

    run(scenario)


def test_hover_shows_the_rule_docs_and_each_diagnostic_links_them(tmp_path):
    from torchnumlint.docs import explain
    from torchnumlint.rules.registry import registry

    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "train.py", TRAIN)
            log = min(await session.diagnostics(uri), key=lambda d: d.range.start.line)
            docs = Path(url2pathname(urlparse(log.code_description.href).path))
            assert docs.read_text(encoding="utf-8") == explain(registry()["TNL103"])

            shown = await session.hover(uri, types.Position(log.range.start.line, log.range.start.character + 3))
            assert shown.contents.kind == types.MarkupKind.Markdown
            assert shown.contents.value.startswith("**TNL103** (log-of-softmax): log of a softmax")
            assert "Why:" in shown.contents.value and "Example 1 (flagged at line" in shown.contents.value
            assert await session.hover(uri, types.Position(0, 0)) is None

    run(scenario)


def test_the_last_good_diagnostics_stay_through_a_syntax_error(tmp_path):
    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "train.py", TRAIN)
            first = await session.published_params(uri)
            assert len(first.diagnostics) == 2
            broken = session.change(uri, TRAIN.replace("def head(x, logits, y):", "def head(x, logits, y:"))
            assert await session.actions(uri, first.diagnostics[0].range) == []  # no fix for a text that is not Python
            session.change(uri, TRAIN.replace("torch.log(torch.softmax(x, dim=-1))", "x"))
            after = await session.published_params(uri)
            # nothing was published for the broken text: the editor kept showing the first two
            assert after.version == broken + 1 and [d.code for d in after.diagnostics] == ["TNL113"]

    run(scenario)


def test_a_burst_of_changes_is_linted_once(tmp_path):
    async def scenario():
        async with Session({"debounce": 4.0}) as session:  # far longer than sending five changes takes
            uri = session.open(tmp_path / "train.py", "import torch\n")
            assert (await session.published_params(uri)).version == 1
            typed = ""
            for part in ("def f(x):\n", "    return ", "torch.log(", "torch.softmax(x, -1)", ")\n"):
                typed += part
                last = session.change(uri, "import torch\n" + typed)
            linted = await session.published_params(uri)
            assert linted.version == last and [d.code for d in linted.diagnostics] == ["TNL103"]
            assert session.queue(uri).empty()

    run(scenario)


def _many_findings(count: int) -> str:
    return "import torch\n\n" + "".join(f"def f{i}(x):\n    return torch.log(torch.softmax(x, -1))\n\n" for i in range(count))


def test_a_huge_buffer_is_given_up_with_a_message_and_the_last_diagnostics_kept(tmp_path):
    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "train.py", TRAIN)
            assert len(await session.diagnostics(uri)) == 2
            session.configure({"torchnumlint": {"timeLimit": 0.01}})  # far less than 2,000 findings take
            session.change(uri, _many_findings(2000))
            message = await session.message()
            assert message.type == types.MessageType.Warning
            assert message.message.startswith("torchnumlint: gave up on train.py (")
            assert "the diagnostics shown are from its last lint" in message.message
            # the server still answers, nothing was published, and the buffer is not retried on each key
            assert await session.hover(uri, types.Position(0, 0)) is None
            session.change(uri, _many_findings(2001))
            session.configure({"torchnumlint": {"timeLimit": 60}})
            session.change(uri, TRAIN.replace("torch.log(torch.softmax(x, dim=-1))", "x"))
            session.save(uri)  # a save tries again
            after = await session.published_params(uri)
            assert after.version == 4 and [d.code for d in after.diagnostics] == ["TNL113"]
            assert session.shown.empty()

    run(scenario)


def test_work_past_the_time_limit_ends_the_lint_process_and_a_fresh_one_goes_on(tmp_path):
    """The fix loop has no clock of its own: past the time limit the lint process is ended (the
    one way to stop a LibCST parse, and it gives all its memory back) and another one starts."""
    many = _many_findings(150)

    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "train.py", many)
            assert len(await session.diagnostics(uri)) == 150
            session.configure({"timeLimit": 0.001})  # a thousandth of what fixing 150 findings takes
            everything = types.Range(types.Position(0, 0), types.Position(many.count("\n"), 0))
            assert await session.actions(uri, everything, only=[types.CodeActionKind.SourceFixAll]) == []
            message = await session.message()
            assert message.message == "torchnumlint: gave up fixing all of train.py: no result within 0.001 s"
            session.configure({"timeLimit": 60})
            session.change(uri, TRAIN)
            assert [d.code for d in await session.diagnostics(uri)] == ["TNL103", "TNL113"]

    run(scenario)


def test_the_server_answers_while_a_long_lint_runs(tmp_path):
    async def scenario():
        async with Session() as session:
            small = session.open(tmp_path / "small.py", TRAIN)
            log = min(await session.diagnostics(small), key=lambda d: d.range.start.line)
            big = session.open(tmp_path / "big.py", _many_findings(3000))
            # answered from what the server holds, while the lint process works on big.py
            shown = await session.hover(small, log.range.start)
            assert shown.contents.value.startswith("**TNL103**")
            assert session.queue(big).empty()

    run(scenario)


def test_excluded_files_get_no_diagnostics(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nextend-exclude = ["generated"]\n')
    for folder in ("generated", "build", "src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text(TRAIN)

    async def scenario():
        async with Session() as session:
            for folder, count in (("generated", 0), ("build", 0), ("src", 2)):
                uri = session.open(tmp_path / folder / "m.py", TRAIN)
                assert len(await session.diagnostics(uri)) == count, folder

    run(scenario)


def test_an_invalid_configuration_is_said_once(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nselect = ["NOPE"]\n')

    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "train.py", TRAIN)
            assert await session.diagnostics(uri) == []
            message = await session.message()
            assert message.type == types.MessageType.Error and "unknown rule selector 'NOPE'" in message.message
            session.change(uri, TRAIN + "\n")
            assert await session.diagnostics(uri) == []
            assert session.shown.empty()

    run(scenario)


HEADS = "import torch\n\n\ndef probs(logits):\n    return torch.softmax(logits, dim=-1)\n"
USES = "import torch\n\nfrom heads import probs\n\n\ndef loss(z):\n    return torch.log(probs(z)).mean()\n"


def test_project_facts_are_kept_in_memory_across_edits(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    heads = tmp_path / "heads.py"
    heads.write_text(HEADS)
    train = tmp_path / "train.py"
    train.write_text(USES)

    async def scenario():
        async with Session() as session:
            uri = session.open(train, USES)
            # a softmax made in heads.py: found once the project's facts are gathered
            while [d.code for d in await session.diagnostics(uri)] != ["TNL103"]:
                pass
            # heads.py leaves the disk behind the server's back: the facts kept still hold it
            heads.unlink()
            session.change(uri, USES + "\n\ndef other(z):\n    return torch.log(probs(z))\n")
            assert [d.code for d in await session.diagnostics(uri)] == ["TNL103", "TNL103"]
            # the editor says it is gone: its facts go too
            session.client.workspace_did_change_watched_files(
                types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=heads.as_uri(), type=types.FileChangeType.Deleted)])
            )
            assert await session.diagnostics(uri) == []
            # the helper written again from the editor: its saved text is the fact
            helper = session.open(heads, HEADS)
            await session.diagnostics(helper)
            heads.write_text(HEADS)
            session.save(helper)
            assert [d.code for d in await session.diagnostics(uri)] == ["TNL103", "TNL103"]

    run(scenario)


def test_starting_the_server_imports_neither_libcst_nor_the_engine():
    """What makes `initialize` quick: the editor process loads pygls alone (the lint process
    loads the linter); `benchmarks/server_latency.py` measures the time."""
    code = "import sys, torchnumlint.server.app; print(sorted(m for m in ('libcst', 'torchnumlint.engine') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_document_that_is_not_python_yet_has_no_diagnostics(tmp_path):
    async def scenario():
        async with Session() as session:
            uri = session.open(tmp_path / "draft.py", "import torch\ndef f(x:\n    return torch.log(torch.softmax(x, -1))\n")
            session.change(uri, "import torch\n")
            params = await session.published_params(uri)
            assert params.version == 2 and list(params.diagnostics) == []

    run(scenario)


def test_without_pygls_the_server_command_says_what_to_install():
    code = "import sys; sys.modules['pygls'] = None; from torchnumlint.cli import main; main(['server'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith('torchnumlint server needs pygls: pip install ".[server]"')
    assert done.stderr.count("\n") == 1
