"""Human output, like ruff's: `path:line:col: CODE message [*]`, then a summary."""

from __future__ import annotations

from collections import Counter
from typing import List

from torchnumlint.findings import fixable
from torchnumlint.results import Options, RunResult


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    lines: List[str] = []
    if statistics:
        counts = Counter(f.code for f in result.findings)
        names = {f.code: f.name for f in result.findings}
        fixes = {f.code for f in result.findings if fixable(f, options.unsafe_fixes)}
        for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"{count:>5}  {code}  {'[*]' if code in fixes else '   '} {names[code]}")
    else:
        for f in result.findings:
            mark = " [*]" if fixable(f, options.unsafe_fixes) else ""
            lines.append(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}{mark}")
    if not quiet and (result.findings or result.fixed or not result.errors):
        lines.append(summary(result, options))
    return "\n".join(lines)


def summary(result: RunResult, options: Options) -> str:
    total = len(result.findings)
    safe = sum(1 for f in result.findings if fixable(f, False))
    unsafe_more = sum(1 for f in result.findings if fixable(f, True)) - safe
    noun = "finding" if total == 1 else "findings"
    if options.fix and result.fixed:
        head = f"Fixed {result.fixed} {'finding' if result.fixed == 1 else 'findings'}, {total} remaining."
        if total == 0:
            return head
    elif total == 0:
        return "All checks passed."
    else:
        head = f"Found {total} {noun}."
    hints = []
    if safe and not options.fix:
        hints.append(f"{safe} fixable with --fix")
    if unsafe_more and not options.unsafe_fixes:
        hints.append(f"{unsafe_more} more with --unsafe-fixes")
    if hints:
        head = head[:-1] + f" ({', '.join(hints)})."
    return head
