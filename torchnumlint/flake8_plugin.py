"""The flake8 extension: `flake8 --select TNL` reports torchnumlint's findings.

Registered under the `TNL` code prefix (`[project.entry-points."flake8.extension"]`,
`TNL = "torchnumlint.flake8_plugin:TorchNumLint"`). Each finding is yielded as flake8 wants it:
`(line, column, "TNL103 message", type)` with a 0-based column, which flake8 prints plus one, so
`flake8` and `torchnumlint` print the same `line:col` for a finding (TorchFix's plugin passes its
1-based column through and is off by one).

Suppression is the command's (`suppression.py`): the file's `[tool.torchnumlint]` (or none)
chooses the rules, its mode (`strict`) and per-file-ignores, its `exclude` and .gitignore leave the
file out, and `# noqa` / `# torchnumlint: noqa` / `# flake8: noqa` silence what they silence under
`torchnumlint`; flake8's own `--select`/`--extend-ignore`/`--per-file-ignores` then choose among
what is left. A config that cannot be read is one finding, `TNL000`, at line 1 naming it.

What differs from the `torchnumlint` command, because flake8 hands a plugin one file at a time:
project facts are the file's own (a helper, module or `autograd.Function` defined in another file
of the project is not seen: `torchnumlint` builds an index of the whole project), and no fix is
applied (flake8 does not fix). A file that is not valid Python gets flake8's E999, nothing from
this plugin.
"""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING, Iterator, Sequence, Tuple, Type

from torchnumlint import __version__

if TYPE_CHECKING:
    from torchnumlint.config import Settings


class TorchNumLint:
    """A flake8 tree plugin (flake8 passes the parsed `tree`, unused here: the linter parses the
    text with LibCST, which keeps what `ast` drops)."""

    name = "torchnumlint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.text = "".join(lines)

    def run(self) -> Iterator[Tuple[int, int, str, Type["TorchNumLint"]]]:
        from torchnumlint.config import ConfigError
        from torchnumlint.engine import ParseError, lint_text
        from torchnumlint.suppression import scope

        try:
            applies = scope(self.filename, _settings())
        except ConfigError as exc:
            yield 1, 0, f"TNL000 {exc}", type(self)
            return
        if applies.excluded:
            return
        try:
            findings = lint_text(self.filename, self.text, list(applies.rules), strict=applies.strict)
        except ParseError:
            return
        for finding in sorted(findings, key=lambda f: f.sort_key):
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)


@functools.lru_cache(maxsize=1)
def _settings() -> "Settings":
    """One Settings per flake8 process: each folder's config is read once, not once per file."""
    from torchnumlint.config import Settings

    return Settings()
