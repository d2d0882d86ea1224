"""Paths -> the Python files to lint, and each file's project.

Folders are walked for `.py`/`.pyi` and Jupyter notebooks (`.ipynb`, linted through
`notebook.py`), skipping hidden folders, virtualenvs, caches and build output,
the `exclude` globs and what `.gitignore` files ignore. Exclude globs come from the config of the
folder being walked and are relative to that config's folder. A file named on the command line is
linted whatever excludes or ignores it (ruff's convention: naming it is asking for it), unless
`force_exclude` (pre-commit's hook, which names every staged file) applies them to it too.

A file's project is the nearest folder above it holding pyproject.toml, setup.py, setup.cfg or .git;
`project_files` lists a project's files by the same rules, leaving out nested projects (a folder
below with a marker of its own), so facts that cross files come from the project, not from
whichever of its files were passed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from torchnumlint.config import Config, Settings
from torchnumlint.configfiles import SUFFIXES as CONFIG_SUFFIXES

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.ignore_patterns import Patterns

DEFAULT_EXCLUDE = [
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    ".eggs",
    "*.egg-info",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "_build",
    "buck-out",
    "__pypackages__",
    ".ipynb_checkpoints",
]
SUFFIXES = (".py", ".pyi", ".ipynb")
_PROJECT_SUFFIXES = SUFFIXES + CONFIG_SUFFIXES  # what a project's facts are read from


class _GitIgnore:
    """The .gitignore files that apply to a folder: its own and its ancestors' up to the repo root.

    Each folder's chain of (folder, spec) for the ancestors that have a .gitignore is worked out
    once, so a file costs one match per .gitignore above it, not a walk up its folders."""

    def __init__(self) -> None:
        self._specs: Dict[Path, Optional[Patterns]] = {}
        self._chains: Dict[Path, Tuple[Tuple[str, Patterns], ...]] = {}

    def _spec(self, folder: Path) -> Optional[Patterns]:
        if folder not in self._specs:
            spec = None
            gitignore = folder / ".gitignore"
            if os.path.isfile(gitignore):
                try:
                    lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
                    spec = _gitignore_spec(lines)
                except OSError:
                    spec = None
            self._specs[folder] = spec
        return self._specs[folder]

    def _chain(self, folder: Path) -> Tuple[Tuple[str, Patterns], ...]:
        """(folder as a posix string, its spec) for `folder` and its ancestors up to the repo root
        (the first holding .git) or the file system's root, nearest first."""
        if folder not in self._chains:
            spec = self._spec(folder)
            own = ((folder.as_posix(), spec),) if spec is not None else ()
            last = os.path.exists(folder / ".git") or folder.parent == folder
            self._chains[folder] = own + (() if last else self._chain(folder.parent))
        return self._chains[folder]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        return self.ignored_in(self._chain(path.parent), path.as_posix(), is_dir)

    def chain(self, folder: Path) -> Tuple[Tuple[str, Patterns], ...]:
        """The (folder, spec) chain of `folder`: what `ignored_in` matches its entries against."""
        return self._chain(folder)

    @staticmethod
    def ignored_in(chain: Tuple[Tuple[str, Patterns], ...], target: str, is_dir: bool) -> bool:
        """Whether `target` (a posix path in the folder `chain` belongs to) is ignored by it."""
        for base, spec in chain:
            rel = target[len(base) :].lstrip("/") + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
        return False


PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def is_project_root(folder: Path) -> bool:
    """Whether `folder` holds a project marker (.git may be a file: a worktree or submodule); a
    folder the user cannot search holds none."""
    return any(os.path.exists(folder / marker) for marker in PROJECT_MARKERS)


def project_root(folder: Path, cache: Dict[Path, Optional[Path]]) -> Optional[Path]:
    """The nearest project root at or above `folder` (an absolute path); None when there is none."""
    if folder not in cache:
        if is_project_root(folder):
            cache[folder] = folder
        else:
            cache[folder] = None if folder.parent == folder else project_root(folder.parent, cache)
    return cache[folder]


class _Walker:
    """Walks folders by the rules above, compiling each config's patterns and reading each
    .gitignore once per walker."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gitignore = _GitIgnore()
        self._specs: Dict[int, Patterns] = {}
        self.errors: List[str] = []  # folders that could not be read, one line each

    def spec(self, config: Config) -> Patterns:
        """`config`'s exclude patterns."""
        key = id(config)  # configs live as long as the Settings that hands them out
        if key not in self._specs:
            base = config.exclude if config.exclude is not None else DEFAULT_EXCLUDE
            self._specs[key] = _gitignore_spec(base + config.extend_exclude)
        return self._specs[key]

    def named_file_excluded(self, path: Path) -> bool:
        """Whether the excludes or a .gitignore leave out `path` or a folder above it (asked of
        a file named explicitly only under `force_exclude`)."""
        config = self.settings.config_for(path.parent)
        return _excluded(self.spec(config), path.as_posix(), config.root.as_posix(), False) or self.gitignore.ignored(path, False)

    def walk(
        self,
        top: str,
        into_projects: bool,
        suffixes: Tuple[str, ...] = SUFFIXES,
        configs: Optional[List[str]] = None,
    ) -> Iterator[str]:
        """The Python files (or those ending in `suffixes`) under `top`, paths joined onto `top` as
        given; below `top`, folders that are project roots are entered only with `into_projects`.
        The config files met on the way (`CONFIG_SUFFIXES`) are added to `configs` when given: the
        same walk finds the files a run lints and those its project facts read. A folder that cannot be
        listed (no permission) is named in `errors` and the walk goes on."""
        for folder, dirnames, filenames in os.walk(top, onerror=self._unreadable):
            yield from self.level(folder, dirnames, filenames, into_projects, suffixes, configs)

    def level(
        self,
        folder: str,
        dirnames: List[str],
        filenames: List[str],
        into_projects: bool,
        suffixes: Tuple[str, ...] = SUFFIXES,
        configs: Optional[List[str]] = None,
        looked: Optional[Dict[Path, bool]] = None,
    ) -> List[str]:
        """One folder of `walk` (an `os.walk` step): the files it gives, `dirnames` cut in place
        to the children to enter. Apart so that `listing.py` can list one folder again alone.
        `looked`, when given, gets the folder (True: entered) and each child whose contents decide
        whether it is entered (False unless entered later: a marker, a virtualenv, a .gitignore)."""
        # Entries are matched as plain strings (a folder's posix path + "/" + name): one `Path`
        # per folder, none per file (`Path` parses were most of a warm run's walk).
        here = Path(os.path.abspath(folder))
        if looked is not None:
            looked[here] = True
        config = self.settings.config_for(here)
        spec = self.spec(config)
        chain = self.gitignore.chain(here)
        base, root = here.as_posix().rstrip("/") + "/", config.root.as_posix()
        keep = []
        for name in sorted(dirnames):
            if name.startswith(".") or _excluded(spec, base + name, root, True):
                continue
            child = here / name
            if looked is not None:
                looked.setdefault(child, False)
            if self.gitignore.ignored_in(chain, base + name, True) or os.path.exists(child / "pyvenv.cfg"):  # a virtualenv
                continue
            if into_projects or not is_project_root(child):
                keep.append(name)
        dirnames[:] = keep
        spelled = os.path.normpath(folder)
        found = []
        for name in sorted(filenames):
            wanted = name.endswith(suffixes)
            if not (wanted or (configs is not None and name.endswith(CONFIG_SUFFIXES))):
                continue
            if _excluded(spec, base + name, root, False) or self.gitignore.ignored_in(chain, base + name, False):
                continue
            path = name if spelled == "." else os.path.join(spelled, name)
            if wanted:
                found.append(path)
            elif configs is not None:
                configs.append(path)
        return found

    def project_folder(self, folder: str, looked: Dict[Path, bool]) -> Optional[Tuple[List[str], List[str]]]:
        """One folder of `project_files`' walk alone: (the files it gives, the children it
        enters); None when it cannot be listed (named in `errors`). `looked`: see `level`."""
        step = next(os.walk(folder, onerror=self._unreadable), None)
        if step is None:
            return None
        _, dirnames, filenames = step
        return self.level(folder, dirnames, filenames, False, _PROJECT_SUFFIXES, None, looked), dirnames

    def _unreadable(self, error: OSError) -> None:
        self.errors.append(f"{error.filename}: cannot read folder: {error.strerror or error}")


def _gitignore_spec(lines: List[str]) -> Patterns:
    """Patterns read as git reads a .gitignore. pathspec is imported here, on the first folder
    walked or file matched: a run over files that need no project walk (a pre-commit hook on a
    file that reads no project facts) never pays its import, about a third of start-up."""
    import pathspec

    from torchnumlint.ignore_patterns import Patterns

    return Patterns(pathspec.GitIgnoreSpec.from_lines(lines))


def _excluded(spec: Patterns, path: str, root: str, is_dir: bool) -> bool:
    """Whether the exclude `spec` matches `path` (absolute, posix) relative to the config's `root`
    (its name alone when outside it), or its name alone."""
    suffix = "/" if is_dir else ""
    name = path[path.rfind("/") + 1 :]
    inside = root.rstrip("/") + "/"
    rel = path[len(inside) :] if path.startswith(inside) else name
    return spec.match_file(rel + suffix) or spec.match_file(name + suffix)


def discover(
    paths: Iterable[str], settings: Settings, force_exclude: bool = False, configs: Optional[List[str]] = None
) -> Tuple[List[str], List[str]]:
    """(files to lint, in a stable order; errors for paths that do not exist and folders that
    cannot be read). A file named in `paths` is linted even where excluded or ignored, unless
    `force_exclude`; whatever it is (a FIFO, a file the user cannot read), reading it says what
    is wrong with it. The config files of the folders walked go to `configs` when given."""
    walker = _Walker(settings)
    files: List[str] = []
    errors: List[str] = []
    seen = set()
    real_folders: Dict[str, str] = {}
    for given in paths:
        try:
            os.stat(given)
        except OSError as exc:
            errors.append(f"{given}: {'no such file or directory' if isinstance(exc, FileNotFoundError) else exc.strerror}")
            continue
        if not os.path.isdir(given):
            excluded = force_exclude and walker.named_file_excluded(Path(os.path.abspath(given)))
            found: Iterable[str] = [] if excluded else [given]
        else:
            found = walker.walk(given, into_projects=True, configs=configs)
        for file in found:
            key = _real_path(file, real_folders)
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files, errors + walker.errors


def _real_path(path: str, real_folders: Dict[str, str]) -> str:
    """`os.path.realpath(path)`, resolving each folder once (`real_folders`): a path that is no
    link itself is its folder's real path and its name, which costs one `lstat`, where `realpath`
    costs one per component of the path."""
    if os.path.islink(path):
        return os.path.realpath(path)
    folder, name = os.path.split(path)
    real = real_folders.get(folder)
    if real is None:
        real = real_folders[folder] = os.path.realpath(folder)
    return os.path.join(real, name)


def project_files(root: str, settings: Settings) -> Iterator[str]:
    """Every file of the project at `root` that its facts come from (lazily), leaving out nested
    projects: the Python files and notebooks, and the config files that can name classes
    (`configfiles.py`: Hydra's `_target_`s), which are read, never linted."""
    return _Walker(settings).walk(root, into_projects=False, suffixes=_PROJECT_SUFFIXES)


Stamp = Optional[Tuple[int, int, int]]  # size, mtime_ns, inode; None: absent


class Folder(NamedTuple):
    """One folder as a walk left it, kept by `listing.py` so that a later walk lists again only
    the folders whose entries changed (their mtime did) and reuses what it knew of the others."""

    path: str  # absolute
    mtime: int  # st_mtime_ns
    entered: bool  # False: a child looked at and left out (a nested project, a virtualenv, ignored)
    files: List[str]  # the names of the files the walk gave in it, in its order
    kept: List[str]  # the children entered (or, a link, kept but not followed), in order
    left: List[str]  # the children looked at and left out for what they hold


class Listing(NamedTuple):
    """A walk's files and what decided them, as `listing.py` keeps it in the cache (here, so that
    the cache reads it without importing `listing.py`, which imports the cache)."""

    files: List[str]
    folders: List[Folder]  # every folder looked at, parents before their children
    excludes: List[Tuple[str, str]]  # each entered folder, its config's excludes
    watched: List[Tuple[str, Stamp]]  # .gitignore and pyproject.toml files


def decided_by(folder: Path) -> Iterator[Path]:
    """The files in `folder` whose contents decide what a walk of it gives: its .gitignore and its
    pyproject.toml (excludes)."""
    yield folder / ".gitignore"
    yield folder / "pyproject.toml"
