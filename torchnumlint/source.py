"""Reading sources faithfully and writing them back without ever losing user code.

Bytes -> text keeps what a round trip must keep: the PEP 263 encoding, a UTF-8 BOM, and the
file's own line endings (we decode bytes, never translate newlines). Writes keep what the file
is: they go through symlinks to their target, keep hard links, the mode and the owner, are
atomic where that allows (`write_source`), and are refused for a read-only file or one that
changed since it was read.
"""

from __future__ import annotations

import codecs
import io
import os
import stat

import sys

from torchnumlint.sourcefile import SourceError, SourceFile

# `notebook` (regexes, two dataclasses, json's decoder) is imported by the first notebook read, and
# `atomic_write` by the first write: a run over `.py` files that writes nothing loads neither.

__all__ = ["SourceError", "SourceFile", "read_source", "decode", "encode", "write_source"]


MAX_FILE_SIZE = 10_000_000  # bytes; the `max-file-size` setting (a 30 MB file cost 4.4 GB to lint)


def read_source(path: str, max_size: int = MAX_FILE_SIZE) -> SourceFile:
    """The file at `path`, read only if it is a regular file of at most `max_size` bytes: a FIFO
    named `x.py` would block the run forever, a link to `/dev/zero` would read without end, and a
    huge generated file costs gigabytes to parse. The file is opened without blocking and checked
    through its descriptor, so what is read is what was checked, and never more than the limit."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SourceError(f"skipped: not a regular file ({_kind(info.st_mode)})")
            if info.st_size > max_size:
                raise SourceError(f"skipped: {info.st_size:,} bytes, over the limit of {max_size:,} (max-file-size)")
            raw = handle.read(max_size + 1)
        except OSError as exc:
            raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > max_size:  # it grew since the check
        raise SourceError(f"skipped: over the limit of {max_size:,} bytes (max-file-size)")
    return decode(path, raw)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def decode(path: str, raw: bytes) -> SourceFile:
    if path.endswith(".ipynb"):  # its code cells as one module (notebook.py)
        from torchnumlint import notebook

        return notebook.decode(path, raw)
    if b"\x00" in raw:
        raise SourceError("cannot parse: source contains a NUL byte")
    bom = raw.startswith(codecs.BOM_UTF8)
    import tokenize  # here: a run whose files are all answered from the cache reads none (1-2 ms)

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            raise SourceError(f"cannot parse: {exc}") from None  # unknown encoding, BOM vs cookie
        encoding = "utf-8"  # undecodable bytes in the first lines: the decode below names them
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = raw[len(codecs.BOM_UTF8) :] if bom else raw
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(f"cannot decode as {encoding}: byte 0x{body[exc.start]:02x} at offset {exc.start}") from None
    except LookupError:
        raise SourceError(f"cannot decode: unknown encoding {encoding!r}") from None
    return SourceFile(path, raw, text, encoding, bom)


def encode(source: SourceFile, text: str) -> bytes:
    notebook = sys.modules.get("torchnumlint.notebook")  # loaded by the read of any notebook source
    if notebook is not None and isinstance(source, notebook.NotebookSource):  # the fixed cells spliced into its JSON
        return notebook.encode(source, text)
    data = text.encode(source.encoding)
    return codecs.BOM_UTF8 + data if source.bom else data


def write_source(source: SourceFile, text: str) -> None:
    """Replace the file's contents with `text`, in the file's own encoding.

    Refused (SourceError, one line) for a file the user cannot write, or one without any write
    permission bit (root may write anything: a read-only file is still the user's "do not touch"),
    and for a file that changed since it was read, up to the swap itself (`atomic_write.py`). A
    file that already holds `text` (another hard link to it was fixed first) is left alone. A
    symlink is written through to its target. The write is atomic (a temporary file swapped in)
    where that keeps what the file is: a file with other hard links, or whose owner we cannot give
    to a new file, is rewritten in place instead, so the links and the owner survive. The mode
    always does."""
    from torchnumlint import atomic_write

    target = os.path.realpath(source.path)
    try:
        data = encode(source, text)
    except UnicodeEncodeError as exc:
        raise SourceError(f"not written: the fixed text cannot be encoded as {source.encoding} ({exc.reason})") from None
    try:
        info = os.stat(target)
        if not os.access(target, os.W_OK) or not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            raise SourceError("not written: the file is read-only")
        with open(target, "rb") as handle:
            current = handle.read()
        if current == data:
            return
        if current != source.raw:
            raise atomic_write.ChangedMeanwhile()
        if info.st_nlink > 1 or not atomic_write.replace(target, source.raw, data, info):
            atomic_write.rewrite_in_place(target, source.raw, data)
    except atomic_write.ChangedMeanwhile:
        raise SourceError("not written: the file changed while it was being linted (kept as it is now)") from None
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
