"""What the server and its lint process say to each other (pickled over a pipe): plain data,
importable without libcst or pygls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from torchnumlint.findings import Finding


# -- requests: each gets one reply ------------------------------------------------------------------
@dataclass(frozen=True)
class Lint:
    """Lint `text` as the file at `path`. `time_limit`: seconds the analysis may take."""

    path: str
    text: str
    time_limit: float


@dataclass(frozen=True)
class FixAll:
    """Apply every fix `--fix` would apply to `text` as the file at `path`, to a fixed point (with
    the file's `unsafe-fixes`, the unsafe ones too)."""

    path: str
    text: str


# -- notifications: no reply ------------------------------------------------------------------------
@dataclass(frozen=True)
class Saved:
    """The file at `path` now holds `text` on disk (None: read it again; it may be gone)."""

    path: str
    text: Optional[str] = None


# -- replies ----------------------------------------------------------------------------------------
@dataclass
class Ready:
    """The lint process has started: each rule's documentation (`torchnumlint rule CODE`), by code."""

    docs: Dict[str, str]


@dataclass
class Linted:
    """The findings of a Lint; `project` says whether the whole project's facts were used (False
    while they are still being gathered: the buffer's own were)."""

    findings: List[Finding]
    project: bool = True


@dataclass
class Fixed:
    """The text after FixAll, how many fixes went in, and whether unsafe ones could."""

    text: str
    applied: int
    unsafe: bool


@dataclass
class Refused:
    """Why a request gave no result. `kind`: "syntax" (the text is not Python yet: the last
    findings stand), "excluded" (the configuration leaves the file out), "config" (its
    configuration is invalid), "gave-up" (the analysis ran past its time limit), "failed" (it
    broke; `message` says why)."""

    kind: str
    message: str = ""


@dataclass
class FactsReady:
    """Every file's facts of the project at `root` are known: buffers linted meanwhile with their
    own facts alone can be linted again. `files` were read in `seconds`."""

    root: str
    files: int
    seconds: float


@dataclass
class Reply:
    """The answer to request number `id`."""

    id: int
    result: object = field(default=None)
