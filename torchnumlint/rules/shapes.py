"""Shared matchers for roots: what a square root (or fractional power) is taken of.

A root's hazard is at 0: `sqrt` of a value that reaches 0 has an infinite derivative there, so
the backward pass gives inf or 0 * inf = NaN (and a value that rounds below 0 is a forward NaN).
Which roots reach 0 is read from how their argument is built, by construction:

- `root_of`: `sqrt`, `rsqrt`, `** 0.5`, a fractional `pow`, in every spelling, and a power to a
  tensor exponent in (0, 1) by construction (`exponents.py`: a sigmoid, a learned exponent
  created there);
- `square_base`: `x ** 2`, `x.pow(2)`, `torch.square(x)`, `x * x`;
- `sum_of_squares` / `norms_of_squares`: a 2-norm written by hand (one sum of squares, or a
  product of them, as in a cosine's denominator), which `torch.linalg.vector_norm` computes
  exactly; `vector_norm_fix` writes that rewrite;
- `root_hazard`: every other argument that reaches 0 or rounds below it (a variance, a
  difference, a mean of squares, a reduction chain of squares, an elementwise square, an
  element-wise sum of squares `gx * gx + gy * gy`, a quadratic form `v @ M @ v`);
- `summed_squares` / `is_finite_difference`: the components of a length written element-wise,
  and differences of neighbouring entries (an image's gradient), which are 0 in a flat region.

Shape-only and value-preserving steps (`unsqueeze`, `view`, `.float()`, `[..., None]`,
indexing, ...) keep every zero of what they are applied to, so `through_shape` looks through
them: `n.unsqueeze(-1)` is a norm wherever `n` is one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.exponents import fractional_exponent
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.number_kinds import is_constant, is_positive
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import CallMatch, match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.rules.candidate_tree import CandidateTree
    from torchnumlint.context import FileContext, FixBuilder
    from torchnumlint.rules.base import Rule

# Methods and attributes that change a tensor's shape, dtype or device, never a value's zero:
# a norm stays a norm under them. (Reductions, `repeat` with sums, `clamp` are not here.)
SHAPE_STEPS = vocabulary.SAME_VALUES | vocabulary.DETACH
SHAPE_ATTRIBUTES = vocabulary.SHAPE_ATTRIBUTES


def shape_step(ctx: "FileContext", expr: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """What a shape-only or value-preserving step is applied to (`n` in `n.unsqueeze(-1)`,
    `n.float()[:, None]`'s `n.float()`, `n.T`), or None when `expr` is no such step."""
    if isinstance(expr, cst.Subscript):
        return expr.value
    if isinstance(expr, cst.Attribute) and expr.attr.value in SHAPE_ATTRIBUTES:
        return expr.value
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in SHAPE_STEPS
        and not ctx.imports.is_module_ref(expr.func.value)
    ):
        return expr.func.value
    return None


def through_shape(ctx: "FileContext", expr: cst.BaseExpression, names: bool = True) -> cst.BaseExpression:
    """`expr` without its shape-only steps, following names to their assignment (`names`): the
    value whose zeros `expr` has. The node returned is the code's own (parentheses kept), so a
    fix can replace it."""
    for _ in range(12):
        if names and isinstance(expr, cst.Name):
            resolved = ctx.resolve(expr)
            if resolved is expr:
                return expr
            expr = resolved
            continue
        inner = shape_step(ctx, expr)
        if inner is None:
            return expr
        expr = inner
    return expr


# ---------------------------------------------------------------------------------------------
# Squares and roots


def square_base(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x ** 2`, `x.pow(2)`, `torch.pow(x, 2)`, `torch.square(x)`, `x * x` (plain x): x."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Power) and number_value(expr.right) == 2:
            return expr.left
        if isinstance(expr.operator, cst.Multiply) and is_plain(expr.left) and same_code(ctx, expr.left, expr.right):
            return expr.left
        return None
    match = match_call(ctx.imports, expr, "pow", "square")
    if match is None or not match.fully_known:
        return None
    if match.op.name == "pow":
        exponent = match.arg("exponent")
        return match.input if exponent is not None and number_value(exponent) == 2 else None
    return match.input if not match.args else None


def may_square(tree: "CandidateTree") -> bool:
    """The candidate test of `square_base` on CPython's tree: `x ** 2` (a literal 2, signed `+` or
    not), `x * x` (one operand written twice), or a call of `pow` or `square` by name."""
    if tree.has_word("pow", "square"):
        return True
    for node in tree.nodes(ast.BinOp):
        if isinstance(node.op, ast.Pow) and _literal_two(node.right):
            return True
        if isinstance(node.op, ast.Mult) and ast.dump(node.left) == ast.dump(node.right):
            return True
    return False


def _literal_two(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 2


def _fraction(expr: Optional[cst.BaseExpression]) -> Optional[float]:
    value = number_value(expr) if expr is not None else None
    return value if value is not None and value != int(value) else None


def root_of(ctx: "FileContext", node: cst.CSTNode) -> Optional[Tuple[str, cst.BaseExpression]]:
    """A square root, reciprocal root or fractional power: (`"sqrt"`/`"rsqrt"`/`"pow"`, its base).
    The in-place `d.pow_(-0.5)` is one too (`in_place` tells a rule that no rewrite of its base
    keeps what it does to `d`)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        if _fraction(strip_parens(node.right)) is not None:
            return ("sqrt" if number_value(strip_parens(node.right)) == 0.5 else "pow"), node.left
        return ("pow", node.left) if fractional_exponent(ctx, node.right) else None
    if in_place(node):
        exponent = node.args[0].value if len(node.args) == 1 else None  # type: ignore[attr-defined]
        return ("pow", node.func.value) if _fraction(strip_parens(exponent)) is not None else None  # type: ignore[arg-type, attr-defined]
    match = match_call(ctx.imports, node, "sqrt", "rsqrt", "pow")
    if match is None or not match.fully_known:
        return None
    if match.op.name == "pow":
        exponent = match.arg("exponent")
        if _fraction(exponent) is None:
            return ("pow", match.input) if fractional_exponent(ctx, exponent) else None
        return ("sqrt" if number_value(exponent) == 0.5 else "pow"), match.input
    if match.args:
        return None
    return match.op.name, match.input


def in_place(node: cst.CSTNode) -> bool:
    """`d.pow_(p)`: a power that overwrites its base."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "pow_"


def reciprocal(ctx: "FileContext", node: cst.CSTNode) -> bool:
    """A root `root_of` found whose exponent is negative (`rsqrt`, `d ** -0.5`, `d.pow(-0.5)`):
    Inf in the forward pass where its base is 0, not only an infinite gradient."""
    if isinstance(node, cst.BinaryOperation):
        return (number_value(strip_parens(node.right)) or 0) < 0
    if in_place(node):
        return (number_value(strip_parens(node.args[0].value)) or 0) < 0  # type: ignore[attr-defined]
    match = match_call(ctx.imports, node, "rsqrt", "pow")
    if match is None:
        return False
    if match.op.name == "rsqrt":
        return True
    exponent = match.arg("exponent")
    return exponent is not None and (number_value(strip_parens(exponent)) or 0) < 0


# ---------------------------------------------------------------------------------------------
# Norms written by hand


@dataclass(frozen=True)
class SumOfSquares:
    """`(x ** 2).sum(d)`: `base` is x, `total` the sum; `site` is the node of the root's argument
    that stands for the sum (the call itself, or a name assigned it), under the argument's
    shape-only steps: replacing `site` by `vector_norm(x, dim=d)` gives the root's value."""

    base: cst.BaseExpression
    total: CallMatch
    site: cst.BaseExpression


def _sum_of_squares_at(ctx: "FileContext", site: cst.BaseExpression, use: cst.CSTNode) -> Optional[SumOfSquares]:
    total = ctx.resolve(site)
    match = match_call(ctx.imports, total, "sum")
    if match is None or not match.fully_known or set(match.args) - {"dim", "keepdim"}:
        return None
    base = square_base(ctx, ctx.resolve(match.input))
    if base is None:
        return None
    followed = total is not site or ctx.resolve(match.input) is not match.input
    if followed and ctx.rebound_between(base, use):
        return None
    return SumOfSquares(base, match, site)


def sum_of_squares(ctx: "FileContext", expr: cst.BaseExpression, use: cst.CSTNode) -> Optional[SumOfSquares]:
    """`(x ** 2).sum(d)` and its spellings, through names and under shape-only steps
    (`(x ** 2).sum(-1).unsqueeze(-1)`). None when a name x reads is bound again before `use`."""
    site = expr
    for _ in range(8):
        found = _sum_of_squares_at(ctx, site, use)
        if found is not None:
            return found
        inner = shape_step(ctx, site)
        if inner is None:
            return None
        site = inner
    return None


def norms_of_squares(ctx: "FileContext", expr: cst.BaseExpression, use: cst.CSTNode) -> List[SumOfSquares]:
    """The sums of squares whose product `expr` is (one, or the two factors of
    `(a * a).sum(-1) * (b * b).sum(-1)`, a cosine's denominator), or [] for anything else.
    Its root is exactly the product of their 2-norms."""
    single = sum_of_squares(ctx, expr, use)
    if single is not None:
        return [single]
    product = strip_parens(expr)
    if not (isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply)):
        return []
    factors = [sum_of_squares(ctx, side, use) for side in (product.left, product.right)]
    found = [f for f, side in zip(factors, (product.left, product.right)) if f is not None and f.site is side]
    return found if len(found) == len(factors) else []


def _vector_norm(fix: "FixBuilder", ctx: "FileContext", found: SumOfSquares) -> str:
    code = ctx.module.code_for_node
    parts = [code(strip_parens(found.base))]
    for name in ("dim", "keepdim"):
        value = found.total.arg(name)
        if value is not None:
            parts.append(f"{name}={code(value)}")
    return f"{code(fix.ref('torch.linalg.vector_norm'))}({', '.join(parts)})"


def vector_norm_fix(rule: "Rule", root: cst.CSTNode, arg: cst.BaseExpression, found: List[SumOfSquares]):
    """`root` (a root of `arg`, the product of the sums of squares `found`) rewritten exactly:
    `torch.linalg.vector_norm(x, dim=d, keepdim=k)`, with the argument's shape-only steps kept
    (`...sum(-1).unsqueeze(-1).sqrt()` -> `vector_norm(x, dim=-1).unsqueeze(-1)`), or the product
    of two norms (in parentheses where it is an operand)."""
    fix = rule.fix()
    ctx = rule.ctx
    norms = [_vector_norm(fix, ctx, f) for f in found]
    if len(norms) == 1:
        new = cst.parse_expression(norms[0])
        site = found[0].site
        if site is not arg:
            new = arg.deep_replace(site, new)
            new = new.with_changes(lpar=[], rpar=[]) if getattr(new, "lpar", None) else new
    else:
        text = " * ".join(norms)
        operand = isinstance(ctx.parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute, cst.Subscript))
        new = cst.parse_expression(f"({text})" if operand else text)
    fix.replace(root, new)
    return fix


# ---------------------------------------------------------------------------------------------
# Reductions of squares and quadratic forms


def reduced_square(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, List[str]]]:
    """A chain of sums and means (with shape-only steps between) ending in a square:
    `((a - b) ** 2).sum(-1).mean()` -> (a - b, ["mean", "sum"]); `x ** 2` -> (x, []). Non-negative,
    and 0 where the squared values are."""
    reductions: List[str] = []
    for _ in range(8):
        expr = through_shape(ctx, expr)
        base = square_base(ctx, expr)
        if base is not None:
            return base, reductions
        match = match_call(ctx.imports, expr, "sum", "mean")
        if match is None or not match.fully_known:
            return None
        reductions.append(match.op.name)
        expr = match.input
    return None


def _untransposed(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    expr = strip_parens(expr)
    if isinstance(expr, cst.Attribute) and expr.attr.value in SHAPE_ATTRIBUTES:
        return strip_parens(expr.value)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("t", "transpose"):
        return strip_parens(expr.func.value)
    return expr


def quadratic_form(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """v in `v @ M @ v` (`v.T @ M @ v` too), `(v * (v @ M)).sum(-1)`, `((v @ M) * v).sum(-1)`,
    `torch.einsum("bi,ij,bj->b", v, M, v)`: a squared Mahalanobis length, 0 at v = 0 (and rounding below 0 for a nearly singular M)."""
    value = strip_parens(ctx.resolve(expr))
    einsum = _einsum_form(ctx, value)
    if einsum is not None:
        return einsum
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.MatrixMultiply):
        left = strip_parens(value.left)
        if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.MatrixMultiply):
            if same_code(ctx, _untransposed(ctx, left.left), _untransposed(ctx, value.right)):
                return value.right
        return None
    total = match_call(ctx.imports, value, "sum")
    if total is None or not total.fully_known:
        return None
    product = strip_parens(ctx.resolve(total.input))
    if not (isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply)):
        return None
    for v, mapped in ((product.left, product.right), (product.right, product.left)):
        mapped = strip_parens(mapped)
        if (
            isinstance(mapped, cst.BinaryOperation)
            and isinstance(mapped.operator, cst.MatrixMultiply)
            and same_code(ctx, mapped.left, v)
            and is_plain(v)
        ):
            return v
    return None


def _einsum_form(ctx: "FileContext", value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """v in `torch.einsum("bi,ij,bj->b", v, M, v)`: the same plain operand on both sides of a
    matrix, each of its indices contracted with one of the matrix's (a batched `v @ M @ v`)."""
    if not (isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.einsum" and len(value.args) == 4):
        return None
    spec = strip_parens(value.args[0].value)
    if not isinstance(spec, cst.SimpleString) or any(a.keyword is not None or a.star for a in value.args):
        return None
    text = "".join(str(spec.evaluated_value).split())
    inputs, _, _ = text.partition("->")
    terms = inputs.split(",")
    left, right = strip_parens(value.args[1].value), strip_parens(value.args[3].value)
    if len(terms) != 3 or len(terms[1]) != 2 or not is_plain(left) or not same_code(ctx, left, right):
        return None
    first, second = terms[1][0], terms[1][1]
    left_only, right_only = set(terms[0]) - set(terms[2]), set(terms[2]) - set(terms[0])
    if left_only == {first} and right_only == {second} and first != second:
        return left
    return None


def summed_squares(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
    """The bases of an element-wise sum of two or more squares (`gx * gx + gy * gy`,
    `dx ** 2 + dy.pow(2) + dz ** 2`, a term through a name), or None: the squared length of a
    vector held in separate tensors, 0 wherever every component is. A constant term (`+ eps`)
    or a square of a constant makes it no such sum."""
    bases: List[cst.BaseExpression] = []
    pending = [strip_parens(expr)]
    while pending:
        term = pending.pop()
        if isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Add):
            pending += [strip_parens(term.right), strip_parens(term.left)]
            continue
        base = square_base(ctx, ctx.resolve(term))
        if base is None or is_constant(ctx, base):
            return None
        bases.append(base)
    return bases if len(bases) >= 2 else None


def is_finite_difference(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Differences of neighbouring entries of one tensor, under shape-only steps and through
    names: `x[..., 1:] - x[..., :-1]` (the same shift k as `k:` and `:-k`, on one axis, the other
    axes indexed alike) or `torch.diff(x, dim=d)`. 0 wherever neighbours are equal: the flat
    regions of an image, a constant stretch of a signal. A box's `b[:, 2:] - b[:, :2]` is no
    shift (its sides), nor are pairwise or edge-indexed differences."""
    for _ in range(8):
        value = strip_parens(ctx.resolve(expr))
        if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.diff":
            return True
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract):
            return _shifted(ctx, strip_parens(value.left), strip_parens(value.right))
        inner = shape_step(ctx, value)
        if inner is None:
            return False
        expr = inner
    return False


def _shifted(ctx: "FileContext", left: cst.BaseExpression, right: cst.BaseExpression) -> bool:
    """`x[..., k:]` and `x[..., :-k]`: one tensor sliced at one axis into its last and first
    entries but k, every other index the same."""
    if not (isinstance(left, cst.Subscript) and isinstance(right, cst.Subscript)) or not same_code(ctx, left.value, right.value):
        return False
    if len(left.slice) != len(right.slice):
        return False
    code = ctx.module.code_for_node
    differing = [(a.slice, b.slice) for a, b in zip(left.slice, right.slice) if code(a.slice) != code(b.slice)]
    if len(differing) != 1 or not all(isinstance(s, cst.Slice) for s in differing[0]):
        return False
    head, tail = differing[0]
    return _shift(head, tail) or _shift(tail, head)  # type: ignore[arg-type]  # both are Slices: asked just before


def _shift(later: cst.Slice, earlier: cst.Slice) -> bool:
    """`k:` and `:-k`, the same positive integer k, no step."""
    if later.step is not None or earlier.step is not None or later.upper is not None or earlier.lower is not None:
        return False
    start, stop = (
        number_value(later.lower) if later.lower is not None else None,
        number_value(earlier.upper) if earlier.upper is not None else None,
    )
    return start is not None and stop is not None and start > 0 and stop == -start


# ---------------------------------------------------------------------------------------------
# What can be 0 or negative under a root


def root_hazard(ctx: "FileContext", value: cst.BaseExpression) -> Optional[str]:
    """Why a square root of `value` is unsafe (it can be 0 or negative, TNL206's set), or None.

    Deliberately narrow: a variance, a difference of tensors (or `c - t ** 2`), a mean of
    squares or any reduction chain of squares other than one sum (`((a - b) ** 2).sum(-1).mean()`),
    an elementwise square (`sqrt(x ** 2)`, an absolute value by hand), an element-wise sum of
    squares (`gx * gx + gy * gy`), a quadratic form, a sum or mean of differences or absolute
    values; under shape-only steps. Never a plain number, a guarded value (`+ eps`),
    exp/softmax/sigmoid/softplus, or one sum of squares or a product of them (TNL204's)."""
    v = strip_parens(through_shape(ctx, value))
    if is_constant(ctx, v) or is_guarded(ctx, v) or is_positive(ctx, v):
        return None
    if isinstance(v, cst.BinaryOperation):
        op = v.operator
        if isinstance(op, cst.Subtract):
            if square_base(ctx, ctx.resolve(v.right)) is not None and not is_constant(ctx, v.right):
                return "a difference"
            if not is_constant(ctx, v.left) and not is_constant(ctx, v.right):
                return "a difference"
            return None
        if isinstance(op, (cst.Multiply, cst.Divide)):
            if is_constant(ctx, v.right):
                return root_hazard(ctx, v.left)
            if isinstance(op, cst.Multiply) and is_constant(ctx, v.left):
                return root_hazard(ctx, v.right)
        if quadratic_form(ctx, v) is not None:
            return "a quadratic form"
        if square_base(ctx, v) is not None and not is_constant(ctx, square_base(ctx, v)):  # type: ignore[arg-type]  # not None: asked just before
            return "a square"
        if summed_squares(ctx, v) is not None:
            return "a sum of element-wise squares"
        return None
    if quadratic_form(ctx, v) is not None:
        return "a quadratic form"
    square = reduced_square(ctx, v)
    if square is not None:
        base, reductions = square
        if is_constant(ctx, base):
            return None
        if not reductions:
            return "a square"
        if reductions == ["sum"]:
            return None  # TNL204's: vector_norm
        return "a mean of squares" if "mean" in reductions else "a sum of squares"
    match = match_call(ctx.imports, v, "var", "sum", "mean")
    if match is None:
        return None
    if match.op.name == "var":
        return "a variance"
    inner = strip_parens(ctx.resolve(match.input))
    if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract):
        return "a sum of differences" if not (is_constant(ctx, inner.left) or is_constant(ctx, inner.right)) else None
    if match_call(ctx.imports, inner, "abs") is not None:
        return "a sum of absolute values"
    return None
