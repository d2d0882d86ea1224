"""The source around a finding, for the text format: its lines with a marker under the span, and
its fix as a short diff, the way ruff's full output shows them.

Findings carry positions, not text, so the source is read back from the file (decoded as the
linter decoded it). A file that changed since it was linted, or cannot be read, gets the finding's
line alone: a snippet of other code, or a diff against other text, would mislead. Rows and
columns are 1-based and count characters, end columns are exclusive (as in `Finding` and `Edit`).
"""

from __future__ import annotations

import bisect
import difflib
import re
import unicodedata
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from torchnumlint.findings import Edit, Finding, Safety
from torchnumlint.notebook import cell_text
from torchnumlint.source import SourceError, read_source
from torchnumlint.sourcefile import SourceFile

_NEWLINE = re.compile(r"\r\n|\r|\n")  # the engine's line breaks (positions.py)
_SPAN_LINES = 4  # a longer span shows its first and last two lines


class Text:
    """A source text with its line starts, to move between offsets and (row, column)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        self.lines = _NEWLINE.split(text)

    def position(self, offset: int) -> Tuple[int, int]:
        row = bisect.bisect_right(self.starts, offset)
        return row, offset - self.starts[row - 1] + 1

    def line(self, row: int) -> Optional[str]:
        return self.lines[row - 1] if 1 <= row <= len(self.lines) else None

    def line_end(self, offset: int) -> int:
        """The offset just past the line break of the line holding `offset` (or the text's end)."""
        row = bisect.bisect_right(self.starts, offset)
        return self.starts[row] if row < len(self.starts) else len(self.text)


class Sources:
    """Each file's text (a notebook's: each cell's), read once per report."""

    def __init__(self, given: Optional[Mapping[str, SourceFile]] = None) -> None:
        self._texts: Dict[Tuple[str, Optional[int]], Optional[Text]] = {}
        self._given = dict(given or {})  # texts that are not the file on disk (standard input)

    def get(self, path: str, cell: Optional[int] = None) -> Optional[Text]:
        if (path, cell) not in self._texts:
            try:
                source = self._given[path] if path in self._given else read_source(path)
                self._texts[path, cell] = Text(cell_text(source, cell))
            except (SourceError, OSError, KeyError):
                self._texts[path, cell] = None
        return self._texts[path, cell]


def _width(char: str) -> str:
    """What to print under `char` so that a marker lines up: a tab stays a tab, a wide character
    takes two cells."""
    if char == "\t":
        return "\t"
    return "  " if unicodedata.east_asian_width(char) in ("W", "F") else " "


def _marker(line: str, start: int, end: int) -> str:
    """Blanks under line[:start], carets under line[start:end] (at least one), 0-based."""
    pad = "".join(_width(c) for c in line[:start])
    carets = "".join("^" * len(_width(c).replace("\t", " ")) for c in line[start:end])
    return pad + (carets or "^")


def snippet(finding: Finding, text: Optional[Text]) -> List[str]:
    """The finding's lines, numbered, with carets under its span and its code after them."""
    if text is None or text.line(finding.line) is None or text.line(finding.end_line) is None:
        return []
    rows = list(range(finding.line, finding.end_line + 1))
    if len(rows) > _SPAN_LINES:
        rows = rows[:2] + [0] + rows[-2:]  # 0: the elided middle
    gutter = len(str(finding.end_line))
    blank = " " * gutter + " |"
    out = [blank]
    for row in rows:
        if row == 0:
            out.append(" " * gutter + " :")
            continue
        line = text.line(row) or ""
        first = finding.col - 1 if row == finding.line else len(line) - len(line.lstrip())
        last = finding.end_col - 1 if row == finding.end_line else len(line)
        marker = _marker(line, first, last)
        out.append(f"{row:>{gutter}} | {line}")
        out.append(f"{blank} {marker}" + (f" {finding.code}" if row == finding.end_line else ""))
    out.append(blank)
    return out


def _matches(text: Text, edits: Sequence[Edit]) -> bool:
    """Whether the edits were made against this very text (their offsets and rows agree)."""
    return all(
        e.end <= len(text.text) and text.position(e.start) == tuple(e.location) and text.position(e.end) == tuple(e.end_location)
        for e in edits
    )


def _hunks(text: Text, edits: Sequence[Edit]) -> List[Tuple[int, List[str], List[str]]]:
    """(first row, old lines, new lines) per group of edits that touch the same lines."""
    groups: List[Tuple[int, int, List[Edit]]] = []
    for edit in sorted(edits, key=lambda e: e.start):
        start = text.starts[text.position(edit.start)[0] - 1]
        end = text.line_end(max(edit.end - 1, edit.start))
        if groups and start < groups[-1][1]:
            groups[-1] = (groups[-1][0], max(end, groups[-1][1]), groups[-1][2] + [edit])
        else:
            groups.append((start, end, [edit]))
    hunks = []
    for start, end, group in groups:
        new = text.text[start:end]
        for edit in reversed(group):
            new = new[: edit.start - start] + edit.content + new[edit.end - start :]
        hunks.append((text.position(start)[0], _NEWLINE.split(text.text[start:end]), _NEWLINE.split(new)))
    return hunks


def fix_diff(finding: Finding, text: Optional[Text]) -> List[str]:
    """The finding's fix as removed (-) and added (+) lines, each numbered as in its file."""
    fix = finding.fix
    if fix is None or not fix.edits or text is None or not _matches(text, fix.edits):
        return []
    how = "--fix" if fix.safety is Safety.SAFE else "--unsafe-fixes"
    out = [f"  = {fix.safety.value} fix ({how}):"]
    shift = 0  # rows added above by earlier hunks
    for row, old, new in _hunks(text, fix.edits):
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag != "equal":
                out += [f"  {row + i:>5} - {old[i]}" for i in range(i1, i2)]
                out += [f"  {row + shift + j:>5} + {new[j]}" for j in range(j1, j2)]
        shift += len(new) - len(old)
    return out
