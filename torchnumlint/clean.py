"""`torchnumlint clean`: remove the cache folders below a folder (ruff's `clean`).

Only a folder named `.torchnumlint_cache` whose CACHEDIR.TAG says it is torchnumlint's is removed
(a folder of that name holding anything else is left alone), and symbolic links are never
followed, so a cleanup cannot reach outside the tree it was asked about.
"""

from __future__ import annotations

import os
import shutil
from typing import List, Optional

from torchnumlint.cache import FOLDER_NAME


def _is_our_cache(folder: str) -> bool:
    try:
        with open(os.path.join(folder, "CACHEDIR.TAG"), encoding="utf-8", errors="replace") as handle:
            return "torchnumlint" in handle.read(4096)
    except OSError:
        return False


def remove_caches(top: str, extra: Optional[str] = None) -> List[str]:
    """The cache folders removed: every one below `top`, and `extra` (a `--cache-dir`)."""
    found: List[str] = []
    if extra is not None and os.path.isdir(extra) and not os.path.islink(extra) and _is_our_cache(extra):
        found.append(os.path.normpath(extra))
    for folder, dirnames, _ in os.walk(top):
        if FOLDER_NAME in dirnames:
            dirnames.remove(FOLDER_NAME)
            candidate = os.path.join(folder, FOLDER_NAME)
            if not os.path.islink(candidate) and _is_our_cache(candidate):
                found.append(os.path.normpath(candidate))
    removed = []
    for folder in dict.fromkeys(found):
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.exists(folder):
            removed.append(folder)
    return removed
