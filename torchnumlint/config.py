"""`[tool.torchnumlint]` discovery and validation, and rule selection, per file.

Each file takes its settings from the nearest pyproject.toml above it that has a `[tool.torchnumlint]`
table (as ruff takes the closest config to each file): one run over several projects gives each
project's files their own settings, whatever the working directory. `--config FILE` gives one set
of settings to every file, `--isolated` none. `extend = "path"` reads another file's settings
first and lays this table's keys over them (ruff's `extend`). Command-line rule selection,
excludes and per-file ignores go on top of whichever config applies.

`exclude` adds to the default excludes (build/, venv/, node_modules/, ...), as ruff's
`extend-exclude` does: a user's list never silently lets those in (a file named on the command
line is still linted). `extend-exclude` is the same, for configs written for ruff.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Sequence, Tuple, Type

from torchnumlint.fix_policy import FixPolicy
from torchnumlint.record import Record

if TYPE_CHECKING:
    from torchnumlint.rules.base import Rule


class ConfigError(Exception):
    """A bad setting: the message names the file, the key and what is wrong."""


class Config(Record):
    __slots__ = _fields = (
        "select",
        "extend_select",
        "ignore",
        "exclude",
        "extend_exclude",
        "per_file_ignores",
        "fixable",
        "unfixable",
        "extend_safe_fixes",
        "extend_unsafe_fixes",
        "unsafe_fixes",
        "strict",
        "max_file_size",
        "max_lint_size",
        "root",
        "source",
        "error",
    )
    select: Optional[List[str]]
    extend_select: List[str]
    ignore: List[str]
    exclude: Optional[List[str]]
    extend_exclude: List[str]
    per_file_ignores: Dict[str, List[str]]
    # ruff's fix settings: which codes' fixes are offered, and which change their safety
    fixable: Optional[List[str]]  # None: every code
    unfixable: List[str]
    extend_safe_fixes: List[str]
    extend_unsafe_fixes: List[str]
    unsafe_fixes: bool
    # Also report findings without evidence that the hazard is reached (rules/evidence.py).
    strict: bool
    max_file_size: int  # bytes: a larger file is skipped, named (source.read_source)
    # bytes: a larger file is given to no rule, named (`source.too_large`): LibCST's tree costs
    # 50-1,250 bytes of memory per byte of source (measured on torch's largest files); 0: no limit
    max_lint_size: int
    root: Path  # patterns are relative to this folder
    source: Optional[Path]
    # Why `source` could not be used (not UTF-8, bad TOML, a bad key): the files under it are not
    # linted and this is their error; folders are still walked with the default excludes.
    error: Optional[str]

    def __init__(
        self,
        select: Optional[List[str]] = None,
        extend_select: Optional[List[str]] = None,
        ignore: Optional[List[str]] = None,
        exclude: Optional[List[str]] = None,
        extend_exclude: Optional[List[str]] = None,
        per_file_ignores: Optional[Dict[str, List[str]]] = None,
        fixable: Optional[List[str]] = None,
        unfixable: Optional[List[str]] = None,
        extend_safe_fixes: Optional[List[str]] = None,
        extend_unsafe_fixes: Optional[List[str]] = None,
        unsafe_fixes: bool = False,
        strict: bool = False,
        max_file_size: int = 10_000_000,
        max_lint_size: int = 1_000_000,
        root: Optional[Path] = None,  # None: the working folder
        source: Optional[Path] = None,
        error: Optional[str] = None,
    ) -> None:
        self.select, self.extend_select = select, [] if extend_select is None else extend_select
        self.ignore, self.exclude = [] if ignore is None else ignore, exclude
        self.extend_exclude = [] if extend_exclude is None else extend_exclude
        self.per_file_ignores = {} if per_file_ignores is None else per_file_ignores
        self.fixable, self.unfixable = fixable, [] if unfixable is None else unfixable
        self.extend_safe_fixes = [] if extend_safe_fixes is None else extend_safe_fixes
        self.extend_unsafe_fixes = [] if extend_unsafe_fixes is None else extend_unsafe_fixes
        self.unsafe_fixes, self.strict, self.max_file_size, self.max_lint_size = unsafe_fixes, strict, max_file_size, max_lint_size
        self.root = Path.cwd() if root is None else root
        self.source, self.error = source, error

    @property
    def fix_policy(self) -> FixPolicy:
        """Which fixes this config offers, at what safety."""
        return FixPolicy(
            fixable=None if self.fixable is None else tuple(self.fixable),
            unfixable=tuple(self.unfixable),
            safe=tuple(self.extend_safe_fixes),
            unsafe=tuple(self.extend_unsafe_fixes),
        )


_SELECTOR_KEYS = {"select", "extend-select", "ignore", "fixable", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes"}
_LIST_KEYS = _SELECTOR_KEYS | {"exclude", "extend-exclude"}
_SIZE_KEYS = {"max-file-size", "max-lint-size"}
_KEYS = _LIST_KEYS | _SIZE_KEYS | {"per-file-ignores", "unsafe-fixes", "strict", "extend"}


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: cannot read: not UTF-8 (byte 0x{raw[exc.start]:02x} on line {line})") from None
    if sys.version_info >= (3, 11):  # imported here: a run in a folder with no pyproject.toml reads no TOML
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _table(data: dict) -> dict:
    """The settings of a parsed file: its [tool.torchnumlint] table, or its top level."""
    tool = data.get("tool")
    return tool.get("torchnumlint", {}) if isinstance(tool, dict) else data


def load_config(path: str) -> Config:
    """The settings in `path`: a pyproject.toml, or a file holding them at its top level."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file}: config file not found")
    return _validate(_extended(_table(_read_toml(file)), file, ()), file)


def _extended(table: dict, path: Path, seen: Tuple[Path, ...]) -> dict:
    """`table` laid over the settings of the file its `extend` names (relative to `path`'s
    folder), recursively; each file's own keys are checked against its own name first."""
    if not isinstance(table, dict) or "extend" not in table:
        return table
    base = table["extend"]
    if not isinstance(base, str):
        raise ConfigError(f"{path}: tool.torchnumlint.extend: must be the path of a config file")
    target = Path(os.path.abspath(path.parent / os.path.expanduser(base)))
    if target in seen or target == Path(os.path.abspath(path)):
        raise ConfigError(f"{path}: tool.torchnumlint.extend: {base} extends itself")
    if not target.is_file():
        raise ConfigError(f"{path}: tool.torchnumlint.extend: {target}: config file not found")
    inherited = _table(_read_toml(target))
    _validate(inherited, target)
    merged = dict(_extended(inherited, target, seen + (Path(os.path.abspath(path)),)))
    merged.pop("extend", None)
    merged.update({key: value for key, value in table.items() if key != "extend"})
    return merged


def _pyproject_config(folder: Path) -> Optional[Config]:
    """The settings of `folder`'s pyproject.toml, when it has a [tool.torchnumlint] table."""
    candidate = folder / "pyproject.toml"
    if not candidate.is_file():
        return None
    tool = _read_toml(candidate).get("tool", {})
    if not (isinstance(tool, dict) and "torchnumlint" in tool):
        return None
    return _validate(_extended(tool["torchnumlint"], candidate, ()), candidate)


class Overrides(NamedTuple):
    """Rule selection from the command line, applied on top of every file's config."""

    select: Optional[Tuple[str, ...]] = None
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    # exclude globs (--exclude, --extend-exclude: both add to every config's), relative to `cwd`
    exclude: Tuple[str, ...] = ()
    # --per-file-ignores "GLOB:CODE,CODE": replaces every config's, globs relative to `cwd`
    per_file_ignores: Optional[Tuple[Tuple[str, Tuple[str, ...]], ...]] = None
    cwd: str = "."
    isolated: bool = False  # --isolated: read no config file at all
    max_lint_size: Optional[int] = None  # --max-lint-size: replaces every config's

    def applied_to(self, config: Config) -> Config:
        """`config` with the command line's excludes, per-file ignores and file-size limit on top,
        their globs rebased from the working folder onto the config's folder."""
        if not self.exclude and self.per_file_ignores is None and self.max_lint_size is None:
            return config
        changed = config.replace(extend_exclude=config.extend_exclude + [self._rebased(g, config.root) for g in self.exclude])
        if self.per_file_ignores is not None:
            changed.per_file_ignores = {self._rebased(g, config.root): list(c) for g, c in self.per_file_ignores}
        if self.max_lint_size is not None:
            changed.max_lint_size = self.max_lint_size
        return changed

    def _rebased(self, glob: str, root: Path) -> str:
        """A glob relative to the working folder, made relative to `root` (a bare name matches
        anywhere, as in the config)."""
        if "/" not in glob.rstrip("/"):
            return glob
        absolute = os.path.join(os.path.abspath(self.cwd), glob)
        return os.path.relpath(absolute, root).replace(os.sep, "/") + ("/" if glob.endswith("/") else "")


class Settings:
    """Each file's Config and enabled rules: from `config_file` for every file when given, else from
    the nearest pyproject.toml with a [tool.torchnumlint] table above the file (defaults where none).

    Folders are looked up once, config files read once and rules selected once per config, so a
    run over thousands of files reads a handful of TOML files."""

    def __init__(self, overrides: Overrides = Overrides(), config_file: Optional[str] = None) -> None:
        self._overrides = overrides
        self._fixed = overrides.applied_to(load_config(config_file)) if config_file is not None else None
        if self._fixed is None and overrides.isolated:
            self._fixed = overrides.applied_to(Config(root=Path(os.path.abspath(overrides.cwd))))
        self._default = overrides.applied_to(Config())
        self._by_folder: Dict[Path, Config] = {}
        # (working folder, a path's folder as spelled) -> its Config: `config_of` is asked once or
        # more per file, and building an absolute `Path` each time was 16 % of a warm run's profile
        self._by_spelling: Dict[Tuple[str, str], Config] = {}
        self._rules: Dict[int, List[Type[Rule]]] = {}  # id() of a Config (each is kept here) -> rules
        self._selections: Dict[int, tuple] = {}  # id() of a Config without per-file-ignores -> `selection_key`

    @classmethod
    def fixed(cls, config: Config, rules: Sequence[Type[Rule]] = ()) -> "Settings":
        """`config` and `rules` for every file (an API caller that has chosen them itself)."""
        settings = cls()
        settings._fixed = config
        settings._rules[id(config)] = list(rules)
        return settings

    def config_for(self, folder: Path) -> Config:
        """The Config of the files directly in `folder` (an absolute path). A pyproject.toml that
        cannot be used gives a Config carrying its `error` (walking on needs no exception)."""
        if self._fixed is not None:
            return self._fixed
        if folder not in self._by_folder:
            try:
                found = _pyproject_config(folder)
                found = None if found is None else self._overrides.applied_to(found)
            except ConfigError as exc:
                found = Config(root=folder, source=folder / "pyproject.toml", error=str(exc))
            if found is None:
                found = self._default if folder.parent == folder else self.config_for(folder.parent)
            self._by_folder[folder] = found
        return self._by_folder[folder]

    def config_of(self, path: str) -> Config:
        """The Config of the file at `path`; ConfigError when the config that governs it cannot be used."""
        config = self._config_of_folder(path)
        if config.error is not None:
            raise ConfigError(config.error)
        return config

    def _config_of_folder(self, path: str) -> Config:
        """`config_for` the folder of `path`, looked up by the folder as spelled (and the working
        folder, which a relative spelling depends on): no `Path` is built for a folder seen before."""
        if self._fixed is not None:
            return self._fixed
        spelled = (os.getcwd(), os.path.dirname(path))
        config = self._by_spelling.get(spelled)
        if config is None:
            config = self._by_spelling[spelled] = self.config_for(Path(os.path.abspath(path)).parent)
        return config

    def usable(self, files: Sequence[str]) -> Tuple[List[str], List[str]]:
        """(the files whose config can be used, one error per config that cannot, saying how
        many files under it are left unlinted): a broken config stops its own files only."""
        kept: List[str] = []
        left_out: Dict[str, int] = {}
        for path in files:
            error = self._config_of_folder(path).error
            if error is None:
                kept.append(path)
            else:
                left_out[error] = left_out.get(error, 0) + 1
        errors = [f"{error} ({count} {'file' if count == 1 else 'files'} under it not linted)" for error, count in left_out.items()]
        return kept, errors

    def selection_key(self, path: str) -> tuple:
        """What decides `rules_for(path)`, without loading a rule (a cache key: the rules' own
        code is keyed apart): the command line's selection, the file's config's, the codes its
        per-file-ignores switch off (for `fixed` settings, the rules given), its fix settings, and
        the largest file given to the rules (a cached result of a file under it is no answer once
        a lowered limit leaves the file out)."""
        config = self.config_of(path)
        if not config.per_file_ignores and id(config) in self._selections:
            return self._selections[id(config)]  # the same for every file of the config (asked once per file)
        if self._fixed is not None and id(config) in self._rules:
            chosen: tuple = tuple(rule.code for rule in self._rules[id(config)])
        else:
            wanted = self._overrides
            # (the working folder and excludes are no part of it: they decide which files, not what rules)
            chosen = (wanted.select, wanted.extend_select, wanted.ignore, config.select, config.extend_select, config.ignore)
        key = chosen, tuple(ignored_for(config, path)), config.fix_policy, config.max_lint_size
        if not config.per_file_ignores:
            self._selections[id(config)] = key
        return key

    def rules_for(self, path: str) -> List[Type[Rule]]:
        """The rules enabled for the file at `path`: its config's selection with the command
        line's on top, less what its config's per-file-ignores switches off for it."""
        config = self.config_of(path)
        if id(config) not in self._rules:
            wanted = self._overrides
            self._rules[id(config)] = select_rules(
                wanted.select or config.select,
                [*wanted.extend_select, *config.extend_select],
                [*wanted.ignore, *config.ignore],
            )
        ignored = ignored_for(config, path)
        return [rule for rule in self._rules[id(config)] if not any(_matches(s, rule.code) for s in ignored)]


def _validate(table: dict, path: Path) -> Config:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchnumlint] must be a table")
    config = Config(root=Path(os.path.abspath(path.parent)), source=path)
    for key, value in table.items():
        where = f"{path}: tool.torchnumlint.{key}"
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown setting (expected one of: {', '.join(sorted(_KEYS))})")
        if key in _LIST_KEYS:
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{where}: must be a list of strings")
            if key in _SELECTOR_KEYS:
                value = [v.strip().upper() for v in value]
            setattr(config, key.replace("-", "_"), list(value))
        elif key in ("unsafe-fixes", "strict"):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: must be true or false")
            setattr(config, key.replace("-", "_"), value)
        elif key == "extend":
            continue  # laid out by _extended before validation
        elif key == "max-file-size":
            if not (type(value) is int and value > 0):
                raise ConfigError(f"{where}: must be a positive number of bytes")
            config.max_file_size = value
        elif key == "max-lint-size":
            if not (type(value) is int and value >= 0):
                raise ConfigError(f"{where}: must be a number of bytes (0: no limit)")
            config.max_lint_size = value
        else:  # per-file-ignores
            if not isinstance(value, dict) or not all(
                isinstance(codes, list) and all(isinstance(c, str) for c in codes) for codes in value.values()
            ):
                raise ConfigError(f'{where}: must be a table of glob = ["CODE", ...]')
            config.per_file_ignores = {k: [c.strip().upper() for c in v] for k, v in value.items()}
    for key in sorted(_SELECTOR_KEYS):
        for selector in getattr(config, key.replace("-", "_")) or ():
            check_selector(selector, f"{path}: tool.torchnumlint.{key}")
    # `exclude` adds to the defaults (module docstring): discovery reads it as extend-exclude
    config.extend_exclude = (config.exclude or []) + config.extend_exclude
    config.exclude = None
    for codes in config.per_file_ignores.values():
        for selector in codes:
            check_selector(selector, f"{path}: tool.torchnumlint.per-file-ignores")
    return config


def _codes() -> List[str]:
    from torchnumlint.rules.registry import registry

    return list(registry())


def check_selector(selector: str, where: str) -> None:
    """A selector is ALL, a code, or a prefix of codes (`TNL`, `TNL1`, `TNL10`)."""
    if selector.upper() == "ALL":
        return
    if not any(code.startswith(selector) for code in _codes()):
        raise ConfigError(f"{where}: unknown rule selector {selector!r}")


def _matches(selector: str, code: str) -> bool:
    return selector.upper() == "ALL" or code.startswith(selector)


def select_rules(select: Optional[Sequence[str]], extend_select: Sequence[str], ignore: Sequence[str]):
    """The enabled rule classes: the default-on rules when nothing is selected; else every rule a
    selector covers, as ruff does (its code, a prefix such as `TNL21`, or `ALL`, which is every
    rule), the off-by-default (heuristic) ones included."""
    from torchnumlint.rules.registry import registry

    chosen = []
    for code, rule in registry().items():
        selectors = list(select) if select is not None else []
        selectors += list(extend_select)
        if select is None and rule.default:
            on = True
        else:
            on = any(_matches(s, code) for s in selectors)
        if on and not any(_matches(s, code) for s in ignore):
            chosen.append(rule)
    return chosen


def ignored_for(config: Config, path: str) -> List[str]:
    """Codes that per-file-ignores switches off for `path`."""
    import fnmatch

    if not config.per_file_ignores:
        return []
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(config.root).as_posix()
    except ValueError:
        relative = absolute.as_posix()
    codes: List[str] = []
    for pattern, selected in config.per_file_ignores.items():
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(absolute.name, pattern) or fnmatch.fnmatch(absolute.as_posix(), pattern):
            codes.extend(selected)
    return codes
