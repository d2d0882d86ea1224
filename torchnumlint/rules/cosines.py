"""What a cosine is: the values in [-1, 1] that rounding pushes onto or past the edge.

Shared by the rules that ask it: acos/asin of a cosine (TNL208) and the cosine similarity written
by hand (TNL203). Measured on torch 2.13, CPU: `F.cosine_similarity(a, a)` of random 64-d float32
vectors exceeds 1 in 431 of 2000 draws (at most 1.00000036), the dot product of two
`F.normalize`d copies of one vector in 208 of 1000 (at most 1.00000024).

- `norm_of(ctx, expr)`: the call that takes a 2-norm (`x.norm(dim=d)`, `torch.norm`,
  `torch.linalg.norm`, `torch.linalg.vector_norm`), or None.
- `is_unit(ctx, expr)`: `F.normalize(x)` or `x / x.norm(...)` of the same x, through names.
- `manual_cosine(ctx, num, den)`: `(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))` in its
  spellings, as a `ManualCosine` (TNL203's site and its fix's parts).
- `cosine_evidence(ctx, expr)`: why `expr` is a cosine, as a phrase for a message, or None: a
  cosine similarity, a dot product of unit vectors (`*` then `sum`, `@`, `matmul`, `bmm`, `dot`,
  `einsum`), a dot product over the norms, a component of a unit vector (a quaternion's scalar
  part), or the rotation angle's `(trace(R) - 1) / 2`.
- `rotation_matrix(ctx, expr)`: the R of `(trace(R) - 1) / 2`, whose own origin decides whether
  rounding can pass 1 (TNL208 asks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.shapes import through_shape

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

NORMS = ("norm", "linalg_norm", "vector_norm")
_COSINE_SIMILARITY = {"torch.nn.functional.cosine_similarity", "torch.cosine_similarity"}
_PRODUCTS = {"torch.matmul", "torch.mm", "torch.bmm", "torch.dot", "torch.inner", "torch.einsum"}
_TRACE = {"torch.trace"}
_DIAGONAL = {"torch.diagonal"}
ROTATION_COSINE = "the cosine of a rotation angle, (trace(R) - 1) / 2"


def norm_of(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """The 2-norm call `expr` is (names and shape steps followed: `x.norm(dim=1)[:, None]`), as a
    `CallMatch`; None for anything else (a norm of another order, `self.norm(h)`: a module)."""
    match = match_call(ctx.imports, strip_parens(through_shape(ctx, expr)), *NORMS)
    if match is None or (match.form == "method" and isinstance(match.input, cst.Name) and match.input.value == "self"):
        return None
    order = match.arg("p") if match.op.name == "norm" else match.arg("ord")
    if order is not None and number_value(strip_parens(order)) != 2:
        return None
    return match


def _unguarded(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    """`d` under the guards that keep a norm (or a product of them) from 0: `d + eps`,
    `d.clamp(min=eps)`, `d.clamp_min(eps)`, `torch.clamp(d, min=eps)`."""
    expr = strip_parens(ctx.resolve(expr))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return strip_parens(expr.left)
    match = match_call(ctx.imports, expr, "clamp", "clamp_min", "clip")
    if match is not None:
        return strip_parens(match.input)
    return expr


def _norms(ctx: "FileContext", den: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, ...]]:
    """The vectors whose norms `den` multiplies (`a.norm() * b.norm()`, or one norm), guards
    stripped; None where `den` is no such product."""
    den = _unguarded(ctx, den)
    if isinstance(den, cst.BinaryOperation) and isinstance(den.operator, cst.Multiply):
        left, right = norm_of(ctx, den.left), norm_of(ctx, den.right)
        if left is not None and right is not None:
            return (left.input, right.input)
        return None
    single = norm_of(ctx, den)
    return (single.input,) if single is not None else None


def is_unit(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """`F.normalize(x, ...)` or `x / x.norm(...)` (the same x), through names and shape steps."""
    value = strip_parens(through_shape(ctx, expr))
    if match_call(ctx.imports, value, "normalize") is not None:
        return True
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
        norms = _norms(ctx, value.right)
        return norms is not None and len(norms) == 1 and same_code(ctx, norms[0], value.left)
    return False


def _factors(expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return strip_parens(expr.left), strip_parens(expr.right)
    return None


def _dot_operands(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(a, b) of a dot product: `(a * b).sum(...)`, `torch.sum(a * b, ...)`, `a @ b`,
    `torch.matmul/mm/bmm/dot/inner(a, b)`, `torch.einsum(spec, a, b)`."""
    expr = strip_parens(expr)
    summed = match_call(ctx.imports, expr, "sum")
    if summed is not None:
        return _factors(ctx.resolve(summed.input))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
        return strip_parens(expr.left), strip_parens(expr.right)
    if isinstance(expr, cst.Call) and ctx.qualname(expr.func) in _PRODUCTS:
        tensors = [a.value for a in expr.args if a.keyword is None and not a.star]
        if ctx.qualname(expr.func) == "torch.einsum":
            tensors = tensors[1:]
        if len(tensors) == 2:
            return strip_parens(tensors[0]), strip_parens(tensors[1])
    return None


@dataclass(frozen=True)
class ManualCosine:
    """`dot / (|a| |b|)` written by hand: the two vectors, the dot product's sum call and the
    norms' calls (for the dims a fix needs)."""

    a: cst.BaseExpression
    b: cst.BaseExpression
    dot: cst.BaseExpression


def manual_cosine(ctx: "FileContext", num: cst.BaseExpression, den: cst.BaseExpression) -> Optional[ManualCosine]:
    """`num / den` as a cosine similarity written by hand: a dot product of a and b over the
    product of their 2-norms (either order, guards on the denominator allowed); else None."""
    dot = strip_parens(ctx.resolve(num))
    operands = _dot_operands(ctx, dot)
    norms = _norms(ctx, den)
    if operands is None or norms is None or len(norms) != 2:
        return None
    a, b = (through_shape(ctx, side, names=False) for side in operands)  # `y.T` is y's rows
    x, y = norms
    if (same_code(ctx, a, x) and same_code(ctx, b, y)) or (same_code(ctx, a, y) and same_code(ctx, b, x)):
        return ManualCosine(a, b, dot)
    return None


def _trace(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """R of `torch.trace(R)`, `R.trace()`, `R.diagonal(...).sum(-1)`, `torch.einsum("...ii", R)`,
    or `R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]`; None for anything else."""
    expr = strip_parens(ctx.resolve(expr))
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        if qual in _TRACE and expr.args:
            return expr.args[0].value
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "trace" and not expr.args:
            return expr.func.value
        if qual == "torch.einsum" and len(expr.args) == 2 and isinstance(expr.args[0].value, cst.SimpleString):
            spec = expr.args[0].value.evaluated_value
            return expr.args[1].value if isinstance(spec, str) and "ii" in spec.split("->")[0] else None
        summed = match_call(ctx.imports, expr, "sum")
        if summed is not None:
            inner = strip_parens(summed.input)
            if isinstance(inner, cst.Call) and ctx.qualname(inner.func) in _DIAGONAL and inner.args:
                return inner.args[0].value
            if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "diagonal":
                return inner.func.value
        return None
    terms = 0
    while isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        if not isinstance(strip_parens(expr.right), cst.Subscript):
            return None
        terms += 1
        expr = strip_parens(expr.left)
    return expr.value if terms == 2 and isinstance(expr, cst.Subscript) else None


def rotation_matrix(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The matrix R of `(trace(R) - 1) / 2` or `0.5 * (trace(R) - 1)` (the cosine of a rotation
    matrix's angle), or None where `expr` is not that form."""
    expr = strip_parens(expr)
    magnitude = match_call(ctx.imports, expr, "abs")
    if magnitude is not None:
        expr = strip_parens(ctx.resolve(magnitude.input))
    if not isinstance(expr, cst.BinaryOperation):
        return None
    if isinstance(expr.operator, cst.Divide) and number_value(strip_parens(expr.right)) == 2:
        inner = expr.left
    elif isinstance(expr.operator, cst.Multiply) and number_value(strip_parens(expr.left)) == 0.5:
        inner = expr.right
    else:
        return None
    inner = strip_parens(ctx.resolve(inner))
    if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract) and number_value(strip_parens(inner.right)) == 1:
        return _trace(ctx, inner.left)
    return None


def cosine_evidence(ctx: "FileContext", value: cst.BaseExpression) -> Optional[str]:
    """Why `value` (one origin of a value, names already followed) is a cosine, or None. Its
    magnitude (`abs`, the sign-free angle of a quaternion) is one too."""
    value = strip_parens(value)
    magnitude = match_call(ctx.imports, value, "abs")
    if magnitude is not None:
        value = strip_parens(ctx.resolve(magnitude.input))
    if isinstance(value, cst.Call) and ctx.qualname(value.func) in _COSINE_SIMILARITY:
        return "a cosine similarity"
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
        if manual_cosine(ctx, value.left, value.right) is not None:
            return "a dot product over the norms"
    if rotation_matrix(ctx, value) is not None:
        return ROTATION_COSINE
    operands = _dot_operands(ctx, value)
    if operands is not None and all(is_unit(ctx, ctx.resolve(side)) for side in operands):
        return "a dot product of unit vectors"
    if is_unit(ctx, value):
        return "a component of a unit vector"
    return None
