"""A union written out: `p.sum() + t.sum() - (p * t).sum()`, the denominator of an IoU (Jaccard)
of two masks or soft masks.

The union is never below either part and is 0 exactly when both are (the intersection of two
non-negative values is then 0 too): a class absent from both the prediction and the labels gives
0/0 = NaN (measured, torch 2.13 CPU: an IoU of two empty masks is NaN). `union_parts` finds the
`a + b` under the subtraction, so that `divisors.zero_kind` judges it as the sum of counts it is
(each part with its own evidence). The intersection must be the product (`*`, `&`,
`torch.logical_and`, `torch.minimum`) of the two summed values, so that `a + b - c` of anything
else is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.calls import match_call
from torchnumlint.rules.shapes import through_shape
from torchnumlint.rules.syntax import same_code, strip_parens

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

_BOTH = frozenset({"torch.logical_and", "torch.minimum", "torch.min", "torch.mul"})


def union_parts(ctx: "FileContext", v: cst.BaseExpression) -> Optional[cst.BinaryOperation]:
    """The `a.sum() + b.sum()` of `a.sum() + b.sum() - (a * b).sum()` (through names and
    shape-only steps), or None."""
    v = strip_parens(v)
    if not (isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Subtract)):
        return None
    total = strip_parens(through_shape(ctx, v.left))
    if not (isinstance(total, cst.BinaryOperation) and isinstance(total.operator, cst.Add)):
        return None
    first, second = (match_call(ctx.imports, strip_parens(through_shape(ctx, side)), "sum") for side in (total.left, total.right))
    shared = match_call(ctx.imports, strip_parens(through_shape(ctx, v.right)), "sum")
    if first is None or second is None or shared is None:
        return None
    factors = _factors(ctx, strip_parens(ctx.resolve(shared.input)))
    if factors is None:
        return None
    a, b = first.input, second.input
    if (same_code(ctx, factors[0], a) and same_code(ctx, factors[1], b)) or (
        same_code(ctx, factors[0], b) and same_code(ctx, factors[1], a)
    ):
        return total
    return None


def _factors(ctx: "FileContext", product: cst.BaseExpression):
    """The two operands of `x * y`, `x & y`, `torch.logical_and(x, y)`, `torch.minimum(x, y)`."""
    if isinstance(product, cst.BinaryOperation) and isinstance(product.operator, (cst.Multiply, cst.BitAnd)):
        return product.left, product.right
    if isinstance(product, cst.Call) and ctx.qualname(product.func) in _BOTH and len(product.args) == 2:
        return product.args[0].value, product.args[1].value
    return None
