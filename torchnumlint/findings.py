"""Plain data that flows from the rules to the fixer and the reporters."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Tuple


class Safety(str, enum.Enum):
    """How far a rule's fix can be trusted.

    SAFE: same values (float tolerance) wherever the original is finite; applied by --fix.
    UNSAFE: changes results; applied only with --unsafe-fixes.
    GUIDE: the rule explains what to do but does not rewrite code.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    GUIDE = "guide"


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] (character offsets) with `content`; rows/columns are 1-based."""

    start: int
    end: int
    content: str
    location: Tuple[int, int] = (0, 0)
    end_location: Tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Fix:
    edits: Tuple[Edit, ...]
    safety: Safety


@dataclass
class Finding:
    code: str
    name: str
    message: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    fix: Optional[Fix] = None
    # Lines whose noqa comment suppresses this finding (its own, and the first and last
    # line of the statement that holds it).
    noqa_lines: Tuple[int, ...] = field(default=(), compare=False, repr=False)
    # In a notebook, the 1-based number of the cell; rows (here and in the fix) are the cell's.
    cell: Optional[int] = None

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
