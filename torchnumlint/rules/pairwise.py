"""Pairwise differences by broadcasting: `a[:, None] - b[None]` (2-D rows, an N x M x D tensor)
and `a[:, :, None] - b[:, None]` (batched, B x N x M x D), also written with `unsqueeze`.

Summed over their last dimension after squaring, they are the squared Euclidean distance
matrix that `torch.cdist(a, b)` computes without the N x M x D intermediate. `pairwise_rows`
recognises the difference and says which tensors' rows are paired (in the order of the matrix's
axes), so that a root of such a sum can be rewritten as `cdist` (TNL205), and the norm rule
(TNL204) can leave the site to it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.calls import CallMatch

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext
    from torchnumlint.rules.candidate_tree import CandidateTree

# index patterns (`:` a whole axis, `N` a new one) of the two operands, by layout
_ROWS = ({":N", ":N:"}, {"N", "N:", "N::"})  # a[:, None] - b[None]: N x M x D
_BATCHED = ({"::N", "::N:"}, {":N", ":N:"})  # a[:, :, None] - b[:, None]: B x N x M x D
# `a.unsqueeze(-2) - b.unsqueeze(-3)` pairs rows whatever the batch axes before them
_UNSQUEEZED = {(1, 0): "rows", (2, 1): "batched", (-2, -3): "any"}
_LAST_AXIS = {"rows": (-1, 2), "batched": (-1, 3), "any": (-1,)}


def _pattern(expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, str]]:
    """(the indexed tensor, its pattern) for `x[:, None]`-style indexing of whole axes and new ones."""
    expr = strip_parens(expr)
    if not isinstance(expr, cst.Subscript):
        return None
    marks = []
    for element in expr.slice:
        part = element.slice
        if isinstance(part, cst.Index) and isinstance(part.value, cst.Name) and part.value.value == "None":
            marks.append("N")
        elif isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None:
            marks.append(":")
        else:
            return None
    return expr.value, "".join(marks)


def _unsqueezed(expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, int]]:
    """(the tensor, the axis) for `x.unsqueeze(k)` with a literal k."""
    expr = strip_parens(expr)
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "unsqueeze"):
        return None
    if len(expr.args) != 1:
        return None
    axis = number_value(strip_parens(expr.args[0].value))
    return (expr.func.value, int(axis)) if axis is not None and axis == int(axis) else None


def _layout(left: cst.BaseExpression, right: cst.BaseExpression) -> Optional[Tuple[str, cst.BaseExpression, cst.BaseExpression]]:
    left_index, right_index = _pattern(left), _pattern(right)
    if left_index is not None and right_index is not None:
        (a, first), (b, second) = left_index, right_index
        for layout, (lefts, rights) in (("rows", _ROWS), ("batched", _BATCHED)):
            if first in lefts and second in rights:
                return layout, a, b
        return None
    left_axis, right_axis = _unsqueezed(left), _unsqueezed(right)
    if left_axis is not None and right_axis is not None:
        (a, i), (b, j) = left_axis, right_axis
        paired = _UNSQUEEZED.get((i, j))
        return (paired, a, b) if paired is not None else None
    return None


def pairwise_rows(
    ctx: "FileContext", difference: cst.BaseExpression, total: CallMatch
) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(a, b) when `difference` is a broadcast pairwise difference of the rows of a and b, a's
    rows along the matrix's first axis (`a[None] - b[:, None]` gives (b, a): the square does not
    care for the sign), and `total` sums it over the vector
    axis, without keepdim: the sum is then the squared distance matrix of `cdist(a, b)`."""
    value = strip_parens(ctx.resolve(difference))
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract)):
        return None
    keepdim = total.arg("keepdim")
    if keepdim is not None and not (isinstance(keepdim, cst.Name) and keepdim.value == "False"):
        return None
    dim = total.arg("dim")
    axis = number_value(strip_parens(dim)) if dim is not None else None
    for left, right in ((value.left, value.right), (value.right, value.left)):
        found = _layout(left, right)  # the operand with the new axis second holds the matrix's rows
        if found is not None and axis in _LAST_AXIS[found[0]]:
            return found[1], found[2]
    return None


def may_pair_rows(tree: "CandidateTree") -> bool:
    """The candidate test of `pairwise_rows` on CPython's tree: a subtraction of two operands
    each given a new axis, as written (`_layout` follows no name to them): an index holding
    `None`, or an `unsqueeze` call."""
    return any(isinstance(node.op, ast.Sub) and _new_axis(node.left) and _new_axis(node.right) for node in tree.nodes(ast.BinOp))


def _new_axis(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(isinstance(part, ast.Constant) and part.value is None for part in parts)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze"
