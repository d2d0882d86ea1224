"""A project's file list kept from its last walk, with what would change it.

Why: a pre-commit run over one file still lists the whole project, for its facts; the walk
matches every file against the excludes and the .gitignore chain (diffusers' 370 folders and
2,090 files: 0.45 s of a profiled one-file run). What a walk gives in a folder changes only when
the folder gains, loses or renames an entry (its mtime changes), when a .gitignore or a
pyproject.toml that decides it changes (their stat), or when the excludes its config gives change
(the command line's, `--config`'s); whether a child folder is entered, when the child gains or
loses a marker or a `pyvenv.cfg` (the child's mtime). So each folder is kept in the cache with its
mtime, the files it gave and the children it entered or left out (`discovery.Folder`), with the
stat of the .gitignore and pyproject.toml files of the entered folders and their ancestors and the
excludes of each entered folder's config. The next walk lists again only the folders whose mtime,
or one of whose looked-at children's, changed, and walks a child it meets for the first time:
an editor's save (write a temporary file, rename it over the old one) changes its folder's mtime,
and re-lists that folder and its parent instead of the whole project. A changed .gitignore,
pyproject.toml or excludes walks the whole project again.

A listing taken while one of those was written less than `cache.RACY_SECONDS` ago is not stored
(a later change in the same clock tick would keep the mtime), as the manifest does; nor is one
whose walk met a folder it could not list. Not watched: a config file a pyproject.toml `extend`s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List, Optional

from torchnumlint import cache as caching
from torchnumlint.config import Settings
from torchnumlint.discovery import Folder, Listing, Stamp, _Walker, decided_by


def _stamp(path: str) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def project_files_listed(top: str, settings: Settings, cache: caching.Cache) -> List[str]:
    """`discovery.project_files(top, settings)`, listing again only the folders that changed
    since the listing stored in `cache` (all of them when there is none, or its ignore files,
    configs or excludes changed)."""
    key = caching.digest(caching.package_fingerprint(), "listing", top, os.path.abspath(top))
    stored = cache.get_many("listing", [key]).get(key)
    excludes = _Excludes(settings)
    known: Dict[str, Folder] = {}
    if isinstance(stored, Listing) and _configs_hold(stored, excludes):
        known = {folder.path: folder for folder in stored.folders}
    walk = _Relisting(settings, known)
    walk.visit(top)
    if walk.relisted == 0 and isinstance(stored, Listing) and known:
        return stored.files
    entered = [folder.path for folder in walk.folders if folder.entered]
    watched = [
        (str(path), _stamp(str(path)))
        for folder in entered + [str(p) for p in Path(os.path.abspath(top)).parents]
        for path in decided_by(Path(folder))
    ]
    listing = Listing(walk.files, walk.folders, [(folder, excludes.of(folder)) for folder in entered], watched)
    now = time.time()
    times = [folder.mtime for folder in listing.folders] + [stamp[1] for _, stamp in watched if stamp is not None]
    if not walk.walker.errors and all(now - mtime / 1e9 >= caching.RACY_SECONDS for mtime in times):
        cache.put_many("listing", [(key, listing)])
    return listing.files


class _Excludes:
    """The digest of the excludes a folder's config gives, worked out once per config (a project's
    folders share a handful of configs)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._by_config: Dict[int, str] = {}

    def of(self, folder: str) -> str:
        config = self.settings.config_for(Path(folder))
        if id(config) not in self._by_config:  # configs live as long as the Settings that hands them out
            self._by_config[id(config)] = caching.digest(config.exclude, config.extend_exclude, str(config.root), config.error)
        return self._by_config[id(config)]


def _configs_hold(listing: Listing, excludes: _Excludes) -> bool:
    """Whether every .gitignore and pyproject.toml the stored walk read, and every entered folder's
    excludes, are as they were: what decides every folder's listing beside its entries."""
    if any(_stamp(path) != stamp for path, stamp in listing.watched):
        return False
    return all(excludes.of(folder) == digest for folder, digest in listing.excludes)


class _Relisting:
    """A walk of a project in `discovery.project_files`' order that takes each folder from `known`
    (the stored listing's) while its mtime and those of the children it looked at hold, and lists
    it again (`_Walker.level`) otherwise."""

    def __init__(self, settings: Settings, known: Dict[str, Folder]) -> None:
        self.walker = _Walker(settings)
        self.known = known
        self.files: List[str] = []
        self.folders: List[Folder] = []
        self.relisted = 0  # folders listed again (or for the first time)
        self._mtimes: Dict[str, Optional[int]] = {}

    def _mtime(self, path: str) -> Optional[int]:
        if path not in self._mtimes:
            try:
                self._mtimes[path] = os.stat(path).st_mtime_ns
            except OSError:
                self._mtimes[path] = None
        return self._mtimes[path]

    def _holds(self, path: str) -> bool:
        old = self.known.get(path)
        return old is not None and old.mtime == self._mtime(path)

    def visit(self, folder: str) -> None:
        """Give `folder`'s files and walk its children entered (`folder` spelled as `os.walk`
        spells it from the top, so the files' paths are those of a walk)."""
        path = os.path.abspath(folder)
        old = self.known.get(path)
        if (
            old is not None
            and old.entered
            and self._holds(path)
            and all(self._holds(os.path.join(path, name)) for name in old.kept + old.left)
        ):
            entry = old
        else:
            fresh = self._list(folder, path)
            if fresh is None:
                return
            entry = fresh
        self.folders.append(entry)
        spelled = os.path.normpath(folder)
        self.files += [name if spelled == "." else os.path.join(spelled, name) for name in entry.files]
        for name in entry.left:
            self._left(os.path.join(path, name))
        for name in entry.kept:
            child = os.path.join(folder, name)
            if os.path.islink(child):  # as `os.walk` does: listed among the folders, not followed
                self._left(os.path.join(path, name))
            else:
                self.visit(child)

    def _list(self, folder: str, path: str) -> Optional[Folder]:
        """`folder` listed as `discovery.project_files` lists it; None when it cannot be."""
        self.relisted += 1
        mtime = self._mtime(path)  # before the listing: a change made during it is seen next time
        looked: Dict[Path, bool] = {}
        listed = self.walker.project_folder(folder, looked)
        if listed is None or mtime is None:
            return None
        found, kept = listed
        left = [child.name for child, entered in looked.items() if not entered and child.name not in kept]
        return Folder(path, mtime, True, [os.path.basename(file) for file in found], kept, left)

    def _left(self, path: str) -> None:
        mtime = self._mtime(path)
        if mtime is not None:
            self.folders.append(Folder(path, mtime, False, [], [], []))
