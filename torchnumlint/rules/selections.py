"""Values computed everywhere and selected afterwards: `torch.where(c, a, b)` and
`a.masked_fill(m, v)`.

Both evaluate every entry of their branches; the forward keeps one branch's entry, but the
backward multiplies the other's local derivative by 0, and 0 * inf (the derivative of `log`,
`sqrt` or `1 / x` at 0) is NaN. `enclosing_selection` says whether the node being visited lies in
such a branch, which branch, and under which condition it is kept; `mentions` whether that
condition tests the value (the author's own edge test: the value reaches the edge there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Set

import libcst as cst

from torchnumlint.rules.guarding import is_eps_like
from torchnumlint.rules.syntax import code_key, number_value, strip_parens
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import match_call
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

MASKED_FILL_METHODS = frozenset({"masked_fill", "masked_fill_"})
# expression nodes a branch's value passes through on its way to the selection
_THROUGH = (
    cst.BinaryOperation,
    cst.UnaryOperation,
    cst.Call,
    cst.Attribute,
    cst.Subscript,
    cst.Arg,
    cst.SubscriptElement,
    cst.Index,
    cst.Tuple,
    cst.List,
    cst.Element,
)


@dataclass(frozen=True)
class Selection:
    """A `torch.where` or `masked_fill` whose branch holds the visited node: `condition` (the
    where's condition, the fill's mask) and `kept_if`, the condition's value where that branch
    is kept (the where's first branch: True; its second and a fill's receiver: False)."""

    call: cst.Call
    condition: cst.BaseExpression
    kept_if: bool
    form: str  # "where" or "masked_fill"


def enclosing_selection(ctx: "FileContext") -> Optional[Selection]:
    """The nearest `torch.where(c, a, b)` / `x.masked_fill(m, v)` whose kept-or-dropped branch
    holds the visited node (not its condition, not its fill value), within one expression."""
    stack = ctx.stack
    for i in range(len(stack) - 2, 0, -1):
        node, child, above = stack[i], stack[i + 1], stack[i - 1]
        if not isinstance(node, _THROUGH):
            return None
        if isinstance(node, cst.Arg) and isinstance(above, cst.Call) and ctx.qualname(above.func) == "torch.where":
            args = above.args
            if len(args) == 3 and all(a.keyword is None for a in args) and node is not args[0]:
                return Selection(above, args[0].value, node is args[1], "where")
            return None
        if (
            isinstance(node, cst.Attribute)
            and node.value is child
            and node.attr.value in MASKED_FILL_METHODS
            and isinstance(above, cst.Call)
            and above.args
        ):
            return Selection(above, above.args[0].value, False, "masked_fill")
    return None


def edge_value(ctx: "FileContext", condition: cst.BaseExpression, value: cst.BaseExpression) -> Optional[bool]:
    """The condition's truth where `value` is 0, when it tests `value` against 0 or a small
    positive guard (`x > 0`, `n != 0`, `d.abs() > eps`, `0 < x`, `(x > 0) & valid`, `~(n == 0)`,
    a name assigned one of these); None where it does not say. A selection drops the edge when
    this differs from the branch's `kept_if`."""
    cond = strip_parens(condition)
    resolved = strip_parens(ctx.resolve(cond))
    if resolved is not cond and not isinstance(resolved, cst.Name):
        return edge_value(ctx, resolved, value)
    if isinstance(cond, cst.UnaryOperation) and isinstance(cond.operator, cst.BitInvert):
        inner = edge_value(ctx, cond.expression, value)
        return None if inner is None else not inner
    if isinstance(cond, cst.BinaryOperation) and isinstance(cond.operator, cst.BitAnd):
        sides = [edge_value(ctx, side, value) for side in (cond.left, cond.right)]
        return False if False in sides else None
    if not isinstance(cond, cst.Comparison) or len(cond.comparisons) != 1:
        return None
    left, target = strip_parens(cond.left), cond.comparisons[0]
    right, operator = strip_parens(target.comparator), target.operator
    flipped = {
        cst.GreaterThan: cst.LessThan,
        cst.LessThan: cst.GreaterThan,
        cst.GreaterThanEqual: cst.LessThanEqual,
        cst.LessThanEqual: cst.GreaterThanEqual,
    }
    if _is_value(ctx, right, value) and not _is_value(ctx, left, value):
        left, right = right, left
        operator = flipped.get(type(operator), type(operator))()  # type: ignore[abstract]  # the class of an operator node: concrete
    if not _is_value(ctx, left, value) or not _small(ctx, right):
        return None
    zero = number_value(right) == 0
    truth = {
        cst.GreaterThan: False,
        cst.GreaterThanEqual: zero,
        cst.LessThan: not zero,
        cst.LessThanEqual: True,
        cst.Equal: zero,
        cst.NotEqual: not zero,
    }
    return truth.get(type(operator))


def _is_value(ctx: "FileContext", expr: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`expr` is `value`, or its absolute value (`d.abs() > eps`)."""
    if code_key(ctx, expr) == code_key(ctx, value):
        return True
    absolute = match_call(ctx.imports, expr, "abs")
    return absolute is not None and code_key(ctx, absolute.input) == code_key(ctx, value)


def _small(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """0, or a small positive guard: a literal up to 1e-3, `eps`, `finfo(...).tiny`."""
    number = number_value(expr)
    if number is not None:
        return 0 <= number <= 1e-3
    return is_eps_like(ctx, expr)


def mentions(ctx: "FileContext", condition: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """Whether `condition` (or the one assignment of a name it is) reads `value`, written the
    same: `x > 0` of `log(x)`, `n == 0` of `s / n`, `mask = d.abs() > eps` of `1 / d`."""
    target = code_key(ctx, value)
    return target in _parts(ctx, condition) or target in _parts(ctx, ctx.resolve(condition))


def plain_condition(expr: cst.BaseExpression) -> bool:
    """Recomputing the condition gives the same mask (`bindings.is_plain`, and comparisons of plain
    values: `x > 0`, `(n != 0) & valid`), so a fix may write it twice."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Comparison):
        return is_plain(strip_parens(expr.left)) and all(is_plain(strip_parens(c.comparator)) for c in expr.comparisons)
    if isinstance(expr, cst.BinaryOperation):
        return plain_condition(expr.left) and plain_condition(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return plain_condition(expr.expression)
    return is_plain(expr)


def _parts(ctx: "FileContext", expr: cst.BaseExpression) -> Set[str]:
    found: Set[str] = set()

    class _Parts(Visitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.BaseExpression):
                found.add(code_key(ctx, node))
            return super().on_visit(node)

    _Parts().walk(strip_parens(expr))
    return found
