"""Plain data that flows from the rules to the fixer and the reporters."""

from __future__ import annotations

import enum
from typing import NamedTuple, Optional, Tuple

from torchnumlint.record import Record


class Safety(str, enum.Enum):
    """How far a rule's fix can be trusted.

    SAFE: same values (float tolerance) wherever the original is finite; applied by --fix.
    UNSAFE: changes results; applied only with --unsafe-fixes.
    GUIDE: the rule explains what to do but does not rewrite code.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    GUIDE = "guide"


class Edit(NamedTuple):
    """Replace text[start:end] (character offsets) with `content`; rows/columns are 1-based."""

    start: int
    end: int
    content: str
    location: Tuple[int, int] = (0, 0)
    end_location: Tuple[int, int] = (0, 0)


class Fix(NamedTuple):
    edits: Tuple[Edit, ...]
    safety: Safety


class Finding(Record):
    __slots__ = _fields = ("code", "name", "message", "path", "line", "col", "end_line", "end_col", "fix", "noqa_lines", "cell")
    _hidden = ("noqa_lines",)
    code: str
    name: str
    message: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    fix: Optional[Fix]
    # Lines whose noqa comment suppresses this finding (its own, and the first and last
    # line of the statement that holds it): neither compared nor shown.
    noqa_lines: Tuple[int, ...]
    # In a notebook, the 1-based number of the cell; rows (here and in the fix) are the cell's.
    cell: Optional[int]

    def __init__(
        self,
        code: str,
        name: str,
        message: str,
        path: str,
        line: int,
        col: int,
        end_line: int,
        end_col: int,
        fix: Optional[Fix] = None,
        noqa_lines: Tuple[int, ...] = (),
        cell: Optional[int] = None,
    ) -> None:
        self.code, self.name, self.message, self.path = code, name, message, path
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.fix, self.noqa_lines, self.cell = fix, noqa_lines, cell

    @property
    def sort_key(self) -> Tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    @property
    def where(self) -> str:
        """`line:col`, or `cell N:line:col` in a notebook, as ruff writes them after the path."""
        return f"{self.line}:{self.col}" if self.cell is None else f"cell {self.cell}:{self.line}:{self.col}"


def fixable(finding: Finding, unsafe: bool) -> bool:
    """Whether `--fix` applies the finding's fix (UNSAFE ones only with `--unsafe-fixes`)."""
    if finding.fix is None:
        return False
    return finding.fix.safety is Safety.SAFE or (unsafe and finding.fix.safety is Safety.UNSAFE)
