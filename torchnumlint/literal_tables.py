"""Large literal tables kept out of LibCST: a dict display of constants, assigned at module or
class level, is given to LibCST as an empty `{}` of the same length and lines (`prepass.mask`);
so are the constant displays among the values of a large dict that is not all constants (a
table keyed by `torch.float16`, or by functions: `{torch.abs: [{"name": "self"}], ...}`).

Why: a table of numbers costs LibCST ~1,000-1,300 bytes of tree per byte of source, and no rule
can report inside one, yet the statement is kept (every module-level assignment is: a kept
function may read the name). torch's `sparse/_triton_ops_meta.py` is one 467 KB dict of tuned
kernel parameters (a 0.63 GB tree in one worker, the process tree's peak), and
`testing/_internal/generated/annotated_fn_args.py` a 529 KB dict of argument lists.

What the rules can read of such a dict, and why `{}` reads the same (the rules as of this
module; `tests/test_literal_tables.py` proves it on real code, and fails when `{}` is judged
otherwise on purpose):

- A name is followed to its assignment (`FileContext.binding`, `origins`, `chain`); the value
  reached is then judged by its node type and, for lists and tuples, element by element
  (`zeros`, `exponents`, `value_steps`, `evidence`, `mask_origin`, ...). No rule, shared
  matcher or context helper looks at the items of a `cst.Dict`: it is judged as a dict, and the
  stand-in is one. So a dict's items are out of every reader's reach: the displays among them
  may be emptied whatever their kind (a list as `[]`, a tuple as `()`; never a set, whose
  empty form is no display). A list or tuple assigned whole is read element by element
  (`x / SCALES[2]`), and is never replaced.
- The generic walks (names read, name counts, calls, attributes, `finfo`, caller notes) find
  nothing in a display of constants but the names `None`, `True` and `False`, and every such
  walk asks about a name that can be bound or imported, which a keyword cannot be.
- Nothing a rule rewrites contains the dict: a fix replaces the node it judged, and a dict
  display is judged only whole, as a dict (no rule rewrites one); positions and fixes are
  computed on a text of the same length and lines, and the comments and noqa directives are
  read from the original text. A table whose text says noqa is left alone all the same.

A dict is constant when it holds only numbers, strings, bytes, `None`/`True`/`False`, `...`,
signed numbers and nested list, tuple, set and dict displays (no f-string, no name, no call, no
`**`). Only a dict assigned whole of at least `MIN_TABLE` characters is looked at: below that
the tree saved is a few MB, and every such dict is measured before it is walked.
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
_EMPTIED = (ast.Dict, ast.List, ast.Tuple)  # a set has no empty display: `{}` is a dict
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


def _constant_dicts(value: ast.Dict, lines: Lines, inside: bool = False) -> Iterator[Display]:
    """`value` if it is a large constant dict; else, in its values, every constant display and
    the same again in each dict (a table keyed by `torch.float16`, or by functions, with
    constant values: no reader gets past the dict to them). Only a dict assigned whole
    (`inside` False) must be `MIN_TABLE` long."""
    if not inside and _length(value, lines) < MIN_TABLE:
        return
    if _constant(value):
        yield from _display(value, lines)
        return
    for item in value.values:
        if isinstance(item, _EMPTIED) and _constant(item):
            yield from _display(item, lines)
        elif isinstance(item, ast.Dict):
            yield from _constant_dicts(item, lines, True)


def _display(node: ast.expr, lines: Lines) -> Iterator[Display]:
    """The span of `node` to empty, unless it says noqa, or is already empty, or its brackets
    are not its first and last characters (a tuple without parentheses)."""
    start, end = _span(node, lines)
    text = lines.text
    if end - start > 2 and text[start] + text[end - 1] in ("{}", "[]", "()") and _NOQA.search(text, start, end) is None:
        yield Display(start, end)


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
