"""One suppression model for every front end: the command line, standard input
(`--stdin-filename`), the language server and the flake8 plugin ask `scope(path, settings)` what
applies to a file, so a finding is silenced the same way whichever of them reports it:

- the file's excludes and the .gitignore files above it (`excluded`: the front end reports
  nothing for it; the command line asks this of named files only under `--force-exclude`, as
  ruff does, and skips a `--stdin-filename` it names);
- the rules its config enables (the nearest `[tool.torchnumlint]`, or `--config`), with the
  command line's selection on top, less its per-file-ignores (`rules`), and its `strict` mode;
- which fixes are offered and how safe they are (`fix_policy`);
- the noqa comments in its text, applied by the engine to every finding (`directives.py`:
  `# noqa`, `# noqa: CODE` or a prefix of codes as flake8 reads them, `# torchnumlint: noqa`,
  `# flake8: noqa`).

A config that cannot be used raises `ConfigError` (one line naming it) from `scope`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Tuple, Type

from torchnumlint import discovery
from torchnumlint.config import Settings
from torchnumlint.fix_policy import FixPolicy

if TYPE_CHECKING:
    from torchnumlint.rules.base import Rule


@dataclass(frozen=True)
class Scope:
    """What applies to one file (see the module's docstring)."""

    path: str
    excluded: bool
    rules: Tuple[Type["Rule"], ...]
    strict: bool
    fix_policy: FixPolicy


def scope(path: str, settings: Settings) -> Scope:
    """What applies to the file at `path` (which need not exist: an editor's unsaved buffer,
    a `--stdin-filename`). Raises ConfigError when its config cannot be used."""
    config = settings.config_of(path)
    return Scope(
        path=path,
        excluded=_excluded(path, settings),
        rules=tuple(settings.rules_for(path)),
        strict=config.strict,
        fix_policy=config.fix_policy,
    )


def _excluded(path: str, settings: Settings) -> bool:
    """Whether the excludes or a .gitignore leave `path` out: the rule discovery applies to a
    file named under `--force-exclude` (its walker, asked about one path)."""
    return discovery._Walker(settings).named_file_excluded(Path(os.path.abspath(path)))
