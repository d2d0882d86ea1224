"""A source file as read: its path, bytes, text and encoding (the data `source.py` reads and
writes, and `notebook.py` extends for the code cells of a notebook). Apart from `source.py` so the
notebook reader and the reader of plain files depend on it, not on each other."""

from __future__ import annotations

from dataclasses import dataclass


class SourceError(Exception):
    """The file cannot be read or decoded; the message is the cause, for one line of output."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    raw: bytes
    text: str
    encoding: str
    bom: bool
