"""Worker processes that run one function over many items, results in the items' order.

Why a pool of our own rather than `multiprocessing.Pool`: a worker that segfaults (a deep
expression in the C parser) or hangs must cost one item, not the run, and the item must be
named. Each worker holds one item at a time; when it dies its item becomes a failure, when it
runs past `timeout` it is killed and its item becomes a failure, and a fresh worker takes its
place. Workers are forked, so the function and whatever it reads (settings, the project index)
are inherited, never pickled; only items and results cross the pipes. Results come back in the
order of the items whatever order the workers finish in, and are given as soon as every item
before them is done, so a run never holds more than a few items' results at once beyond what the
caller keeps.

Items are dispatched in their order, with two exceptions that only `weight` (an item's expected
cost: a file's size) enables. An item heavier than 1/`TAIL` of a worker's share of the total goes
first, heaviest first: dispatched in its turn near the end it would leave the other workers idle
while it alone runs (one 160 KB file among x-transformers' 36 is a quarter of the work). And an
item heavier than `recycle_above` (a very large file: LibCST's tree of a 1.4 MB file peaks near
800 MB) is never in flight while another such item is, and its worker is stopped after it, a
fresh one forked for the next item: the memory that item raised the worker's high-water mark to
goes back to the system, not on to every later item (CPython's allocator keeps its arenas), and
two of them never stack up in two workers. A worker whose private memory grew by more than
`GROWTH_LIMIT` since it was forked (one file of a few hundred KB, or many small ones) is replaced
the same way, whatever the item. With a
`budget`, an item is sent only while the weights of the items in flight and its own fit it, or
when nothing is in flight: the next item that fits goes instead (a light one beside a heavy one),
so the trees built at once are bounded, not only each one. Results
are still given in the items' order; those of the items sent first wait for the ones before them
(a few items: each is a sizeable share).

Where `fork` is not available, or `jobs` is None, items are processed here, one after another.

A run of one light item (`alone_up_to`: a pre-commit run computes the changed file's facts, then
lints it) is processed here too, with the same guarantees, since forking a worker for it cost
more than the item (0.05-0.1 s of the two, against 0.02 s for a small file's lint): an exception
is the item's failure as in a worker, and past `timeout` an alarm (SIGALRM) stops it and makes it
the item's failure. What a worker guards against beyond that is a crash of native code (LibCST's
parser), which the caller rules out (`runner.ALONE`), and which code that is about to call it on
an input it cannot vouch for asks about (`processing_here`): it raises `NeedsWorker`, and the item
is run again from its start in a worker, as before. Where this process cannot take the alarm (not
its main thread, or its host handles SIGALRM or runs a timer of its own), a worker runs the item.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

# `multiprocessing` is imported only when workers are started: a run with nothing to lint
# (everything cached, a file no rule can report in) does not pay for it.

T = TypeVar("T")
R = TypeVar("R")

Failure = Callable[[T, str], R]  # (item, what went wrong) -> the item's result
TAIL = 8  # an item over 1/TAIL of a worker's share of the work is sent first (`_order`)
# A worker whose private memory grew by more than this since it was forked is replaced after its
# item: LibCST's tree of a 300 KB file leaves a worker hundreds of MB larger for good (the
# allocator keeps its arenas), and each worker would keep the high-water mark of its largest file.
# Private, not resident: a forked worker's resident set already counts the parent's pages it
# shares, and its reads of the project's facts (reference counts are writes) copy those pages
# without growing it. On the torch sources, workers grew from ~50 to 250-350 MB of PSS while
# their resident memory grew by less than 200 MB: never replaced, one of them idling at 244 MB
# beside another's 450 KB file made the run's peak. Not lower: a fresh worker computes again the
# project-wide answers the summaries memoize (at 100 MB, 359 workers and ~50 % more CPU there).
GROWTH_LIMIT = 150_000_000
INTERNAL = "internal error in torchnumlint (please report it)"  # how a failure that is a bug begins


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def run_all(
    function: Callable[[T], R],
    items: Sequence[T],
    jobs: Optional[int],
    on_failure: Failure,
    timeout: Optional[float] = None,
    weight: Optional[Callable[[T], int]] = None,
    recycle_above: Optional[int] = None,
    budget: Optional[int] = None,
    alone_up_to: Optional[int] = None,
) -> Iterator[R]:
    """`function(item)` for each item, in order. With `jobs`, in that many worker processes: a
    worker that dies or exceeds `timeout` seconds on an item gives `on_failure(item, why)`. An
    exception raised by `function` in a worker is that item's failure too. With `weight`, the
    heaviest items are sent first, an item heavier than `recycle_above` runs alone among such
    items, in a worker stopped after it, and with `budget` an item is sent only while the
    weights in flight and its own stay within it (or nothing else is in flight): the next item
    that fits goes instead, a light one beside a heavy one. With `alone_up_to`, a lone item
    that weighs at most that is processed here, its failures and timeout as in a worker (see
    the module)."""
    if jobs is None:
        for item in items:
            yield function(item)
        return
    weights = [weight(item) for item in items] if weight is not None else None
    if (
        alone_up_to is not None
        and len(items) == 1
        and (weights is None or weights[0] <= alone_up_to)
        and (timeout is None or _can_time_here())
    ):
        try:
            yield _here(function, items[0], on_failure, timeout)
            return
        except NeedsWorker:
            pass  # run again in a worker, from its start
    if not can_fork():
        for item in items:
            yield function(item)
        return
    yield from _Pool(function, max(1, jobs), on_failure, timeout, budget).map(items, weights, recycle_above)


class NeedsWorker(BaseException):
    """Raised by an item processed here (`processing_here`) that is about to do what only a worker
    survives (LibCST's native parser on a statement too deeply nested): it is run in a worker."""


_processing_here = False


def processing_here() -> bool:
    """Whether the item being processed runs in this process (`alone_up_to`), where a crash of
    native code would end the run, not cost the item."""
    return _processing_here


class _TimeUp(BaseException):
    """What the alarm of an item processed here raises (`_here`): not an `Exception`, so that no
    `except Exception` in the code it stops takes it for a failure of that code."""


def _time_up(signum: int, frame: object) -> None:
    raise _TimeUp


def _can_time_here() -> bool:
    """Whether this process can stop an item with SIGALRM: where the platform has it, in the main
    thread (the only one a signal handler runs in), with no handler or timer of the host's own."""
    if not hasattr(signal, "setitimer"):  # pragma: no cover - not POSIX
        return False
    import threading  # (LibCST loads it too)

    if threading.current_thread() is not threading.main_thread():
        return False
    return signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@contextlib.contextmanager
def _alarm(seconds: Optional[float]) -> Iterator[None]:
    """`_TimeUp` raised in the block after `seconds` (never with None); the alarm is off after it."""
    if seconds is None:
        yield
        return
    signal.signal(signal.SIGALRM, _time_up)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-6))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def _here(function: Callable[[T], R], item: T, on_failure: Failure, timeout: Optional[float]) -> R:
    """`function(item)` in this process, failing as in a worker: an exception, or `timeout`
    seconds passed (`_alarm`: checked between bytecodes, so a native call ends first), gives
    `on_failure(item, why)` in the words the pool uses. `NeedsWorker` goes to the caller."""
    global _processing_here
    outer, _processing_here = _processing_here, True
    try:
        with _alarm(timeout):
            return function(item)
    except _TimeUp:
        return on_failure(item, _gave_up(timeout))
    except Exception as exc:
        return on_failure(item, f"{INTERNAL}: {_exception_line(exc)}")
    finally:
        _processing_here = outer


def _exception_line(exc: BaseException) -> str:
    """The exception as the last line of its traceback says it."""
    import traceback  # (with textwrap and linecache behind it: no cost of a run where nothing fails)

    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _gave_up(timeout: Optional[float]) -> str:
    return f"gave up after {timeout:g} s (the time limit per file)"


def _order(weights: Optional[List[int]], jobs: int) -> List[int]:
    """The positions of the items in the order they are sent: those heavier than 1/TAIL of a
    worker's share first, heaviest first (with one worker nothing waits on a tail), then the rest
    in order."""
    count = len(weights) if weights is not None else 0
    if weights is None or jobs == 1:
        return list(range(count))
    share = sum(weights) / jobs
    heavy = sorted((p for p in range(count) if weights[p] * TAIL > share), key=lambda p: -weights[p])
    first = set(heavy)
    return heavy + [p for p in range(count) if p not in first]


class _Worker:
    def __init__(self, function: Callable) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(function, child), daemon=True)
        self.process.start()
        child.close()
        self.task: Optional[Tuple[int, object, float]] = None  # (position, item, started)
        self.grown = False  # past GROWTH_LIMIT after its last item: stopped, a fresh one forked

    def stop(self, kill: bool = False) -> None:
        if kill and self.process.is_alive():
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join()
        self.conn.close()


def _private() -> int:
    """This process's private memory in bytes: the pages no other process shares, its own and the
    parent's it wrote to since the fork (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/smaps_rollup", "rb") as handle:
            return 1024 * sum(int(line.split()[1]) for line in handle if line.startswith((b"Private_Clean:", b"Private_Dirty:")))
    except (OSError, ValueError, IndexError):
        return 0


def _serve(function: Callable, conn: Connection) -> None:
    """A worker's loop: items in, (ok, result or traceback, whether it grew past GROWTH_LIMIT)
    out, until told to stop."""
    global _processing_here
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
    _processing_here = False  # (forked while the parent processed an item itself)
    start = _private()
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            ok, value = True, function(task)
        except BaseException as exc:  # the item's failure, reported by the parent
            ok, value = False, _exception_line(exc)
        conn.send((ok, value, _private() - start > GROWTH_LIMIT))


class _Pool:
    def __init__(self, function: Callable, jobs: int, on_failure: Failure, timeout: Optional[float], budget: Optional[int] = None) -> None:
        self.function = function
        self.jobs = jobs
        self.on_failure = on_failure
        self.timeout = timeout
        self.budget = budget

    def map(self, items: Sequence, weights: Optional[List[int]], recycle_above: Optional[int]) -> Iterator:
        if weights is None:
            weights = [0] * len(items)
        large = [recycle_above is not None and w > recycle_above for w in weights]
        order = _order(weights, self.jobs)
        rank = {position: turn for turn, position in enumerate(order)}
        # the large items and the others, each in the order they are sent: a large one waits
        # while another is in flight, the others never wait
        queues: Tuple[Deque[int], Deque[int]] = (collections.deque(), collections.deque())
        for position in order:
            queues[large[position]].append(position)
        workers: List[_Worker] = []
        done: Dict[int, object] = {}
        emitted = 0
        try:
            while True:
                self._dispatch(workers, items, queues, rank, large, weights)
                while emitted in done:
                    yield done.pop(emitted)
                    emitted += 1
                busy = [w for w in workers if w.task is not None]
                if not busy:  # an idle pool always takes the next item: none is left
                    return
                for worker in self._settle(busy):
                    assert worker.task is not None  # settled workers hold their result
                    position, result, _ = worker.task
                    worker.task = None
                    done[position] = result
                    if large[position] or worker.grown:
                        worker.stop()  # a fresh worker takes the next item
                workers = [w for w in workers if w.process.is_alive() or w.task is not None]
        finally:
            for worker in workers:
                worker.stop(kill=worker.task is not None)

    def _dispatch(
        self,
        workers: List[_Worker],
        items: Sequence,
        queues: Tuple[Deque[int], Deque[int]],
        rank: Dict[int, int],
        large: List[bool],
        weights: List[int],
    ) -> None:
        """Give the next items to the idle workers (forking up to `jobs`), the large ones one at a
        time, each while it fits the budget (`_fitting`)."""
        others, larges = queues
        busy = [w.task[0] for w in workers if w.task is not None]
        large_busy = any(large[p] for p in busy)
        in_flight = sum(weights[p] for p in busy)
        while others or (larges and not large_busy):
            worker = next((w for w in workers if w.task is None), None)
            if worker is None and len(workers) == self.jobs:
                return
            options = [q for q in ((larges,) if not large_busy else ()) + (others,) if q]
            found = [(rank[q[at]], q, at) for q in options for at in [self._fitting(q, weights, in_flight)] if at is not None]
            if not found:
                break  # nothing fits beside what is in flight: wait for it
            _, queue, at = min(found, key=lambda f: f[0])
            position = queue[at]
            del queue[at]
            large_busy = large_busy or large[position]
            in_flight += weights[position]
            if worker is None:
                worker = _Worker(self.function)
                workers.append(worker)
            worker.task = (position, items[position], time.monotonic())
            worker.conn.send(items[position])
        self._stop_idle(workers)  # none can be given an item now

    @staticmethod
    def _stop_idle(workers: List[_Worker]) -> None:
        """Stop the idle workers (those waiting for the budget, or with nothing left to do): an
        idle worker keeps what its last items left (up to GROWTH_LIMIT), and it waits while a
        file heavy enough to fill the budget is linted, when that file's tree is largest (on the
        torch sources, 128 MB beside the 298 MB of the worker linting `distributed_test.py`). A
        fresh one is forked when an item fits."""
        for worker in workers:
            if worker.task is None:
                worker.stop()
        workers[:] = [w for w in workers if w.task is not None]

    def _fitting(self, queue: Deque[int], weights: List[int], in_flight: int) -> Optional[int]:
        """Where in `queue` the first item that fits the budget beside `in_flight` is (any
        item fits when nothing is in flight)."""
        if self.budget is None or in_flight == 0:
            return 0
        for at, position in enumerate(queue):
            if in_flight + weights[position] <= self.budget:
                return at
        return None

    def _settle(self, busy: List[_Worker]) -> List[_Worker]:
        """Wait for at least one busy worker to finish, fail or time out; store what each gave
        in place of its item (the caller moves it to `done`)."""
        timeout = None
        if self.timeout is not None:
            first = min(w.task[2] for w in busy if w.task is not None)
            timeout = max(0.0, first + self.timeout - time.monotonic())
        from multiprocessing.connection import wait

        ready = wait([w.conn for w in busy], timeout)
        finished = []
        for worker in busy:
            assert worker.task is not None  # busy: it holds a task
            position, item, started = worker.task
            if worker.conn in ready:
                try:
                    ok, value, worker.grown = worker.conn.recv()
                    result = value if ok else self.on_failure(item, f"{INTERNAL}: {value}")
                except (EOFError, OSError):
                    worker.process.join()
                    result = self.on_failure(item, _death(worker.process.exitcode))
                    worker.conn.close()
            elif self.timeout is not None and time.monotonic() - started >= self.timeout:
                worker.process.kill()
                worker.process.join()
                worker.conn.close()
                result = self.on_failure(item, _gave_up(self.timeout))
            else:
                continue
            worker.task = (position, result, started)
            finished.append(worker)
        return finished


def _death(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"{INTERNAL}: the worker process died ({name})"
    return f"{INTERNAL}: the worker process exited ({exitcode})"
