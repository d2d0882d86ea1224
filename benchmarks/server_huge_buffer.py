"""The language server on a huge buffer, as issue 21 found it: a 1 MB document with 16,001 findings
got no answer to 14 requests in 288 s, then an empty diagnostics list and no message.

    python benchmarks/server_huge_buffer.py [--size 1000000] [--requests 14] [--time-limit 10]

A small document is opened and linted first (its diagnostics are the ones that must stay); then a
document of `--size` characters, one finding per function, is opened, and while it is linted
`--requests` requests are sent at once: hovers on the small document (answered from what the
server holds) and code actions on the huge one (they wait for its lint: its fixes are offsets into
the text linted). The script prints how long each kind took to be answered, when the server said it gave up (window/showMessage) and whether
anything was published for the huge document (it must not be: the last diagnostics stay), and the
peak resident memory of the server's processes (Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SMALL = "import torch\n\n\ndef head(x):\n    return torch.log(torch.softmax(x, dim=-1))\n"


def huge(size: int) -> str:
    parts, i = ["import torch\n\n"], 0
    total = len(parts[0])
    while total < size:
        part = f"def f{i}(x):\n    return torch.log(torch.softmax(x, dim=-1))\n\n"
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)


def tree_rss(pid: int) -> int:
    """The resident memory of process `pid` and its descendants, in bytes (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except (OSError, ValueError):
            continue
    return total


async def sample_memory(pid: int, peak: list) -> None:
    while True:
        peak[0] = max(peak[0], tree_rss(pid))
        await asyncio.sleep(0.2)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=14)
    parser.add_argument("--time-limit", type=float, default=None, help="the server's timeLimit (default: its own)")
    args = parser.parse_args()
    client = LanguageClient("benchmark", "1")
    published: asyncio.Queue = asyncio.Queue()
    shown: asyncio.Queue = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(ls, params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait((time.perf_counter(), params))

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_show(ls, params: types.ShowMessageParams) -> None:
        shown.put_nowait((time.perf_counter(), params.message))

    with tempfile.TemporaryDirectory() as folder:
        small, big = Path(folder, "small.py"), Path(folder, "big.py")
        text = huge(args.size)
        options = {"timeLimit": args.time_limit} if args.time_limit is not None else None
        await client.start_io(sys.executable, "-m", "torchnumlint", "server")
        await client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), process_id=os.getpid(), initialization_options=options)
        )
        client.initialized(types.InitializedParams())
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=small.as_uri(), language_id="python", version=1, text=SMALL))
        )
        _, first = await asyncio.wait_for(published.get(), 300)
        print(f"small.py: {len(first.diagnostics)} diagnostics")

        opened = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=big.as_uri(), language_id="python", version=1, text=text))
        )
        print(f"big.py: {len(text):,} characters, {text.count('torch.log(')} findings expected")

        async def ask(i: int):
            asked = time.perf_counter()
            if i % 2:
                await client.text_document_hover_async(
                    types.HoverParams(text_document=types.TextDocumentIdentifier(uri=small.as_uri()), position=types.Position(4, 12))
                )
            else:
                await client.text_document_code_action_async(
                    types.CodeActionParams(
                        text_document=types.TextDocumentIdentifier(uri=big.as_uri()),
                        range=types.Range(types.Position(3, 0), types.Position(3, 10)),
                        context=types.CodeActionContext(diagnostics=[]),
                    )
                )
            return ("hover on small.py" if i % 2 else "code actions on big.py"), time.perf_counter() - asked

        peak = [0]
        sampler = asyncio.create_task(sample_memory(client._server.pid, peak))
        answers = await asyncio.gather(*(ask(i) for i in range(args.requests)))
        for what in sorted({what for what, _ in answers}):
            waits = [wait for asked, wait in answers if asked == what]
            print(f"  {len(waits)} x {what}: answered in median {1000 * statistics.median(waits):.0f} ms, worst {1000 * max(waits):.0f} ms")
        when, message = await asyncio.wait_for(shown.get(), 600)
        print(f"after {when - opened:.1f} s the server said: {message}")
        sampler.cancel()
        print(f"the server's processes peaked at {peak[0] / 2**20:,.0f} MiB resident (sampled every 0.2 s)")
        print("diagnostics published for big.py:", sum(1 for _, p in list(published._queue) if p.uri == big.as_uri()))
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


if __name__ == "__main__":
    asyncio.run(main())
