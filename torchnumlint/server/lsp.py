"""Findings in the editor's terms: diagnostics, ranges, text edits, hovers, code actions.

The linter counts code points on lines that end at `\\n`, `\\r\\n` or `\\r`; the editor counts in
the encoding it negotiated (UTF-16 unless it chose otherwise) on the same lines. A document's lines
are split once per answer (`Lines`), never per finding: a buffer with 16,000 findings is converted
in one pass, not 16,000.
"""

from __future__ import annotations

import bisect
import re
from typing import List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from torchnumlint.findings import Finding, Safety

SOURCE = "torchnumlint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class Lines:
    """`text` split into lines as the linter and LSP count them, with the client's encoding."""

    def __init__(self, text: str, codec: PositionCodec) -> None:
        self.lines = _LINE.findall(text)
        self.codec = codec
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def position(self, line: int, col: int) -> types.Position:
        """The client's position of 1-based `line`, 1-based code point column `col`."""
        return self.codec.position_to_client_units(self.lines, ServerTextPosition(line - 1, col - 1))

    def at_offset(self, offset: int) -> types.Position:
        """The client's position of a code point offset into the text."""
        row = bisect.bisect_right(self.starts, offset) - 1
        if row >= len(self.lines):  # the end of a text whose last line ends with a newline
            return types.Position(len(self.lines), 0)
        return self.position(row + 1, offset - self.starts[row] + 1)

    def offset(self, position: types.Position) -> int:
        """The code point offset of a client position."""
        if position.line >= len(self.lines):
            return self.starts[-1]
        server = self.codec.position_from_client_units(self.lines, position)
        return self.starts[server.line] + server.character


def finding_range(lines: Lines, finding: Finding) -> types.Range:
    return types.Range(lines.position(finding.line, finding.col), lines.position(finding.end_line, finding.end_col))


def diagnostic(lines: Lines, finding: Finding, docs: Optional[str]) -> types.Diagnostic:
    """A warning naming the rule; `docs`: the URI of its documentation, when there is one."""
    return types.Diagnostic(
        range=finding_range(lines, finding),
        message=finding.message,
        severity=types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=docs) if docs else None,
        source=SOURCE,
    )


def overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> Tuple[int, int]:
        return p.line, p.character

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def contains(a: types.Range, position: types.Position) -> bool:
    return overlaps(a, types.Range(position, position))


def text_edit(lines: Lines, old: str, new: str) -> Optional[types.TextEdit]:
    """One edit that turns `old` (the text `lines` split) into `new`: the span where they differ."""
    if old == new:
        return None
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return types.TextEdit(range=types.Range(lines.at_offset(start), lines.at_offset(end_old)), new_text=new[start:end_new])


def fix_action(uri: str, lines: Lines, finding: Finding, docs: Optional[str]) -> types.CodeAction:
    """The quick fix of one finding (an UNSAFE fix says so: it changes results)."""
    assert finding.fix is not None
    unsafe = finding.fix.safety is Safety.UNSAFE
    edits = [
        types.TextEdit(range=types.Range(lines.at_offset(e.start), lines.at_offset(e.end)), new_text=e.content) for e in finding.fix.edits
    ]
    return types.CodeAction(
        title=f"Fix {finding.code} ({finding.name})" + (": unsafe, changes results" if unsafe else ""),
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic(lines, finding, docs)],
        is_preferred=not unsafe,
        edit=types.WorkspaceEdit(changes={uri: edits}),
    )


def noqa_action(uri: str, lines: Lines, text: str, finding: Finding, docs: Optional[str]) -> Optional[types.CodeAction]:
    """`# noqa: CODE` where it silences the finding (`noqa_edit`: merged into a directive already
    there, never inside a string); None where no line of its statement can take a comment."""
    from torchnumlint.noqa_edit import with_noqa

    noqa, count = with_noqa(text, {finding.noqa_lines or (finding.line,): {finding.code}})
    edit = text_edit(lines, text, noqa) if count else None
    if edit is None:
        return None
    return types.CodeAction(
        title=f"Disable {finding.code} for this line (# noqa)",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic(lines, finding, docs)],
        edit=types.WorkspaceEdit(changes={uri: [edit]}),
    )


def fix_all_actions(uri: str, lines: Lines, old: str, new: str, applied: int, unsafe: bool, kinds: Sequence[str]) -> List[types.CodeAction]:
    """The whole document's fixes as one edit, as `source.fixAll.torchnumlint` (what editors run
    on save) and as a quick fix, for each of `kinds`."""
    edit = text_edit(lines, old, new)
    if edit is None:
        return []
    what = "every fix (unsafe ones too: unsafe-fixes = true)" if unsafe else "every safe fix"
    title = f"Fix all torchnumlint findings: {what}, {applied} in all"
    return [types.CodeAction(title=title, kind=kind, edit=types.WorkspaceEdit(changes={uri: [edit]})) for kind in kinds]


def hover(findings: Sequence[Tuple[Finding, str]]) -> types.Hover:
    """Each finding's message and its rule's documentation (`torchnumlint rule CODE`)."""
    parts = [f"**{f.code}** ({f.name}): {f.message}" + (f"\n\n```text\n{docs}\n```" if docs else "") for f, docs in findings]
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)))


def wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """Whether a code action of `kind` is asked for (`only` lists kinds and their parents)."""
    return only is None or any(kind == asked or kind.startswith(asked + ".") for asked in only)
