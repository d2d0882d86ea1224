"""Each rule's documentation as a file the editor can open: a diagnostic's `codeDescription`.

torchnumlint has no documentation website; the docs are generated from the rules
(`torchnumlint rule CODE`). The server writes that text once per version into the user's cache
folder (`$XDG_CACHE_HOME`, else `~/.cache`, `/torchnumlint/rules-<version>/TNL103.txt`) and links
each diagnostic to its file. Where the folder cannot be written, diagnostics carry no link; the
hover still shows the docs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Dict

from torchnumlint import __version__


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchnumlint" / f"rules-{__version__}"


def write(docs: Dict[str, str]) -> Dict[str, str]:
    """The URI of each rule's docs file, by code (written where missing or different)."""
    where = folder()
    links: Dict[str, str] = {}
    try:
        where.mkdir(parents=True, exist_ok=True)
        for code, text in docs.items():
            path = where / f"{code}.txt"
            if not (path.is_file() and path.read_text(encoding="utf-8") == text):
                _write_atomic(path, text)
            links[code] = path.as_uri()
    except (OSError, UnicodeDecodeError):
        return {}
    return links


def _write_atomic(path: Path, text: str) -> None:
    """Another server may be writing the same file: each writes whole and renames."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise
