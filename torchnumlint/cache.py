"""The on-disk cache: what a file gave last time, found again by what decides it.

Why: a re-run over an unchanged project should cost a look-up per file, not a parse. Entries are
keyed by everything their value depends on (the file's bytes, its path, its settings, the rules'
code) and, when the file's rules read the project index, they record the project's fingerprint
and the questions the rules asked of its facts, which a look-up compares (`runner.py`); a change
to any of the others misses.

- `package_fingerprint()`: torchnumlint's version and the size and mtime of each of the linter's
  source files, so an edited rule invalidates every entry even without a version bump.
- An entry is one file, `<folder>/<kind>/<2 hex>/<rest of key>`: a magic tag, the payload's
  length and its BLAKE2 digest, then the payload as JSON (`plaindata.py`), read back against the
  type its kind stores (`ENTRY_TYPES`). Never a pickle: a cache folder may be shared or checked
  out, and whoever can write an entry must not run code in the next run; an entry whose shape is
  not its kind's type reads as a miss, like a torn or foreign file. It is written to a temporary
  file in the same folder and renamed over (`os.replace`), so a reader sees a whole entry or none.
  Two runs writing the same key both write whole entries of the same value; the last rename wins.
- Per-file project facts (kind `facts`) are many small entries read together (a one-file run
  reads every other file's): they live in one SQLite file per cache folder, `facts.sqlite`
  (`get_many`/`put_many`: one query, one transaction), each row the same checked record as an
  entry file (header, JSON payload), so a torn or foreign row is a miss as well. Each row also
  holds the digest of its value (`canonical_digest`), which the project fingerprint reads alone.
  Measured on diffusers' 2,089 files (`benchmarks/facts_store.py`, CPU time, a loaded machine):
  the rows' bytes come back in 0.03 s (entry files: 0.04 s), their digests alone in 0.01 s, and
  decoding the facts (1.3 s) is what a one-file run still pays, either way.
- Lint results (kind `lint`) live in one SQLite file too, `lint.sqlite`: a warm run reads the
  rows of all of a project's files in one query (`Rows`) instead of opening one file per source
  file (10,229 opens and reads on the shared corpus), and decodes a row only when its file is
  asked for. The workers encode their results (`record_of`); the parent stores them in batches,
  one transaction each (`put_records`), so a run stopped midway keeps what it stored.
- `Manifest`: per project, path -> (stat, digest, whether the file can hold index facts), so a
  warm run trusts a file's digest from its stat instead of reading it. A stat taken within
  `RACY_SECONDS` of the file's mtime is not trusted (a later write in the same clock tick would
  keep the same stat), as git does.

Importing this module loads no libcst: a fully cached run never does.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import gc
import os
import struct
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

try:  # `hashlib.blake2b` itself, without hashlib's load of OpenSSL (`_hashlib`, ~2 ms of each start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover  # an interpreter built without its own blake2
    from hashlib import blake2b

import torchnumlint
from torchnumlint import plaindata
from torchnumlint.findings import Finding

FOLDER_NAME = ".torchnumlint_cache"
_MAGIC = b"TNLC\x00\x02"  # 2: JSON payloads
_HEADER = struct.Struct(">6sQ16s")  # magic, payload length, payload digest
RACY_SECONDS = 2.0

Stat = Tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode
# project fingerprint or None, findings, errors, the questions asked of the facts (`fact_reads.py`),
# these as their own JSON text (`reads_text`): read only when the fingerprint differs, they are most
# of an entry's bytes (kornia: 2.3 KB of an entry's 2.7 on average), and a string costs no decoding
LintEntry = Tuple[Optional[str], List[Finding], List[str], Optional[str]]
Reads = List[Tuple[tuple, str]]
ManifestRecords = Dict[str, Tuple[Stat, str, bool]]


@functools.lru_cache(maxsize=None)
def entry_type(kind: str) -> object:
    """The type an entry of `kind` holds (the index is imported only when facts are read)."""
    if kind == "facts":
        from torchnumlint.index import ProjectIndex

        return ProjectIndex
    if kind == "tables":
        from torchnumlint.project_tables import Tables

        return Tables
    if kind == "listing":
        from torchnumlint.discovery import Listing

        return Listing
    return {"lint": LintEntry, "manifest": ManifestRecords}[kind]


@functools.lru_cache(maxsize=None)
def _codec(kind: str) -> Tuple[Callable[[object], bytes], Callable[[bytes], object]]:
    """How an entry of `kind` is written and read: JSON read against its type (`plaindata`), but
    a project's tables, in sections that are decoded when a run reads them (`project_tables.loads`:
    a one-file run reads few of them)."""
    if kind == "tables":
        from torchnumlint import project_tables

        return project_tables.dumps, project_tables.loads  # type: ignore[return-value]
    expected = entry_type(kind)
    return plaindata.dumps, lambda payload: plaindata.loads(payload, expected)


def digest(*parts: object) -> str:
    """A hex digest of `parts` (bytes as they are, anything else by its repr)."""
    h = blake2b(digest_size=16)
    _feed(h, parts)
    return h.hexdigest()


def _feed(h: "blake2b", parts: Sequence[object]) -> None:
    for part in parts:
        data = part if isinstance(part, bytes) else repr(part).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)


def digester(*prefix: object) -> Callable[..., str]:
    """`digest` of `prefix` followed by the parts it is called with, the prefix hashed once: a key
    per file of the project (2,090 on diffusers) shares the package's fingerprint and its kind."""
    base = blake2b(digest_size=16)
    _feed(base, prefix)

    def digest_of(*parts: object) -> str:
        h = base.copy()
        _feed(h, parts)
        return h.hexdigest()

    return digest_of


@functools.lru_cache(maxsize=None)
def package_fingerprint() -> str:
    """torchnumlint's version and the stat of each of the linter's source files (neither the
    runtime side, `runtime_check/`, nor the reporters, `report/`, decide a finding)."""
    root = os.path.dirname(os.path.abspath(torchnumlint.__file__))
    files = []
    for folder, dirnames, filenames in os.walk(root):  # os.walk: a quarter of Path.rglob's cost (9 ms), paid at each start
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in ("runtime_check", "report")]
        for name in filenames:
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                files.append((name if rel == "." else f"{rel}/{name}", info.st_size, info.st_mtime_ns))
    return digest(torchnumlint.__version__, sorted(files))


def stat_of(path: str) -> Optional[Stat]:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


class Cache:
    """Entries under `folder` (created on the first write, with a CACHEDIR.TAG and a .gitignore)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._ready = False

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.folder, kind, key[:2], key[2:])

    def get_many(self, kind: str, keys: List[str]) -> Dict[str, object]:
        """The values of those of `keys` stored in the kind's pack (read in one query), as `get`
        reads one: absent, torn or mistyped rows are left out."""
        found: Dict[str, object] = {}
        rows = _Pack(self.folder, kind).read(keys)
        with collector_paused():
            for key, data in rows:
                value = self._decode(kind, data)
                if value is not None:
                    found[key] = value
        return found

    def checks(self, kind: str, keys: List[str]) -> Dict[str, str]:
        """key -> `canonical_digest` of its value, for those of `keys` in the kind's pack: what
        the values are known by without reading them (a project's fingerprint is made of the
        digests of its files' facts)."""
        return _Pack(self.folder, kind).checks(keys)

    def put_many(self, kind: str, items: Sequence[Tuple[str, object]]) -> Dict[str, str]:
        """Store `items` in the kind's pack, in one transaction (silently not when it cannot be
        written); key -> the digest of each one's payload, as `checks` gives it."""
        write = _codec(kind)[0]
        rows = [(key, _record(write(value)), canonical_digest(value)) for key, value in items]
        self.put_encoded(kind, rows)
        return {key: check for key, _, check in rows}

    def put_encoded(self, kind: str, rows: Sequence[Tuple[str, bytes, str]]) -> None:
        """Store (key, record, check) rows that `encode` made (in a worker: the encoding is most
        of a store's cost) in the kind's pack, in one transaction."""
        if rows:
            try:
                self._prepare()
            except OSError:
                return
            _Pack(self.folder, kind).write([(key, record, bytes.fromhex(check)) for key, record, check in rows])

    def put_records(self, kind: str, rows: Sequence[Tuple[str, bytes]]) -> None:
        """Store (key, `record_of` a value) rows in the kind's pack, in one transaction (silently
        not when it cannot be written); a row's check is its payload's digest, from its header."""
        if rows:
            try:
                self._prepare()
            except OSError:
                return
            _Pack(self.folder, kind).write([(key, record, record[_HEADER.size - 16 : _HEADER.size]) for key, record in rows])

    def records(self, kind: str, keys: List[str]) -> Dict[str, bytes]:
        """key -> the stored record, undecoded, for those of `keys` in the kind's pack (one query)."""
        return dict(_Pack(self.folder, kind).read(keys))

    def get(self, kind: str, key: str) -> Optional[object]:
        """The value stored under `key`, or None when absent, torn, unreadable or not of the type
        its kind stores."""
        try:
            with open(self._path(kind, key), "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        return self._decode(kind, data)

    @staticmethod
    def decode(kind: str, data: bytes) -> Optional[object]:
        """The value of a record, or None when it is torn, foreign or not of the kind's type."""
        return Cache._decode(kind, data)

    @staticmethod
    def _decode(kind: str, data: bytes) -> Optional[object]:
        if len(data) < _HEADER.size:
            return None
        magic, length, check = _HEADER.unpack_from(data)
        payload = data[_HEADER.size :]
        if magic != _MAGIC or length != len(payload) or blake2b(payload, digest_size=16).digest() != check:
            return None
        try:
            return _codec(kind)[1](payload)
        except plaindata.Mismatch:
            return None

    def put(self, kind: str, key: str, value: object) -> None:
        """Store `value` atomically; a cache that cannot be written is silently not written."""
        import tempfile  # a run that writes nothing (a warm one) does not load it

        data = _record(_codec(kind)[0](value))
        target = self._path(kind, key)
        try:
            self._prepare()
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, target)
            except BaseException:
                _unlink(tmp)
                raise
        except OSError:
            pass

    def _prepare(self) -> None:
        if self._ready:
            return
        os.makedirs(self.folder, exist_ok=True)
        for name, text in (
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# torchnumlint's cache\n"),
            (".gitignore", "# created by torchnumlint\n*\n"),
        ):
            path = os.path.join(self.folder, name)
            if not os.path.exists(path):
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text)
        self._ready = True


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off while a pack's values are built, as it was after.

    Why: decoding a project's facts builds some 200,000 containers (diffusers), and every 700
    allocations the collector walks the young ones, every tenth time the older ones too: half of
    the decode's time went to walks that can free nothing, since decoded JSON holds no cycles
    (diffusers' 2,089 rows, measured in one process, three times, load 3: 1.55-1.89 s with the
    collector, 0.76-0.90 s without)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def encode(value: object) -> Tuple[bytes, str]:
    """A pack row's record (header and JSON payload) of `value`, and its `canonical_digest`."""
    return _record(plaindata.dumps(value)), canonical_digest(value)


def canonical_digest(value: object) -> str:
    """A digest of `value` that two processes agree on: sets are taken in sorted order (the
    payload keeps their iteration order, which string hashing makes differ from run to run)."""
    return digest(_canonical(value))


def _canonical(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (str, int, float, bool, bytes, type(None))):
        return value
    if plaindata.is_record(type(value)):
        return [type(value).__name__] + [_canonical(getattr(value, name)) for name in plaindata.record_fields(type(value))]
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(item) for item in value), key=repr)
    if isinstance(value, (tuple, list)):
        return [_canonical(item) for item in value]
    if isinstance(value, dict):
        return [[_canonical(key), _canonical(item)] for key, item in value.items()]
    custom = plaindata._custom_codecs().get(type(value))  # the one other shape the cache stores
    if custom is None:
        raise TypeError(f"the cache cannot store a {type(value).__name__}")
    return [type(value).__name__, _canonical(custom[0](value))]


def reads_text(reads: Optional[Reads]) -> Optional[str]:
    """The questions a result asked of the facts, as a lint entry holds them."""
    return None if reads is None else plaindata.dumps(reads).decode("utf-8")


def reads_of(text: str) -> Optional[Reads]:
    """The questions a lint entry holds (`reads_text`); None when they are not of their type."""
    try:
        return plaindata.loads(text.encode("utf-8", "surrogatepass"), Reads)
    except plaindata.Mismatch:
        return None


def record_of(value: object) -> bytes:
    """A pack row's record of `value` (header and JSON payload), for `Cache.put_records`."""
    return _record(plaindata.dumps(value))


class Rows:
    """One kind's records for a project, read from its pack in one query for the keys `want`ed,
    decoded when `get` asks (a key asked for only later costs one query of its own). Records of
    the same bytes are decoded once (most files' results are the same: no finding, no error), so
    a value `get` gives may be another key's too: it is read, never changed."""

    def __init__(self, cache: Cache, kind: str) -> None:
        self.cache = cache
        self.kind = kind
        self._read: Dict[str, Optional[bytes]] = {}
        self._values: Dict[bytes, Optional[object]] = {}

    def want(self, keys: Sequence[str]) -> None:
        """Read the records of those of `keys` not read yet, in one query."""
        new = [key for key in dict.fromkeys(keys) if key not in self._read]
        if new:
            found = self.cache.records(self.kind, new)
            self._read.update((key, found.get(key)) for key in new)

    def get(self, key: str) -> Optional[object]:
        """The value stored under `key`, or None when absent, torn or not of the kind's type."""
        if key not in self._read:
            self.want([key])
        data = self._read[key]
        if data is None:
            return None
        if data not in self._values:
            self._values[data] = self.cache.decode(self.kind, data)
        return self._values[data]


def _record(payload: bytes) -> bytes:
    """A payload behind its header: magic, length, digest."""
    return _HEADER.pack(_MAGIC, len(payload), blake2b(payload, digest_size=16).digest()) + payload


class _Pack:
    """The SQLite file holding one kind's entries: key -> record. Every failure (a locked,
    corrupt, foreign or read-only file) reads as no rows and writes nothing: a cache never stops
    a run. sqlite3 is imported only here."""

    _BATCH = 500  # keys per query (SQLite's limit on parameters is 999 in old builds)
    _TABLE = "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, checked BLOB NOT NULL, data BLOB NOT NULL)"

    def __init__(self, folder: str, kind: str) -> None:
        self.path = os.path.join(folder, f"{kind}.sqlite")

    def _connect(self):
        import sqlite3

        connection = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        connection.execute(self._TABLE)
        return connection

    def read(self, keys: List[str]) -> List[Tuple[str, bytes]]:
        return self._select("data", keys)

    def checks(self, keys: List[str]) -> Dict[str, str]:
        """key -> the canonical digest (hex) of the row's value."""
        return {key: value.hex() for key, value in self._select("checked", keys) if len(value) == 16}

    def _select(self, column: str, keys: List[str]) -> List[Tuple[str, bytes]]:
        import sqlite3

        if not keys or not os.path.exists(self.path):
            return []
        try:
            connection = self._connect()
            try:
                rows: List[Tuple[str, bytes]] = []
                for at in range(0, len(keys), self._BATCH):
                    batch = keys[at : at + self._BATCH]
                    marks = ",".join("?" * len(batch))
                    query = f"SELECT key, {column} FROM entries WHERE key IN ({marks})"
                    rows += connection.execute(query, batch).fetchall()
                return [(key, bytes(value)) for key, value in rows if isinstance(key, str) and isinstance(value, bytes)]
            finally:
                connection.close()
        except sqlite3.Error:
            return []

    def write(self, rows: List[Tuple[str, bytes, bytes]]) -> None:
        import sqlite3

        try:
            connection = self._connect()
            try:
                with connection:  # one transaction: a reader sees all of it or none
                    connection.execute("BEGIN IMMEDIATE")
                    connection.executemany(
                        "INSERT OR REPLACE INTO entries (key, checked, data) VALUES (?, ?, ?)",
                        [(key, check, data) for key, data, check in rows],
                    )
            finally:
                connection.close()
        except sqlite3.Error:
            pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class Manifest:
    """path -> (stat, digest of the bytes, whether the text can hold index facts), for one
    project, stored as one entry keyed by the project and the package."""

    Record = Tuple[Stat, str, bool]

    def __init__(self, cache: Cache, project: str) -> None:
        self.cache = cache
        self.key = digest(package_fingerprint(), "manifest", project)
        stored = cache.get("manifest", self.key)
        self.records: Dict[str, Manifest.Record] = stored if isinstance(stored, dict) else {}
        self.changed = False

    def lookup(self, path: str, stat: Optional[Stat]) -> Optional[Record]:
        """The record of `path` if its stat is still the one recorded."""
        record = self.records.get(path)
        return record if record is not None and stat is not None and record[0] == stat else None

    def record(self, path: str, stat: Optional[Stat], raw_digest: str, matters: bool) -> None:
        if stat is None or time.time() - stat[1] / 1e9 < RACY_SECONDS:
            if path in self.records:  # never trust a stat that a write in the same tick would keep
                del self.records[path]
                self.changed = True
            return
        record = (stat, raw_digest, matters)
        if self.records.get(path) != record:
            self.records[path] = record
            self.changed = True

    def save(self) -> None:
        if self.changed:
            self.cache.put("manifest", self.key, self.records)
            self.changed = False
