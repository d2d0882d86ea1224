"""The flake8 extension: `flake8 --select TNL` reports torchnumlint's default rules.

Registered under the `TNL` code prefix (`[project.entry-points."flake8.extension"]`,
`TNL = "torchnumlint.flake8_plugin:TorchNumLint"`). Each finding is yielded as flake8 wants it:
`(line, column, "TNL103 message", type)` with a 0-based column, which flake8 prints plus one, so
`flake8` and `torchnumlint` print the same `line:col` for a finding (TorchFix's plugin passes its
1-based column through and is off by one).

What differs from the `torchnumlint` command, because flake8 hands a plugin one file at a time:

- Project facts are the file's own: a helper, module or `autograd.Function` defined in another
  file of the project is not seen (`torchnumlint` builds an index of the whole project), so a
  finding that needs one (a softmax returned by a helper imported from another module) is
  reported only by `torchnumlint`.
- The rules are the default-on ones, in plain (not `--strict`) mode; flake8's own
  `--select`/`--extend-ignore`/`--per-file-ignores` choose among them. `[tool.torchnumlint]` is
  not read, and no fix is applied (flake8 does not fix).
- `# noqa` works as in both tools; a file that is not valid Python gets flake8's E999, nothing
  from this plugin.
"""

from __future__ import annotations

import ast
from typing import Iterator, List, Sequence, Tuple, Type

from torchnumlint import __version__


class TorchNumLint:
    """A flake8 tree plugin (flake8 passes the parsed `tree`, unused here: the linter parses the
    text with LibCST, which keeps what `ast` drops)."""

    name = "torchnumlint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.text = "".join(lines)

    def run(self) -> Iterator[Tuple[int, int, str, Type["TorchNumLint"]]]:
        from torchnumlint.engine import ParseError, lint_text

        try:
            findings = lint_text(self.filename, self.text, _default_rules())
        except ParseError:
            return
        for finding in sorted(findings, key=lambda f: f.sort_key):
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)


def _default_rules() -> List[type]:
    from torchnumlint.rules.registry import all_rules

    return [rule for rule in all_rules() if rule.default]
