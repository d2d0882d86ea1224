"""The server's side of the lint process (`worker.py`): requests in order, one at a time, each
answered through an asyncio future; a request cancelled before it is sent is never sent.

A request that runs past its time limit, or a lint process that dies, fails its request with
`GaveUp`, and a fresh process takes the next one: ending the process is the only way to stop a
LibCST parse of a huge buffer, and it gives back all its memory. The project facts the old process
held are gathered again by the new one.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Callable, Deque, Dict, Optional, Tuple

from torchnumlint.server import messages


class GaveUp(Exception):
    """The request was not answered: the message says why; `timed_out`: it ran past its time."""

    def __init__(self, why: str, timed_out: bool = False) -> None:
        super().__init__(why)
        self.timed_out = timed_out


class Linter:
    """Sends requests to the lint process and hands back its replies.

    `on_event` is called (in the event loop) with what the process says unasked: `Ready` (its
    rules' docs), `FactsReady`, a `Refused` for a bug met outside a request; and with a `Refused`
    when the process could not start at all."""

    def __init__(self, on_event: Callable[[object], None]) -> None:
        self.on_event = on_event
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._send_pool = ThreadPoolExecutor(1, thread_name_prefix="torchnumlint-send")  # in order
        self._queue: Deque[Tuple[int, object, float, asyncio.Future]] = deque()
        self._pending: Dict[int, asyncio.Future] = {}
        self._next = 0
        self._busy: Optional[Tuple[int, asyncio.TimerHandle]] = None
        self._process: Optional[multiprocessing.process.BaseProcess] = None
        self._conn: Optional[Connection] = None
        self._ready = False
        self._generation = 0
        self.closed = False

    # -- the process ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the lint process (in the event loop: the replies are handed to it)."""
        from torchnumlint.server.worker import serve

        self.loop = asyncio.get_running_loop()
        context = multiprocessing.get_context("spawn")  # the server has threads: never fork it
        ours, theirs = context.Pipe()
        process = context.Process(target=serve, args=(theirs,), name="torchnumlint-lint", daemon=True)
        process.start()
        theirs.close()
        self._generation += 1
        self._process, self._conn, self._ready = process, ours, False
        threading.Thread(target=self._read, args=(ours, self._generation), name="torchnumlint-read", daemon=True).start()

    def _read(self, conn, generation: int) -> None:
        """Hand every message of the process to the event loop; at the end, say it ended."""
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            self._call(self._received, generation, message)
        self._call(self._ended, generation)

    def _call(self, function, *args) -> None:
        assert self.loop is not None
        try:
            self.loop.call_soon_threadsafe(function, *args)
        except RuntimeError:  # the loop is closed: the session is over
            pass

    def _received(self, generation: int, message: object) -> None:
        if generation != self._generation:
            return
        if isinstance(message, messages.Reply):
            future = self._pending.pop(message.id, None)
            if self._busy is not None and self._busy[0] == message.id:
                self._busy[1].cancel()
                self._busy = None
            if future is not None and not future.done():
                future.set_result(message.result)
            self._pump()
            return
        if isinstance(message, messages.Ready):
            self._ready = True
            self._pump()
        self.on_event(message)

    def _ended(self, generation: int) -> None:
        if generation != self._generation or self.closed:
            return
        if self._process is not None:
            self._process.join(5)
        code = self._process.exitcode if self._process is not None else None
        if not self._ready:  # it never started: a fresh one would fail the same way
            why = f"the lint process could not start (exit code {code}); see the server's log"
            self.close()
            self.on_event(messages.Refused("failed", why))
            return
        self._fail_busy(GaveUp(f"the lint process stopped (exit code {code})"))
        self.start()

    def _fail_busy(self, why: GaveUp) -> None:
        if self._busy is not None:
            number, timer = self._busy
            timer.cancel()
            self._busy = None
            future = self._pending.pop(number, None)
            if future is not None and not future.done():
                future.set_exception(why)

    def _restart(self, why: GaveUp) -> None:
        """End the process (its busy request fails with `why`) and start a fresh one."""
        self._fail_busy(why)  # the one request the process held
        self._stop_process()
        self.start()

    def _stop_process(self) -> None:
        self._generation += 1  # what the old process still says is not listened to
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        self.closed = True
        for future in list(self._pending.values()) + [item[3] for item in self._queue]:
            future.cancel()
        self._queue.clear()
        self._pending.clear()
        if self._busy is not None:
            self._busy[1].cancel()
            self._busy = None
        self._stop_process()
        self._send_pool.shutdown(wait=False)

    # -- requests ---------------------------------------------------------------------------------
    def request(self, request: object, seconds: float) -> "asyncio.Future[object]":
        """The reply to `request` (a future: cancel it to take the request back before it is
        sent). It fails with GaveUp when the process holds it more than `seconds`."""
        assert self.loop is not None
        future: asyncio.Future = self.loop.create_future()
        self._next += 1
        self._queue.append((self._next, request, seconds, future))
        self._pump()
        return future

    def notify(self, message: object) -> None:
        """Send a notification (after every request already sent, before those still queued)."""
        if self._conn is not None:
            self._send(self._conn, message)

    def _send(self, conn, message: object) -> None:
        def send() -> None:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the process ended meanwhile: `_ended` deals with it
                pass

        self._send_pool.submit(send)

    def _pump(self) -> None:
        """Send the next request still wanted, when the process is free."""
        if self.closed or not self._ready or self._busy is not None or self._conn is None:
            return
        while self._queue:
            number, request, seconds, future = self._queue.popleft()
            if future.done():  # cancelled while it waited: superseded
                continue
            assert self.loop is not None
            why = GaveUp(f"no result within {seconds:g} s", timed_out=True)
            timer = self.loop.call_later(seconds, self._restart, why)
            self._busy = (number, timer)
            self._pending[number] = future
            self._send(self._conn, (number, request))
            return
