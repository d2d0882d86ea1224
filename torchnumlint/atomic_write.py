"""Putting new bytes in place of a file's old ones without losing an edit saved meanwhile.

Why: `--fix` reads a file, lints it for a while, then writes the fixed text. An editor may save
the file in between, and a save that lands after the last "has it changed" check would be
overwritten. So the swap itself is checked:

- Every write holds an advisory lock (`flock`) on the file, so two torchnumlint runs fixing the
  same file take turns, and each compares the file's bytes and inode with what it read just before
  the swap.
- Where Linux offers it (`renameat2(RENAME_EXCHANGE)`), the new file and the old one trade places
  atomically, and the file displaced is compared with what was read: if an edit landed in it after
  the check, the two trade back, so the user's file is exactly as they saved it, and the caller
  reports the file as changed. Elsewhere the new file is moved over (`os.replace`) and the old
  inode, still open, is compared afterwards; an edit found there is written back.
- Temporary files are named `.torchnumlint-<pid>-<random>.tmp`; one whose process is gone (a run
  killed mid-write) is removed the next time a file of its folder is written.

`before_swap` is called (with the target's path) between the last check and the swap: the one
place a test can save an edit at the worst moment, deterministically. A file rewritten in place
(one with other hard links, whose inode must stay) has no swap to undo: there the check and the
write are as close as two calls, under the lock.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
from typing import Callable, Iterator, Optional, Set

PREFIX = ".torchnumlint-"
SUFFIX = ".tmp"
_TEMP = re.compile(re.escape(PREFIX) + r"(\d+)-[^/]*" + re.escape(SUFFIX) + "$")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100

before_swap: Callable[[str], None] = lambda path: None  # noqa: E731 (a test's hook, see above)
_cleaned: Set[str] = set()


class ChangedMeanwhile(Exception):
    """The file on disk is no longer the one read: nothing of it was overwritten."""


def replace(target: str, expected: bytes, data: bytes, info: os.stat_result) -> bool:
    """Put `data` in place of `target`, whose bytes were `expected` when read, keeping its mode and
    owner. False (nothing changed) where the owner cannot be given to a new file; raises
    `ChangedMeanwhile` when the file changed, leaving the changed file as it is."""
    folder = os.path.dirname(target) or "."
    clean_dead_temporaries(folder)
    with _locked(target) as handle:
        _check(target, handle, expected)
        tmp = _temporary(folder, data, info)
        if tmp is None:
            return False
        try:
            _check(target, handle, expected)
            before_swap(target)
            if _exchange(tmp, target):
                if _read(tmp) != expected:  # an edit landed between the check and the swap
                    _exchange(tmp, target)
                    raise ChangedMeanwhile()
            else:
                os.replace(tmp, target)
                kept = _read_handle(handle)
                if kept != expected:  # written to the old inode meanwhile: put it back
                    restored = _temporary(folder, kept, info)
                    if restored is not None:
                        os.replace(restored, target)
                    raise ChangedMeanwhile()
        finally:
            _unlink(tmp)
    return True


def rewrite_in_place(target: str, expected: bytes, data: bytes) -> None:
    """Overwrite the file itself (its inode: hard links, owner and mode stay), then cut it to
    length, under the lock and after the last comparison."""
    with _locked(target, "r+b") as handle:
        if _read_handle(handle) == data:
            return  # another name of this inode (a hard link) was fixed meanwhile, by another worker
        _check(target, handle, expected)
        handle.seek(0)
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def clean_dead_temporaries(folder: str) -> None:
    """Remove the temporary files of torchnumlint runs that are no longer alive (once a folder
    per process)."""
    if folder in _cleaned:
        return
    _cleaned.add(folder)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _TEMP.match(name)
        if match and not _alive(int(match.group(1))):
            _unlink(os.path.join(folder, name))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # someone else's process: alive
    return True


@contextlib.contextmanager
def _locked(target: str, mode: str = "rb") -> Iterator:
    with open(target, mode) as handle:
        try:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except (ImportError, OSError):  # no flock here (Windows, some network file systems)
            pass
        yield handle


def _check(target: str, handle, expected: bytes) -> None:
    """The path still names the inode read, and its bytes are still `expected`."""
    try:
        same = os.stat(target).st_ino == os.fstat(handle.fileno()).st_ino
    except OSError:
        same = False
    if not same or _read_handle(handle) != expected:
        raise ChangedMeanwhile()


def _read_handle(handle) -> bytes:
    handle.seek(0)
    return handle.read()


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _temporary(folder: str, data: bytes, info: os.stat_result) -> Optional[str]:
    """A new file beside the target holding `data`, with the target's mode and owner; None when
    the owner cannot be given to it."""
    import tempfile  # with shutil and random behind it: no cost of a run that writes nothing

    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f"{PREFIX}{os.getpid()}-", suffix=SUFFIX)
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
                _unlink(tmp)
                return None
        return tmp
    except BaseException:
        _unlink(tmp)
        raise


def _owner(path: str) -> tuple:
    info = os.stat(path)
    return info.st_uid, info.st_gid


@functools.lru_cache(maxsize=None)
def _renameat2() -> Optional[Callable[..., int]]:
    """libc's renameat2, where there is one (glibc 2.28+). ctypes is imported here: only a write
    needs it, and it costs a start-up that writes nothing a few milliseconds."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        function = getattr(ctypes.CDLL(name, use_errno=True), "renameat2")
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


def _exchange(a: str, b: str) -> bool:
    """Swap the files at `a` and `b` atomically; False where the system cannot (nothing moved)."""
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    import ctypes  # loaded by `_renameat2`

    error = ctypes.get_errno()
    if error in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not on this file system or kernel
        return False
    raise OSError(error, os.strerror(error), b)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
