"""How quickly the language server starts and answers an edit, measured through a real LSP client.

    python benchmarks/server_latency.py [--project /tmp/corpus/huggingface__diffusers] [--edits 10]

Start-up: the wall time of `python -c "import torchnumlint.server.app"` (what the editor's process
imports before it can answer), and from starting `python -m torchnumlint server` to its answer to
`initialize` (the lint process starts after that answer).

Per change, on files of the project chosen by size (the smallest and the 50th, 90th and 100th
percentiles of the files that read project facts): the file is opened, the project's facts are
gathered (the server says so in a window/logMessage, with their count and time), then each edit is
sent as a whole-document change with the debounce at 0, and the time from sending it to the
diagnostics of that version is taken. Two kinds of edit: a comment appended at the end (the file's
own facts stay as they were: the project index made for it is reused) and a line inserted at the
top (every position below moves: its facts change, the index is made again from the kept facts).

Numbers depend on the machine and its load; the script prints them with the median and the worst.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from lsprotocol import types
from pygls.lsp.client import LanguageClient


def import_time(runs: int) -> List[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torchnumlint.server.app"], check=True)
        times.append(time.perf_counter() - started)
    return times


class Client:
    """A client on a server process; diagnostics and log messages go to queues."""

    def __init__(self) -> None:
        self.client = LanguageClient("benchmark", "1")
        self.published: Dict[str, asyncio.Queue] = {}
        self.logs: asyncio.Queue = asyncio.Queue()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(ls, params: types.PublishDiagnosticsParams) -> None:
            self.queue(params.uri).put_nowait((time.perf_counter(), params))

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(ls, params: types.LogMessageParams) -> None:
            self.logs.put_nowait(params.message)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_show(ls, params: types.ShowMessageParams) -> None:
            print(f"    server says: {params.message}")

    def queue(self, uri: str) -> asyncio.Queue:
        return self.published.setdefault(uri, asyncio.Queue())

    async def start(self, options: Optional[dict] = None) -> float:
        """Start the server; the seconds from starting it to the answer to initialize."""
        started = time.perf_counter()
        await self.client.start_io(sys.executable, "-m", "torchnumlint", "server")
        await self.client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), process_id=os.getpid(),
                                   initialization_options=options)
        )
        answered = time.perf_counter() - started
        self.client.initialized(types.InitializedParams())
        return answered

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def version(self, uri: str, version: int, timeout: float) -> types.PublishDiagnosticsParams:
        """The first diagnostics published for `version` or a later one."""
        while True:
            _, params = await asyncio.wait_for(self.queue(uri).get(), timeout)
            if params.version is not None and params.version >= version:
                return params


async def start_times(runs: int) -> List[float]:
    times = []
    for _ in range(runs):
        client = Client()
        times.append(await client.start())
        await client.stop()
    return times


def pick_files(project: Path) -> List[Path]:
    """The files that read project facts (a rule that reads the index can fire in them), by size:
    the smallest, the median, the 90th percentile, the largest."""
    from torchnumlint.config import Settings
    from torchnumlint.discovery import project_files
    from torchnumlint.runner import reads_project_index
    from torchnumlint.source import SourceError, read_source

    settings = Settings()
    reading = []
    for path in project_files(str(project), settings):
        if not path.endswith(".py"):
            continue
        try:
            text = read_source(path).text
        except SourceError:
            continue
        if reads_project_index(text, settings.rules_for(path)):
            reading.append((len(text), path))
    reading.sort()
    picks = [reading[0], reading[len(reading) // 2], reading[len(reading) * 9 // 10], reading[-1]]
    return [Path(path) for _, path in dict.fromkeys(picks)]


async def edits(project: Path, files: List[Path], count: int, facts_timeout: float) -> None:
    client = Client()
    await client.start({"debounce": 0, "timeLimit": 120})
    try:
        for path in files:
            text = path.read_text(encoding="utf-8")
            uri = path.as_uri()
            started = time.perf_counter()
            client.client.text_document_did_open(
                types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
            )
            first = await client.version(uri, 1, facts_timeout)
            print(f"{path.relative_to(project)} ({len(text):,} characters): opened, first diagnostics "
                  f"({len(first.diagnostics)}) after {time.perf_counter() - started:.2f} s")
            if path == files[0]:
                log = await asyncio.wait_for(client.logs.get(), facts_timeout)
                print(f"  {log}")
                await asyncio.sleep(2.0)  # let the re-lint with the project's facts go by
            version = 1
            for kind, edit in (("comment appended", lambda t, i: t + f"\n# edit {i}\n"),
                               ("line inserted at the top", lambda t, i: f"# edit {i}\n" + t)):
                times = []
                for i in range(count):
                    version += 1
                    sent = time.perf_counter()
                    client.client.text_document_did_change(types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edit(text, i))],
                    ))
                    await client.version(uri, version, facts_timeout)
                    times.append(time.perf_counter() - sent)
                print(f"  {kind}: median {1000 * statistics.median(times):.0f} ms, worst {1000 * max(times):.0f} ms "
                      f"over {count} edits")
    finally:
        await client.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", type=Path, default=Path("/tmp/corpus/huggingface__diffusers"))
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--facts-timeout", type=float, default=900.0, help="seconds to wait for the project's facts")
    args = parser.parse_args()
    imports = import_time(args.starts)
    print(f"import torchnumlint.server.app: median {statistics.median(imports):.3f} s, worst {max(imports):.3f} s "
          f"over {args.starts} runs")
    starts = await start_times(args.starts)
    print(f"`torchnumlint server` start to the initialize answer: median {statistics.median(starts):.3f} s, "
          f"worst {max(starts):.3f} s over {args.starts} runs")
    project = args.project.resolve()
    files = pick_files(project)
    print(f"{project}: per change, {len(files)} files")
    await edits(project, files, args.edits, args.facts_timeout)


if __name__ == "__main__":
    asyncio.run(main())
