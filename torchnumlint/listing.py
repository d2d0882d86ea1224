"""A project's file list kept from its last walk, with what would change it.

Why: a pre-commit run over one file still lists the whole project, for its facts; the walk
matches every file against the excludes and the .gitignore chain (diffusers' 370 folders and
2,090 files: 0.45 s of a profiled one-file run). What a walk gives changes only when a folder it
looked at gains, loses or renames an entry (the folder's mtime changes), when a .gitignore or a
pyproject.toml that decides it changes (their stat), or when the excludes a folder's config gives
change (the command line's, `--config`'s): so the list is stored in the cache with the mtime of
every folder the walk entered or left out for what it holds (`discovery.project_files`'s
`looked`), the stat of those folders' and their ancestors' .gitignore and pyproject.toml files, and
the excludes of each entered folder's config, and reused while all of them are as they were.
A listing taken while one of those was written less than `cache.RACY_SECONDS` ago is not stored
(a later change in the same clock tick would keep the mtime), as the manifest does. Not watched:
a config file a pyproject.toml `extend`s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List

from torchnumlint import cache as caching
from torchnumlint.config import Settings
from torchnumlint.discovery import Listing, Stamp, decided_by, project_files


def _stamp(path: str) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def _excludes(settings: Settings, folder: str) -> str:
    config = settings.config_for(Path(folder))
    return caching.digest(config.exclude, config.extend_exclude, str(config.root), config.error)


def project_files_listed(top: str, settings: Settings, cache: caching.Cache) -> List[str]:
    """`discovery.project_files(top, settings)`, from the cache while what decides it holds."""
    key = caching.digest(caching.package_fingerprint(), "listing", top, os.path.abspath(top))
    stored = cache.get_many("listing", [key]).get(key)
    if isinstance(stored, Listing) and _holds(stored, settings):
        return stored.files
    looked: Dict[Path, bool] = {}
    files = list(project_files(top, settings, looked))
    listing = Listing(files)
    ancestors = list(Path(os.path.abspath(top)).parents)
    for folder, entered in looked.items():
        try:
            listing.folders.append((str(folder), os.stat(folder).st_mtime_ns))
        except OSError:
            return files  # gone while walked: nothing to keep
        if entered:
            listing.excludes.append((str(folder), _excludes(settings, str(folder))))
    for folder in [folder for folder, entered in looked.items() if entered] + ancestors:
        listing.watched += [(str(path), _stamp(str(path))) for path in decided_by(folder)]
    now = time.time()
    times = [mtime for _, mtime in listing.folders] + [stamp[1] for _, stamp in listing.watched if stamp is not None]
    if all(now - mtime / 1e9 >= caching.RACY_SECONDS for mtime in times):
        cache.put_many("listing", [(key, listing)])
    return files


def _holds(listing: Listing, settings: Settings) -> bool:
    """Whether every folder, file and config the stored walk depended on is as it was."""
    for folder, mtime in listing.folders:
        try:
            if os.stat(folder).st_mtime_ns != mtime:
                return False
        except OSError:
            return False
    if any(_stamp(path) != stamp for path, stamp in listing.watched):
        return False
    return all(_excludes(settings, folder) == excludes for folder, excludes in listing.excludes)
