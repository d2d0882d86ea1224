"""One line per finding, `path:line:col: CODE message [*]` (`[*]`: fixable with the flags given),
then the summary: ruff's concise output, for grep and for people who know the rules."""

from __future__ import annotations

from typing import List

from torchnumlint.findings import Finding, fixable
from torchnumlint.report.summary import statistics as statistics_table
from torchnumlint.report.summary import summary, wants_summary
from torchnumlint.results import Options, RunResult


def headline(finding: Finding, options: Options) -> str:
    mark = " [*]" if fixable(finding, bool(options.unsafe_fixes)) else ""
    return f"{finding.path}:{finding.where}: {finding.code} {finding.message}{mark}"


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    if statistics:
        lines: List[str] = statistics_table(result, options)
    else:
        lines = [headline(f, options) for f in result.findings]
    if wants_summary(result, quiet):
        lines.append(summary(result, options))
    return "\n".join(lines)
