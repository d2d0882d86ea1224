"""`[tool.torchnumlint]` discovery and validation, and rule selection.

Settings come from the nearest pyproject.toml that has a `[tool.torchnumlint]` table (searched from
the working directory upwards), or from `--config FILE`; command-line options override them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

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
    root: Path = field(default_factory=Path.cwd)  # patterns are relative to this folder
    source: Optional[Path] = None


_LIST_KEYS = {"select", "extend-select", "ignore", "exclude", "extend-exclude"}
_KEYS = _LIST_KEYS | {"per-file-ignores", "unsafe-fixes"}


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml with a [tool.torchnumlint] table, from `start` upwards."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            tool = _read_toml(candidate).get("tool", {})
            if isinstance(tool, dict) and "torchnumlint" in tool:
                return candidate
    return None


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def load_config(explicit: Optional[str] = None, start: Optional[Path] = None) -> Config:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        data = _read_toml(path)
        tool = data.get("tool")
        # a pyproject.toml, or a file holding the settings at its top level
        table = tool.get("torchnumlint", {}) if isinstance(tool, dict) else data
    else:
        found = find_pyproject((start or Path.cwd()).resolve())
        if found is None:
            return Config()
        path = found
        table = _read_toml(path)["tool"]["torchnumlint"]
    return _validate(table, path)


def _validate(table: dict, path: Path) -> Config:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchnumlint] must be a table")
    config = Config(root=path.parent.resolve(), source=path)
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
        elif key == "unsafe-fixes":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: must be true or false")
            config.unsafe_fixes = value
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
    from torchnumlint.rules.base import registry

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
    from torchnumlint.rules.base import registry

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
