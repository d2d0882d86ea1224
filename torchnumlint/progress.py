"""A files-done counter on stderr for long runs, so a run over thousands of files is visibly alive.

Shown only where a person watches: the command gives a stream only when stderr is a terminal and
`-q` is off, and a run of at most `THRESHOLD` files (a pre-commit run, one folder) shows nothing.
The line is redrawn in place (`\\r`) at most every `INTERVAL` seconds and erased at the end, so
the report that follows starts on a clean line and nothing is left in a terminal's scrollback.
"""

from __future__ import annotations

import time
from typing import Optional, TextIO

THRESHOLD = 300  # files: below this a run is short enough to need no counter
INTERVAL = 0.1  # seconds between redraws


class Progress:
    """Counts the files a run has done; draws `torchnumlint: 1234/10229 files` on `stream`.
    Without a stream (piped, quiet, a library call) it only counts."""

    def __init__(self, stream: Optional[TextIO]) -> None:
        self.stream = stream
        self.total = 0
        self.done = 0
        self.shown = False
        self._drawn = 0.0
        self._width = 0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        self.shown = self.stream is not None and total > THRESHOLD
        if self.shown:
            self._draw()

    def advance(self) -> None:
        self.done += 1
        if self.shown and (time.monotonic() - self._drawn >= INTERVAL or self.done == self.total):
            self._draw()

    def finish(self) -> None:
        if self.shown and self.stream is not None:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self.shown = False

    def _draw(self) -> None:
        line = f"torchnumlint: {self.done}/{self.total} files"
        self._width = max(self._width, len(line))
        if self.stream is None:
            return  # never: `shown` needs a stream
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._drawn = time.monotonic()
