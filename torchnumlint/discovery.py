"""Paths -> the Python files to lint.

Folders are walked for `.py`/`.pyi`, skipping hidden folders, virtualenvs, caches and build output,
the `exclude` globs and what `.gitignore` files ignore. A file named on the command line (as
pre-commit does) is linted unless the user's own `exclude`/`extend-exclude` patterns name it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import pathspec

from torchnumlint.config import Config

DEFAULT_EXCLUDE = [
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".eggs", "*.egg-info", "__pycache__",
    "build", "dist", "node_modules", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    "_build", "buck-out", "__pypackages__", ".ipynb_checkpoints",
]
SUFFIXES = (".py", ".pyi")


class _GitIgnore:
    """The .gitignore files that apply to a folder: its own and its ancestors' up to the repo root."""

    def __init__(self) -> None:
        self._specs: Dict[Path, Optional[pathspec.PathSpec]] = {}

    def _spec(self, folder: Path) -> Optional[pathspec.PathSpec]:
        if folder not in self._specs:
            spec = None
            gitignore = folder / ".gitignore"
            if gitignore.is_file():
                try:
                    lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
                    spec = pathspec.GitIgnoreSpec.from_lines(lines)
                except OSError:
                    spec = None
            self._specs[folder] = spec
        return self._specs[folder]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        folder = path.parent
        while True:
            spec = self._spec(folder)
            if spec is not None:
                rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
            if (folder / ".git").exists() or folder.parent == folder:
                return False
            folder = folder.parent


def _exclude_spec(config: Config, defaults: bool = True) -> pathspec.PathSpec:
    base = config.exclude if config.exclude is not None else (DEFAULT_EXCLUDE if defaults else [])
    return pathspec.GitIgnoreSpec.from_lines(base + config.extend_exclude)


def _excluded(spec: pathspec.PathSpec, path: Path, root: Path, is_dir: bool) -> bool:
    suffix = "/" if is_dir else ""
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = path.name
    return spec.match_file(rel + suffix) or spec.match_file(path.name + suffix)


def discover(paths: Iterable[str], config: Config) -> Tuple[List[str], List[str]]:
    """(files to lint, in a stable order; errors for paths that do not exist)."""
    spec = _exclude_spec(config)
    named_spec = _exclude_spec(config, defaults=False)  # files named explicitly: the user's patterns only
    gitignore = _GitIgnore()
    root = config.root.resolve()
    files: List[str] = []
    errors: List[str] = []
    seen = set()

    def add(path: str) -> None:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            files.append(path)

    for given in paths:
        path = Path(given)
        if not path.exists():
            errors.append(f"{given}: no such file or directory")
            continue
        absolute = path.resolve()
        if path.is_file():
            if not _excluded(named_spec, absolute, root, False):
                add(given)
            continue
        for folder, dirnames, filenames in os.walk(given):
            here = Path(folder).resolve()
            keep = []
            for name in sorted(dirnames):
                child = here / name
                if name.startswith(".") or _excluded(spec, child, root, True) or gitignore.ignored(child, True):
                    continue
                if (child / "pyvenv.cfg").exists():  # a virtualenv under any name
                    continue
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                if not name.endswith(SUFFIXES):
                    continue
                child = here / name
                if _excluded(spec, child, root, False) or gitignore.ignored(child, False):
                    continue
                add(os.path.normpath(os.path.join(folder, name)))
    return files, errors
