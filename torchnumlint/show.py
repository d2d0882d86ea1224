"""`--show-files` and `--show-settings`: what a run would lint, and with which settings (ruff's
options of the same names), without linting anything."""

from __future__ import annotations

import os
from typing import List, Sequence

import click

from torchnumlint.config import Config, ConfigError, Settings
from torchnumlint.discovery import DEFAULT_EXCLUDE, discover


def show(paths: Sequence[str], settings: Settings, force_exclude: bool, files: bool) -> int:
    """Print the files (`files`) or the first file's settings; the exit code (2 when a path or a
    config could not be used, as a run would say)."""
    found, errors = discover(paths, settings, force_exclude=force_exclude)
    found, unusable = settings.usable(found)
    errors += unusable
    if files:
        for path in found:
            click.echo(path)
    elif found:
        click.echo("\n".join(_settings(found[0], settings.config_of(found[0]), settings)))
    else:
        errors.append(f"no Python files found under {', '.join(paths)}")
    for error in errors:
        click.echo(error, err=True)
    return 2 if errors else 0


def _settings(path: str, config: Config, settings: Settings) -> List[str]:
    def listed(values) -> str:
        return "[" + ", ".join(f'"{v}"' for v in values) + "]"

    lines = [
        f"Resolved settings for: {os.path.abspath(path)}",
        f"Settings path: {config.source if config.source is not None else '(none: the defaults)'}",
        f"root = {config.root}",
        f"select = {'(the default rules)' if config.select is None else listed(config.select)}",
        f"extend-select = {listed(config.extend_select)}",
        f"ignore = {listed(config.ignore)}",
        f"exclude = {listed(DEFAULT_EXCLUDE + config.extend_exclude)}  # the defaults, then yours",
        "per-file-ignores = {" + ", ".join(f'"{k}" = {listed(v)}' for k, v in config.per_file_ignores.items()) + "}",
        f"fixable = {'(every rule)' if config.fixable is None else listed(config.fixable)}",
        f"unfixable = {listed(config.unfixable)}",
        f"extend-safe-fixes = {listed(config.extend_safe_fixes)}",
        f"extend-unsafe-fixes = {listed(config.extend_unsafe_fixes)}",
        f"unsafe-fixes = {str(config.unsafe_fixes).lower()}",
        f"strict = {str(config.strict).lower()}",
    ]
    try:
        lines.append(f"rules = {listed(rule.code for rule in settings.rules_for(path))}")
    except ConfigError as exc:  # pragma: no cover - usable() kept only files whose config reads
        lines.append(f"rules: {exc}")
    return lines
