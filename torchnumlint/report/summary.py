"""What the human formats (text, concise) print besides the findings: the closing summary line
and `--statistics`' table, one wording for both."""

from __future__ import annotations

from collections import Counter
from typing import List

from torchnumlint.findings import fixable
from torchnumlint.results import Options, RunResult


def statistics(result: RunResult, options: Options) -> List[str]:
    """One line per rule, most frequent first: count, code, `[*]` if fixable, name."""
    counts = Counter(f.code for f in result.findings)
    names = {f.code: f.name for f in result.findings}
    fixes = {f.code for f in result.findings if fixable(f, bool(options.unsafe_fixes))}
    return [
        f"{count:>5}  {code}  {'[*]' if code in fixes else '   '} {names[code]}"
        for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def wants_summary(result: RunResult, quiet: bool) -> bool:
    """No summary with -q, nor under errors alone ("All checks passed." would be false)."""
    return not quiet and bool(result.findings or result.fixed or not result.errors)


def summary(result: RunResult, options: Options) -> str:
    total = len(result.findings)
    # what --fix applies under the flags given (with --unsafe-fixes: the unsafe ones too)
    applicable = sum(1 for f in result.findings if fixable(f, bool(options.unsafe_fixes)))
    unsafe_more = sum(1 for f in result.findings if fixable(f, True)) - applicable
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
    if applicable and not options.fix:
        hints.append(f"{applicable} fixable with --fix")
    if unsafe_more and not options.unsafe_fixes:
        hints.append(f"{unsafe_more} more with --unsafe-fixes")
    if hints:
        head = head[:-1] + f" ({', '.join(hints)})."
    return head
