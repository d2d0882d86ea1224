"""`[tool.torchnumlint]` discovery and validation, and rule selection, per file.

Each file takes its settings from the nearest pyproject.toml above it that has a `[tool.torchnumlint]`
table (as ruff takes the closest config to each file): one run over several projects gives each
project's files their own settings, whatever the working directory. `--config FILE` gives one set
of settings to every file. Command-line rule selection goes on top of whichever config applies.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Type

if TYPE_CHECKING:
    from torchnumlint.rules.base import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(Exception):
    """A bad setting: the message names the file, the key and what is wrong."""


@dataclass
class Config:
    select: Optional[List[str]] = None
    extend_select: List[str] = field(default_factory=list)
    ignore: List[str] = field(default_factory=list)
    exclude: Optional[List[str]] = None
    extend_exclude: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    # Also report findings without evidence that the hazard is reached (rules/evidence.py).
    strict: bool = False
    max_file_size: int = 10_000_000  # bytes: a larger file is skipped, named (source.read_source)
    root: Path = field(default_factory=Path.cwd)  # patterns are relative to this folder
    source: Optional[Path] = None


_LIST_KEYS = {"select", "extend-select", "ignore", "exclude", "extend-exclude"}
_KEYS = _LIST_KEYS | {"per-file-ignores", "unsafe-fixes", "strict", "max-file-size"}


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def load_config(path: str) -> Config:
    """The settings in `path`: a pyproject.toml, or a file holding them at its top level."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file}: config file not found")
    data = _read_toml(file)
    tool = data.get("tool")
    return _validate(tool.get("torchnumlint", {}) if isinstance(tool, dict) else data, file)


def _pyproject_config(folder: Path) -> Optional[Config]:
    """The settings of `folder`'s pyproject.toml, when it has a [tool.torchnumlint] table."""
    candidate = folder / "pyproject.toml"
    if not candidate.is_file():
        return None
    tool = _read_toml(candidate).get("tool", {})
    if not (isinstance(tool, dict) and "torchnumlint" in tool):
        return None
    return _validate(tool["torchnumlint"], candidate)


@dataclass(frozen=True)
class Overrides:
    """Rule selection from the command line, applied on top of every file's config."""

    select: Optional[Tuple[str, ...]] = None
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()


class Settings:
    """Each file's Config and enabled rules: from `config_file` for every file when given, else from
    the nearest pyproject.toml with a [tool.torchnumlint] table above the file (defaults where none).

    Folders are looked up once, config files read once and rules selected once per config, so a
    run over thousands of files reads a handful of TOML files."""

    def __init__(self, overrides: Overrides = Overrides(), config_file: Optional[str] = None) -> None:
        self._overrides = overrides
        self._fixed = load_config(config_file) if config_file is not None else None
        self._default = Config()
        self._by_folder: Dict[Path, Config] = {}
        self._rules: Dict[int, List[Type[Rule]]] = {}  # id() of a Config (each is kept here) -> rules

    @classmethod
    def fixed(cls, config: Config, rules: Sequence[Type[Rule]] = ()) -> "Settings":
        """`config` and `rules` for every file (an API caller that has chosen them itself)."""
        settings = cls()
        settings._fixed = config
        settings._rules[id(config)] = list(rules)
        return settings

    def config_for(self, folder: Path) -> Config:
        """The Config of the files directly in `folder` (an absolute path)."""
        if self._fixed is not None:
            return self._fixed
        if folder not in self._by_folder:
            found = _pyproject_config(folder)
            if found is None:
                found = self._default if folder.parent == folder else self.config_for(folder.parent)
            self._by_folder[folder] = found
        return self._by_folder[folder]

    def config_of(self, path: str) -> Config:
        """The Config of the file at `path`."""
        return self.config_for(Path(os.path.abspath(path)).parent)

    def selection_key(self, path: str) -> tuple:
        """What decides `rules_for(path)`, without loading a rule (a cache key: the rules' own
        code is keyed apart): the command line's selection, the file's config's, the codes its
        per-file-ignores switch off; for `fixed` settings, the rules given."""
        config = self.config_of(path)
        if self._fixed is not None and id(config) in self._rules:
            chosen: tuple = tuple(rule.code for rule in self._rules[id(config)])
        else:
            wanted = self._overrides
            chosen = (wanted, config.select, config.extend_select, config.ignore)
        return chosen, tuple(ignored_for(config, path))

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
            if key in ("select", "extend-select", "ignore"):
                value = [v.strip().upper() for v in value]
            setattr(config, key.replace("-", "_"), list(value))
        elif key in ("unsafe-fixes", "strict"):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: must be true or false")
            setattr(config, key.replace("-", "_"), value)
        elif key == "max-file-size":
            if not (type(value) is int and value > 0):
                raise ConfigError(f"{where}: must be a positive number of bytes")
            config.max_file_size = value
        else:  # per-file-ignores
            if not isinstance(value, dict) or not all(
                isinstance(codes, list) and all(isinstance(c, str) for c in codes) for codes in value.values()
            ):
                raise ConfigError(f'{where}: must be a table of glob = ["CODE", ...]')
            config.per_file_ignores = {k: [c.strip().upper() for c in v] for k, v in value.items()}
    for key in ("select", "extend_select", "ignore"):
        for selector in getattr(config, key) or ():
            check_selector(selector, f"{path}: tool.torchnumlint.{key.replace('_', '-')}")
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
    """The enabled rule classes. A prefix enables the default-on rules it covers; an off-by-default
    (heuristic) rule is enabled only by its exact code."""
    from torchnumlint.rules.registry import registry

    chosen = []
    for code, rule in registry().items():
        selectors = list(select) if select is not None else []
        selectors += list(extend_select)
        if select is None and rule.default:
            on = True
        else:
            on = any(s == code or (rule.default and _matches(s, code)) for s in selectors)
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
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(absolute.name, pattern) or fnmatch.fnmatch(
            absolute.as_posix(), pattern
        ):
            codes.extend(selected)
    return codes
