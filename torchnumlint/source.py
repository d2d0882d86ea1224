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
import tempfile
import tokenize

from torchnumlint import notebook
from torchnumlint.sourcefile import SourceError, SourceFile

__all__ = ["SourceError", "SourceFile", "read_source", "decode", "encode", "write_source"]


def read_source(path: str) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(path, raw)


def decode(path: str, raw: bytes) -> SourceFile:
    if path.endswith(".ipynb"):  # its code cells as one module (notebook.py)
        return notebook.decode(path, raw)
    if b"\x00" in raw:
        raise SourceError("cannot parse: source contains a NUL byte")
    bom = raw.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            raise SourceError(f"cannot parse: {exc}") from None  # unknown encoding, BOM vs cookie
        encoding = "utf-8"  # undecodable bytes in the first lines: the decode below names them
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = raw[len(codecs.BOM_UTF8):] if bom else raw
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(f"cannot decode as {encoding}: byte 0x{body[exc.start]:02x} at offset {exc.start}") from None
    except LookupError:
        raise SourceError(f"cannot decode: unknown encoding {encoding!r}") from None
    return SourceFile(path, raw, text, encoding, bom)


def encode(source: SourceFile, text: str) -> bytes:
    if isinstance(source, notebook.NotebookSource):  # the fixed cells spliced into its JSON
        return notebook.encode(source, text)
    data = text.encode(source.encoding)
    return codecs.BOM_UTF8 + data if source.bom else data


def write_source(source: SourceFile, text: str) -> None:
    """Replace the file's contents with `text`, in the file's own encoding.

    Refused (SourceError, one line) for a file the user cannot write, or one without any write
    permission bit (root may write anything: a read-only file is still the user's "do not touch"),
    and for a file that changed since it was read. A symlink is written through to its target.
    The write is atomic (a temporary file, then `os.replace`) where that keeps what the file is:
    a file with other hard links, or whose owner we cannot give to a new file, is rewritten in
    place instead, so the links and the owner survive. The mode always does."""
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
            if handle.read() != source.raw:
                raise SourceError("not written: the file changed while it was being linted")
        if info.st_nlink > 1 or not _replace_atomically(target, data, info):
            _rewrite_in_place(target, data)
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None


def _replace_atomically(target: str, data: bytes, info: os.stat_result) -> bool:
    """Write `data` to a temporary file beside `target`, with its mode and owner, then move it
    over `target`. False (nothing changed) where the owner cannot be kept."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target) or ".", prefix=".torchnumlint-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        if hasattr(os, "chown") and (info.st_uid, info.st_gid) != _owner(tmp):
            try:
                os.chown(tmp, info.st_uid, info.st_gid)
            except OSError:
                os.unlink(tmp)
                return False
        os.replace(tmp, target)
        return True
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _owner(path: str) -> tuple:
    info = os.stat(path)
    return info.st_uid, info.st_gid


def _rewrite_in_place(target: str, data: bytes) -> None:
    """Overwrite the file itself (its inode: links, owner and mode stay), then cut it to length."""
    with open(target, "r+b") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
