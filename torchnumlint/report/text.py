"""Human output, like ruff's full output: each finding's `path:line:col: CODE message [*]`, the
source lines with a marker under the span, and its fix as a short diff; then the summary.
`--statistics` prints the per-rule table instead (as the concise format does).

`snippet` (with `notebook`, `difflib` and `unicodedata` behind it) is imported only when there is a
finding to show: a clean run, the editor's and pre-commit's usual one, does not pay for it."""

from __future__ import annotations

from typing import List

from torchnumlint.report import concise
from torchnumlint.report.summary import summary, wants_summary
from torchnumlint.results import Options, RunResult


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    if statistics:
        return concise.render(result, options, quiet=quiet, statistics=True)
    lines: List[str] = []
    if result.findings:
        lines = _findings(result, options)
    if wants_summary(result, quiet):
        lines.append(summary(result, options))
    return "\n".join(lines).rstrip("\n")


def _findings(result: RunResult, options: Options) -> List[str]:
    """Each finding's headline, source lines and fix, with a blank line after each."""
    from torchnumlint.report.snippet import Sources, fix_diff, snippet

    sources = Sources(result.sources)
    lines: List[str] = []
    for finding in result.findings:
        text = sources.get(finding.path, finding.cell)
        lines.append(concise.headline(finding, options))
        lines += snippet(finding, text)
        lines += fix_diff(finding, text)
        lines.append("")
    return lines
