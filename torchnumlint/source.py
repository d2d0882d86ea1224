"""Reading sources faithfully and writing them back without ever losing user code.

Bytes -> text keeps what a round trip must keep: the PEP 263 encoding, a UTF-8 BOM, and the
file's own line endings (we decode bytes, never translate newlines). Writes are atomic (a
temporary file in the same folder, then `os.replace`), keep the file mode, go through symlinks
to their target, and are refused if the file changed since it was read.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import tempfile
import tokenize
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


def read_source(path: str) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(path, raw)


def decode(path: str, raw: bytes) -> SourceFile:
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
    data = text.encode(source.encoding)
    return codecs.BOM_UTF8 + data if source.bom else data


def write_source(source: SourceFile, text: str) -> None:
    """Atomically replace the file's contents with `text`, in the file's own encoding."""
    target = os.path.realpath(source.path)
    folder = os.path.dirname(target) or "."
    try:
        data = encode(source, text)
    except UnicodeEncodeError as exc:
        raise SourceError(f"not written: the fixed text cannot be encoded as {source.encoding} ({exc.reason})") from None
    try:
        info = os.stat(target)
        with open(target, "rb") as handle:
            if handle.read() != source.raw:
                raise SourceError("not written: the file changed while it was being linted")
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".torchnumlint-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, stat.S_IMODE(info.st_mode))
            if hasattr(os, "chown"):
                try:
                    os.chown(tmp, info.st_uid, info.st_gid)
                except OSError:
                    pass
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
