"""How quickly the language server starts and answers an edit, measured through a real LSP client.

    python benchmarks/server_latency.py [--project /tmp/corpus/huggingface__diffusers] [--edits 10] [--skip-lsp]

Start-up: the wall and CPU time of `python -c "import torchnumlint.server"` and of
`...server.app` (what the editor's process imports before it can answer), and the wall time from
starting `python -m torchnumlint server` to its answer to `initialize` (the lint process starts
after that answer).

Per change, on files of the project chosen by size (the 25th, 50th and 90th percentiles of the
files that read project facts, `--percentiles`): the file is opened, the project's facts are
gathered (the server says so in a window/logMessage, with their count and time), then each edit is
sent as a whole-document change with the debounce at 0, and the time from sending it to the
diagnostics of that version is taken. Three kinds of edit: a comment appended at the end (the
file's own facts stay as they were: the project index made for it is reused), a line inserted at
the top (every position below moves: its facts change, the index is made again from the kept
facts) and a line with a call typed inside the function nearest the middle of the file (its
calls change, the positions below it move).

Then the same work in this process, in CPU seconds (what the lint process spends per change,
without the transport and the machine's other load), through the lint process's own answer
(`worker._Worker.answer`: configuration, syntax check, the project index for the buffer from the
kept facts, the lint), plus what the editor's process spends publishing the findings (LSP
diagnostics and their JSON-RPC encoding). Besides the three edits above: a helper added at the
end (what the buffer's helpers produce changes: the answers about producers are worked out again)
and a save (the buffer saved as edited, then linted again, as editors do). `--breakdown` profiles
each kind and prints where its CPU went (cumulative, so the caller lookups are inside the rule
walk; profiled times are inflated, the shares are what to read). To compare two versions of
torchnumlint, run this script under each (`PYTHONPATH=<a checkout>`) with `--skip-lsp`,
alternating, and compare ratios: the machine's load is printed before and after. `--json FILE`
writes the per-change CPU times.

After an edit the lint process lints only the statements the edit can reach and carries the
others' last findings over (`relint_scope.py`, `server/relint.py`): each kind's line says how
many of its changes were narrowed so (the others linted the whole buffer).

Numbers depend on the machine and its load (printed); the script gives the median and the worst.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.lsp.client import LanguageClient


def typed_in_function(text: str, i: int) -> str:
    """A line with a call typed after the first statement of the function or method nearest the
    middle of the file (`edit_3 = str(3)`): its calls change, every position below moves."""
    tree = ast.parse(text)
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        return f"edit_{i} = str({i})\n" + text
    middle = text.count("\n") // 2
    first = min(functions, key=lambda node: abs(node.lineno - middle)).body[0]
    rows = text.split("\n")
    rows.insert(first.end_lineno or first.lineno, " " * first.col_offset + f"edit_{i} = str({i})")
    return "\n".join(rows)


def helper_added(text: str, i: int) -> str:
    """A helper returning a softmax added at the end (a new name each time): what the buffer's
    helpers produce changes."""
    return text + f"\n\ndef edit_helper_{i}(x):\n    return x.softmax(-1)\n"


# (what it is, the text after edit number i)
EDITS: Sequence[Tuple[str, Callable[[str, int], str]]] = (
    ("comment appended (the file's own facts unchanged)", lambda text, i: text + f"\n# edit {i}\n"),
    # one line, then two, then one: every position below moves at each edit
    ("lines inserted at the top (its facts changed)", lambda text, i: "# edit\n" * (1 + i % 2) + text),
    ("a line typed inside a function (its calls changed)", typed_in_function),
    ("a helper added at the end (what its helpers produce changed)", helper_added),
)
SAVED = "saved as edited (lines at the top), then linted again"

# where the lint process's CPU goes (`--breakdown`): (what, module file, function), cumulative
PARTS: Sequence[Tuple[str, str, str]] = (
    ("configuration and excludes", "config.py", "rules_for"),
    ("syntax checks (ast)", "prepass.py", "check_syntax"),
    ("the project index for the buffer", "facts.py", "index_for"),
    ("the buffer's own facts (in the index and a save)", "index.py", "index_file"),
    ("moves mapped (in the index)", "moves.py", "moved_index"),
    ("finalize (in the index)", "index.py", "finalize"),
    ("the buffer's statements split (relint_scope)", "relint_scope.py", "__init__"),
    ("the edit's scope (relint_scope)", "relint_scope.py", "plan"),
    ("the last answers replayed", "fact_reads.py", "still_valid"),
    ("candidate rules (pre-filter)", "engine.py", "candidate_rules"),
    ("masking unneeded groups", "engine.py", "_masked"),
    ("LibCST parse of the buffer", "engine.py", "_parse_masked"),
    ("rule walk", "walk.py", "walk"),
    ("caller lookups (in the walk)", "callers.py", "callers"),
    ("the project's call sites indexed (in the lookups)", "summaries.py", "_named_calls"),
    ("the same, the server's table (in the lookups)", "calls.py", "named_calls"),
    ("positions", "engine.py", "_to_findings"),
    ("noqa filter", "directives.py", "filter_findings"),
)


def import_time(module: str, runs: int) -> Tuple[List[float], List[float]]:
    """Wall and CPU seconds of `python -c "import <module>"`."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


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
            types.InitializeParams(capabilities=types.ClientCapabilities(), process_id=os.getpid(), initialization_options=options)
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


def pick_files(project: Path, percentiles: Sequence[int]) -> List[Path]:
    """The files that read project facts (a rule that reads the index can fire in them), at these
    percentiles of their sizes."""
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
    picks = [reading[min(len(reading) - 1, len(reading) * percentile // 100)] for percentile in percentiles]
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
            print(
                f"{path.relative_to(project)} ({len(text):,} characters): opened, first diagnostics "
                f"({len(first.diagnostics)}) after {time.perf_counter() - started:.2f} s"
            )
            if path == files[0]:
                log = await asyncio.wait_for(client.logs.get(), facts_timeout)
                print(f"  {log}")
                await asyncio.sleep(2.0)  # let the re-lint with the project's facts go by
            version = 1
            for kind, edit in EDITS:
                times = []
                for i in range(count):
                    version += 1
                    sent = time.perf_counter()
                    client.client.text_document_did_change(
                        types.DidChangeTextDocumentParams(
                            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                            content_changes=[types.TextDocumentContentChangeWholeDocument(text=edit(text, i))],
                        )
                    )
                    await client.version(uri, version, facts_timeout)
                    times.append(time.perf_counter() - sent)
                print(f"  {kind}: median {1000 * statistics.median(times):.0f} ms, worst {1000 * max(times):.0f} ms over {count} edits")
    finally:
        await client.stop()


class _Pipe:
    """What the lint process would say to the server unasked (facts gathered), dropped."""

    def send(self, message: object) -> None:
        pass


def _narrowed(worker) -> int:
    """How many lints the lint process narrowed to what an edit reaches (0 for a version that
    lints the whole buffer, compared with `PYTHONPATH`)."""
    relinter = getattr(worker, "relinter", None)
    return relinter.narrowed if relinter is not None else 0


def publish_seconds(text: str, findings: list, converter) -> float:
    """CPU seconds the editor's process spends publishing `findings` of `text`: LSP diagnostics
    (`lsp.py`) and the JSON-RPC message pygls writes with its `converter` (made once per session,
    as the server's is)."""
    from pygls.workspace.position_codec import PositionCodec

    from torchnumlint.server import lsp

    started = time.process_time()
    lines = lsp.Lines(text, PositionCodec())
    diagnostics = [lsp.diagnostic(lines, finding, None) for finding in findings]
    params = types.PublishDiagnosticsParams(uri="file:///x.py", diagnostics=diagnostics, version=1)
    message = {"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, "params": converter.unstructure(params)}
    json.dumps(message)
    return time.process_time() - started


def breakdown(profile) -> str:
    """Where the profiled CPU went, by `PARTS`, as shares of the whole."""
    import pstats

    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    rows = []
    for what, module, function in PARTS:
        spent = sum(entry[3] for (file, _, name), entry in stats.items() if file.endswith(module) and name == function)
        rows.append(f"{what} {100 * spent / total:.0f} %")
    return "; ".join(rows)


def in_process(project: Path, files: List[Path], count: int, profile: bool, record: Optional[dict]) -> None:
    """The lint process's work per change without the transport, in CPU seconds of this process:
    its answer to the lint request (`_Worker.answer`), and publishing its findings."""
    import cProfile

    from pygls.protocol import default_converter

    from torchnumlint.server import messages
    from torchnumlint.server.worker import _Worker

    worker = _Worker(_Pipe())  # type: ignore[arg-type]
    converter = default_converter()
    facts = worker.projects.of(str(files[0]))
    assert facts is not None
    cpu, wall = time.process_time(), time.perf_counter()
    while not facts.complete:
        worker.gather(facts)  # as the lint process does, `gc.freeze()` at the end included
    print(
        f"in process: facts of {len(facts.parts):,} files gathered in {time.process_time() - cpu:.1f} s CPU "
        f"({time.perf_counter() - wall:.1f} s wall)"
    )

    def answer(path: Path, text: str) -> list:
        served = worker.answer(messages.Lint(str(path), text, 120.0))
        assert isinstance(served, messages.Linted), served
        return served.findings

    for path in files:
        text = path.read_text(encoding="utf-8")
        print(f"  {path.relative_to(project)} ({len(text):,} characters)")
        answer(path, text)  # as opened
        kinds = list(EDITS) + [(SAVED, EDITS[1][1])]
        for kind, edit in kinds:
            times, published = [], []
            narrowed = 0  # of the timed lints
            profiler = cProfile.Profile() if profile else None
            for i in range(count):
                new = edit(text, i)
                if kind == SAVED:
                    answer(path, new)  # the edit, linted before the save
                before = _narrowed(worker)
                started = time.process_time()
                if profiler is not None:
                    profiler.enable()
                if kind == SAVED:
                    worker.handle(messages.Saved(str(path), new))
                findings = answer(path, new)
                if profiler is not None:
                    profiler.disable()
                times.append(time.process_time() - started)
                narrowed += _narrowed(worker) - before
                published.append(publish_seconds(new, findings, converter))
            if record is not None:
                record.setdefault(f"{path.relative_to(project)} ({len(text):,} characters)", {})[kind] = times
            print(
                f"    {kind}: per change median {1000 * statistics.median(times):.0f} ms (worst {1000 * max(times):.0f}), "
                f"publishing {1000 * statistics.median(published):.1f} ms, CPU; {len(findings)} findings; "
                f"{narrowed} of {count} narrowed to what the edit reaches"
            )
            if profiler is not None:
                print(f"      profiled: {breakdown(profiler)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", type=Path, default=Path("/tmp/corpus/huggingface__diffusers"))
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--skip-lsp", action="store_true", help="only the in-process measurement")
    parser.add_argument("--percentiles", type=int, nargs="+", default=[25, 50, 90], help="of the files' sizes")
    parser.add_argument("--facts-timeout", type=float, default=900.0, help="seconds to wait for the project's facts")
    parser.add_argument("--breakdown", action="store_true", help="profile the in-process changes: where the CPU went")
    parser.add_argument("--json", type=Path, help="write the in-process CPU seconds per change here")
    args = parser.parse_args()
    record: Optional[dict] = {} if args.json else None
    import torchnumlint

    print(f"torchnumlint from {Path(torchnumlint.__file__).parent}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    project = args.project.resolve()
    files = pick_files(project, args.percentiles)
    if args.skip_lsp:
        in_process(project, files, args.edits, args.breakdown, record)
        print(f"load average {os.getloadavg()[0]:.1f}")
        if args.json:
            args.json.write_text(json.dumps(record, indent=1))
        return
    # the package (what `torchnumlint server` names), and what the editor's process imports before
    # it answers initialize
    for module in ("torchnumlint.server", "torchnumlint.server.app"):
        walls, cpus = import_time(module, args.starts)
        print(
            f"import {module}: median {statistics.median(walls):.3f} s wall, "
            f"{statistics.median(cpus):.3f} s CPU; worst {max(walls):.3f} s wall over {args.starts} runs"
        )
    starts = await start_times(args.starts)
    print(
        f"`torchnumlint server` start to the initialize answer: median {statistics.median(starts):.3f} s, "
        f"worst {max(starts):.3f} s over {args.starts} runs"
    )
    print(f"{project}: per change, {len(files)} files")
    await edits(project, files, args.edits, args.facts_timeout)
    in_process(project, files, args.edits, args.breakdown, record)
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
