"""A source file as read: its path, bytes, text and encoding (the data `source.py` reads and
writes, and `notebook.py` extends for the code cells of a notebook). Apart from `source.py` so the
notebook reader and the reader of plain files depend on it, not on each other."""

from __future__ import annotations

from typing import ClassVar, Tuple

from torchnumlint.record import Record


class SourceError(Exception):
    """The file cannot be read or decoded; the message is the cause, for one line of output."""


class SourceFile(Record):
    """Not changed once read: hashable by its fields (as the frozen dataclass it was), and weakly
    referable (a run holds only the sources it still needs)."""

    _fields: ClassVar[Tuple[str, ...]] = ("path", "raw", "text", "encoding", "bom")
    __slots__ = _fields + ("__weakref__",)
    path: str
    raw: bytes
    text: str
    encoding: str
    bom: bool

    def __init__(self, path: str, raw: bytes, text: str, encoding: str, bom: bool) -> None:
        self.path, self.raw, self.text, self.encoding, self.bom = path, raw, text, encoding, bom

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self._fields))
