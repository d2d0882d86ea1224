"""Large literal tables kept out of LibCST: a dict display of constants, assigned at module or
class level, is given to LibCST as an empty `{}` of the same length and lines (`prepass.mask`).

Why: a table of numbers costs LibCST ~1,000-1,300 bytes of tree per byte of source, and no rule
can report inside one, yet the statement is kept (every module-level assignment is: a kept
function may read the name). torch's `sparse/_triton_ops_meta.py` is one 467 KB dict of tuned
kernel parameters: a 0.63 GB tree in one worker, the process tree's peak.

What the rules can read of such a dict, and why `{}` reads the same (the rules as of this
module; `tests/test_literal_tables.py` proves it on real code, and fails when `{}` is judged
otherwise on purpose):

- A name is followed to its assignment (`FileContext.binding`, `origins`, `chain`); the value
  reached is then judged by its node type and, for lists and tuples, element by element
  (`zeros`, `exponents`, `value_steps`, `evidence`, `mask_origin`, ...). No rule, shared
  matcher or context helper looks at the items of a `cst.Dict`: it is judged as a dict, and the
  stand-in is one. So only dicts are replaced, never lists, tuples or sets, and a nested dict
  only where it is reached from the assigned value through dict values alone (a list's elements
  are read one by one).
- The generic walks (names read, name counts, calls, attributes, `finfo`, caller notes) find
  nothing in a display of constants but the names `None`, `True` and `False`, and every such
  walk asks about a name that can be bound or imported, which a keyword cannot be.
- Nothing a rule rewrites contains the dict: a fix replaces the node it judged, and a dict
  display is judged only whole, as a dict (no rule rewrites one); positions and fixes are
  computed on a text of the same length and lines, and the comments and noqa directives are
  read from the original text. A table whose text says noqa is left alone all the same.

A dict is constant when it holds only numbers, strings, bytes, `None`/`True`/`False`, `...`,
signed numbers and nested list, tuple, set and dict displays (no f-string, no name, no call, no
`**`). Only a dict of at least `MIN_TABLE` characters is replaced: below that the tree saved is a
few MB, and every dict is measured before it is walked.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator, List, Tuple

from torchnumlint.prepass import Display, Lines

# 10 KB of source: ~10-13 MB of LibCST tree.
MIN_TABLE = 10_000
_NOQA = re.compile("noqa", re.IGNORECASE)
_DISPLAYS = (ast.Dict, ast.List, ast.Tuple, ast.Set)
_SIGNS = (ast.USub, ast.UAdd)


def tables(body: List[ast.stmt], lines: Lines) -> List[Display]:
    """The spans of the large constant dicts assigned in `body` (a module's or a kept class's
    statements, and the classes in them), to be given to LibCST as `{}`."""
    found: List[Display] = []
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            found.extend(tables(stmt.body, lines))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Dict):
            found.extend(_constant_dicts(stmt.value, lines))
    return found


def _constant_dicts(value: ast.Dict, lines: Lines) -> Iterator[Display]:
    """`value` if it is a large constant dict, else the large constant dicts among its values,
    reached through dict values alone."""
    if _length(value, lines) < MIN_TABLE:
        return
    if _constant(value):
        start, end = _span(value, lines)
        if _NOQA.search(lines.text, start, end) is None:
            yield Display(start, end)
        return
    for item in value.values:
        if isinstance(item, ast.Dict):
            yield from _constant_dicts(item, lines)


def _constant(node: ast.expr) -> bool:
    """Only constants and displays of them (iterative: a table may nest deeply)."""
    stack: List[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Constant):
            continue
        if isinstance(current, ast.UnaryOp):
            if not (isinstance(current.op, _SIGNS) and isinstance(current.operand, ast.Constant)):
                return False
            continue
        if not isinstance(current, _DISPLAYS):
            return False
        if isinstance(current, ast.Dict):
            if any(key is None for key in current.keys):  # `{**other}`
                return False
            stack.extend(k for k in current.keys if k is not None)
            stack.extend(current.values)
        else:
            stack.extend(current.elts)
    return True


def _span(node: ast.expr, lines: Lines) -> Tuple[int, int]:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return lines.offset(node.lineno, node.col_offset), lines.offset(node.end_lineno, node.end_col_offset)


def _length(node: ast.expr, lines: Lines) -> int:
    start, end = _span(node, lines)
    return end - start
