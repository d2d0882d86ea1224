"""The fix loop: apply non-overlapping fixes, re-parse, re-lint, until nothing changes.

A pass whose fixes produce invalid code is dropped whole: the text stays as it was before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple, Type

from torchnumlint.engine import ParseError, lint_text
from torchnumlint.findings import Edit, Finding, fixable
from torchnumlint.fix_policy import FixPolicy
from torchnumlint.index import ProjectIndex
from torchnumlint.rules.base import Rule

MAX_FIX_PASSES = 10


def apply_fixes(text: str, findings: Iterable[Finding], applied: Optional[List[Finding]] = None) -> Tuple[str, int]:
    """Apply every fix whose edits do not overlap an earlier one; the rest wait for the next pass.

    Returns the new text and how many fixes went in (their findings appended to `applied`)."""
    taken: List[Edit] = []
    count = 0
    for finding in sorted(findings, key=lambda f: f.fix.edits[0].start if f.fix else 0):
        if finding.fix is None:
            continue
        new = [e for e in finding.fix.edits if e not in taken]
        if any(_overlaps(a, b) for a in new for b in taken):
            continue
        taken.extend(new)
        count += 1
        if applied is not None:
            applied.append(finding)
    for edit in sorted(taken, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: edit.start] + edit.content + text[edit.end :]
    return text, count


def _overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end:  # an insertion clashes only with a replacement around it
        return b.start < a.start < b.end
    if b.start == b.end:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


@dataclass
class FixResult:
    text: str
    findings: List[Finding]
    applied: int = 0
    errors: List[str] = field(default_factory=list)
    fixed: List[Finding] = field(default_factory=list)  # the findings whose fixes went in (--show-fixes)


def fix_text(
    path: str,
    text: str,
    rules: Sequence[Type[Rule]],
    index: Optional[ProjectIndex] = None,
    unsafe: bool = False,
    strict: bool = False,
    policy: FixPolicy = FixPolicy(),
) -> FixResult:
    """Apply fixes until nothing changes (at most MAX_FIX_PASSES), re-parsing after each pass.

    The statements the first pass could not analyse are named in `errors` (as warnings); fixes
    never touch them. `policy` (the config's fixable/unfixable/extend-*-fixes) decides which
    fixes exist and how safe they are."""
    warnings: List[str] = []
    findings = policy.apply(lint_text(path, text, rules, index, strict, warnings=warnings))
    applied = 0
    fixed: List[Finding] = []
    for _ in range(MAX_FIX_PASSES):
        todo = [f for f in findings if fixable(f, unsafe)]
        if not todo:
            break
        this_pass: List[Finding] = []
        new_text, count = apply_fixes(text, todo, this_pass)
        if new_text == text:
            break
        if index is not None and any(rule.needs_index for rule in rules):
            index = index.with_file(path, new_text)
        try:
            new_findings = policy.apply(lint_text(path, new_text, rules, index, strict))
        except ParseError as exc:  # a bug in a rule's fix: keep the last good text
            return FixResult(text, findings, applied, warnings + [f"a fix produced invalid code ({exc}); not applied"], fixed)
        applied += count
        fixed += this_pass
        text, findings = new_text, new_findings
    return FixResult(text, findings, applied, warnings, fixed)
