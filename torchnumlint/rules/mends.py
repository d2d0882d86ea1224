"""A result the code mends right after computing it: its infinite or non-finite entries re-filled.

`deg_inv_sqrt = deg.pow(-0.5)` followed by `deg_inv_sqrt[deg_inv_sqrt == float('inf')] = 0`
(every graph library's degree normalisation), `scale = a / b` followed by
`scale[scale.isinf()] = 1.0`, `q.masked_fill_(torch.isinf(q), 0)`, `q = torch.where(q.isfinite(),
q, 0)`, `q = q.nan_to_num(...)`: the author saw the edge and replaced what it gives before anything
reads it. In the forward pass that is a guard (measured, torch 2.13 CPU: `n / d` with d = 0 mended
this way reads 1.0), but not in the backward: the division's own gradient at the mended entry is
still 0 * inf = NaN. So a mend is a guard only where no gradient reaches the value (gradient-free
code, or a value computed from data alone); a rule asks `mended_after` and decides by that.

Only the statements right after the assignment count, up to the first one that reads the name
for anything else: a value read before it is mended has already spread its Inf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import libcst as cst

from torchnumlint.rules.syntax import strip_parens
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# Tests of an entry's finiteness: `torch.isinf(q)`, `q.isnan()`, `~torch.isfinite(q)`.
_FINITE_TESTS = frozenset({"isinf", "isnan", "isfinite", "isposinf", "isneginf"})
# Spellings of infinity a comparison can test against (`q == float('inf')`, `q == math.inf`).
_INF_ATTRIBUTES = frozenset({"inf", "infty", "Inf"})
# Statements between the assignment and its mend that do not read the name (a shape, a log line).
_LOOKAHEAD = 4


def mended_after(ctx: "FileContext", node: cst.CSTNode) -> Optional[str]:
    """The statement, as written with its line, that re-fills the non-finite entries of the name
    `node`'s value is assigned to (`q = <node>` then `q[q.isinf()] = 0`), or None."""
    line, block = _statement_and_block(ctx)
    if line is None or block is None or len(line.body) != 1:
        return None
    assign = line.body[0]
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and strip_parens(assign.value) is node
    ):
        return None
    name = assign.targets[0].target.value
    body: Sequence[cst.CSTNode] = list(block.body)
    at = next((i for i, statement in enumerate(body) if statement is line), None)
    if at is None:  # pragma: no cover - the line is in its block
        return None
    for statement in body[at + 1 : at + 1 + _LOOKAHEAD]:
        if _mends(statement, name):
            span = ctx.positions.get(statement)
            text = "`" + " ".join(ctx.module.code_for_node(statement).split()) + "`"
            return text + (f" on line {span.start.line}" if span else "")
        if _reads(statement, name):
            return None
    return None


def _statement_and_block(ctx: "FileContext"):
    """The simple statement line holding the visited node, and the block that holds that line."""
    stack = ctx.stack
    for i in range(len(stack) - 1, 0, -1):
        if isinstance(stack[i], cst.SimpleStatementLine):
            parent = stack[i - 1]
            return stack[i], (parent if isinstance(parent, (cst.IndentedBlock, cst.Module)) else None)
    return None, None


def _mends(statement: cst.CSTNode, name: str) -> bool:
    """`q[<non-finite test of q>] = c`, `q.masked_fill_(<test>, c)`, `q.nan_to_num_()`, or
    `q = q.masked_fill(<test>, c)` / `torch.where(<test>, ...)` / `q.nan_to_num()` /
    `torch.nan_to_num(q)`."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Subscript) and _is_name(target.value, name):
            return any(_tests_finite(element.slice, name) for element in target.slice) and not _reads(small.value, name)
        if _is_name(target, name):
            return _mending_call(small.value, name, in_place=False)
        return False
    return isinstance(small, cst.Expr) and _mending_call(small.value, name, in_place=True)


def _mending_call(value: cst.BaseExpression, name: str, in_place: bool) -> bool:
    value = strip_parens(value)
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    receiver = func.value if isinstance(func, cst.Attribute) else None
    on_name = receiver is not None and _is_name(receiver, name)
    if in_place:
        if method == "nan_to_num_":
            return on_name
        return on_name and method == "masked_fill_" and bool(value.args) and _tests_finite(value.args[0].value, name)
    if method == "nan_to_num":
        return on_name or (bool(value.args) and _is_name(value.args[0].value, name))
    if method == "masked_fill":
        return on_name and bool(value.args) and _tests_finite(value.args[0].value, name)
    if method == "where" and len(value.args) == 3:
        return _tests_finite(value.args[0].value, name) and any(_is_name(a.value, name) for a in value.args[1:])
    return False


def _tests_finite(node: cst.CSTNode, name: str) -> bool:
    """Whether `node` holds a finiteness test of `name`: `torch.isinf(q)`, `q.isnan()`,
    `q == float('inf')`, `q == math.inf` (in any combination, `q.isinf() | (q > 1000)`)."""
    found = False

    class _Find(Visitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _FINITE_TESTS:
                if _is_name(func.value, name) or (call.args and _is_name(call.args[0].value, name)):
                    found = True
            return True

        def visit_Comparison(self, comparison: cst.Comparison) -> bool:
            nonlocal found
            sides = [comparison.left] + [c.comparator for c in comparison.comparisons]
            if any(_is_name(s, name) for s in sides) and any(_is_inf(s) for s in sides):
                found = True
            return True

    _Find().walk(node)
    return found


def _is_inf(expr: cst.BaseExpression) -> bool:
    """`float('inf')`, `math.inf`, `torch.inf`, `np.inf`, `inf`."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "float" and expr.args:
        arg = expr.args[0].value
        text = arg.evaluated_value if isinstance(arg, cst.SimpleString) else None
        return isinstance(text, str) and text.strip().lower().lstrip("+") in ("inf", "infinity")
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _INF_ATTRIBUTES
    return isinstance(expr, cst.Name) and expr.value == "inf"


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    expr = strip_parens(expr)
    return isinstance(expr, cst.Name) and expr.value == name


def _reads(node: cst.CSTNode, name: str) -> bool:
    found = False

    class _Find(Visitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal found
            found = found or n.value == name

    _Find().walk(node)
    return found
