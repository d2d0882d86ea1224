"""Shared matchers for divisions: every form of a division, what kind of zero its divisor has,
the evidence that the zero is reached, and the floor a clamp of it needs.

- `division_operands`: `x / d`, `x /= d`, `torch.div(x, d)`, `x.div(d)`, `x.div_(d)` (true
  division only); `replaces_whole`, `in_where` (a division selected away by `torch.where`, which
  keeps the forward finite and not the gradient), `normalize_site` (`x / x.norm(dim, keepdim=True)`).
- `zero_kind`: a divisor that can be exactly 0, as a `Divisor`: a norm, a sum, a std or variance,
  a count of mask entries, a graph degree (`degrees.py`: 0 for an isolated node), a square root of such a value (or of a root hazard, `shapes.py`), a
  product with such a factor, or a box union, area or side (`boxes.py`). Names, casts and
  shape-only steps (`n.unsqueeze(-1)`, `mask.sum(1).float()[:, None]`) are looked through: they
  keep every zero.
- `zero_evidence`: why that zero is reached for real inputs (evidence before a report,
  `evidence.py`), and whether the divisor is never negative, so that a clamp keeps its values.
- Floors: `EPS` for a clamp, `count_floor` (1 for an integer count), `floor_safety`, and
  `clamp_fix`, the one way the family writes a clamp.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Rule
from torchnumlint.rules.boxes import box_divisor
from torchnumlint.rules.candidate_tree import CandidateTree, import_targets
from torchnumlint.rules import count_sources
from torchnumlint.rules.degrees import ISOLATED, degree, read_at_endpoints
from torchnumlint.rules.edge_tests import edge_test
from torchnumlint.rules.evidence import is_data, mask_evidence, row_evidence, standardises, summand_evidence
from torchnumlint.rules.gradient_context import gradient_free
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.mask_origin import origin
from torchnumlint.rules.number_kinds import is_constant, is_positive, python_number_tree
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.unions import union_parts
from torchnumlint.rules.ways import branches, unless_asking, way_note
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import is_literal, make_op, match_call
from torchnumlint.rules.rewrite import with_clamp
from torchnumlint.rules.shapes import reduced_square, root_hazard, root_of, sum_of_squares, through_shape

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext, FixBuilder
    from torchnumlint.index import ProjectIndex
    from torchnumlint.rules.base import Rule

# The guard the unsafe fixes write. 1e-12 is F.normalize's own eps: the smallest floor whose
# reciprocal square (1e24) still fits float32/bfloat16, so the gradient of `x / d` stays finite,
# and so small that the result is unchanged wherever the original was finite in practice. A count
# is an integer: it is clamped at 1, exact wherever the original was finite, and keeps its dtype.
EPS = "1e-12"
COUNT_EPS = "1"

DIV_METHODS = ("div", "divide", "true_divide", "div_")
NORMS = ("norm", "linalg_norm", "vector_norm")


_KIND_WORDS = {
    "count": "a count",
    "norm": "a norm",
    "sum": "a sum",
    "std": "a standard deviation",
    "var": "a variance",
    "sqrt": "a square root",
    "product": "a product of norms or sums",
    "total": "a sum of counts or sums",
    "range": "a range (max - min)",
    "degree": "a graph degree",
}


@dataclass(frozen=True)
class Divisor:
    """A divisor that can be exactly 0: its `kind` (count, norm, sum, std, var, sqrt, product,
    box), the `value` that makes it (the call, under names, casts and shape-only steps), and how
    the message names it. `several`: found on one of several values the divisor may hold (an
    `if` that assigns it on both branches, `ways.branches`), which `what` names; its sign on
    the other ways is unknown, so no clamp is written for it."""

    kind: str
    value: cst.BaseExpression
    what: str
    several: bool = False
    counted: Optional[count_sources.Counted] = None  # a count made away from the division (`count_sources`)


def _divisor(kind: str, value: cst.BaseExpression) -> Divisor:
    return Divisor(kind, value, _KIND_WORDS[kind])


def zero_kind(ctx: "FileContext", d: cst.BaseExpression) -> Optional[Divisor]:
    """What kind of value that can be exactly 0 the denominator `d` is (following names, casts
    and shape-only steps); None when it cannot be 0 or is guarded."""
    if is_constant(ctx, d):
        return None
    v = through_shape(ctx, d)
    box = box_divisor(ctx, v)  # before the guards: a side clamped at 0 is still 0
    if box is not None:
        return Divisor("box", v, box[0])
    if is_constant(ctx, v) or is_guarded(ctx, v):
        return None
    several = branches(ctx, v)
    if several is not None:  # `d = a.sum() + eps` on one branch, `d = b.sum()` on the other
        for way in several:
            value = way.value
            if isinstance(value, cst.BaseExpression):
                found = unless_asking(ctx, "zero kind", value, lambda: zero_kind(ctx, value), None)
                if found is not None:
                    return found if found.several else Divisor(found.kind, found.value, found.what + way_note(ctx, way), True)
        return None
    if match_call(ctx.imports, v, "count_nonzero") is not None:
        return _divisor("count", v)
    made = count_sources.counted(ctx, d, _count_at)  # a per-class or cumulative count, or one held in an attribute or a parameter
    if made is not None:
        return Divisor("count", v, made.what, counted=made)
    found_degree = degree(ctx, d)  # `d` itself: `degree(col)[col]` picks entries never 0
    if found_degree is not None:  # `1. / deg`: Inf for an isolated node (`rules/degrees.py`)
        return _divisor("degree", v)
    match = match_call(ctx.imports, v, "sum", *NORMS, "std", "var")
    if match is not None and match.form == "method" and is_literal(match.input, "self"):
        return None  # `self.norm(h)`: a module, not Tensor.norm
    if match is not None:
        inner = match.input
        if match.op.name in ("std", "var"):
            return _divisor(match.op.name, v)
        if is_guarded(ctx, inner) or is_constant(ctx, inner):
            return None
        if match.op.name != "sum":
            return _divisor("norm", v)
        if is_positive(ctx, inner) and _underflowing_exp(ctx, inner) is None:
            return None  # positive terms; exponentials of distances are positive until they underflow
        return _divisor("count" if is_mask(ctx, inner) else "sum", v)
    if _value_range(ctx, v) is not None:
        return _divisor("range", v)
    union = union_parts(ctx, v)  # `p.sum() + t.sum() - (p * t).sum()`: 0 when both parts are
    if union is not None and zero_kind(ctx, union) is not None:
        return Divisor("total", union, "a union (two sums less their intersection)")
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
        # `pred.sum() + target.sum()` (a Dice or IoU denominator): 0 when both are; only sums
        # and counts, which are never negative when their terms are not, qualify
        parts = [zero_kind(ctx, side) for side in (v.left, v.right)]
        if all(part is not None and part.kind in ("sum", "count", "total") for part in parts):
            return _divisor("total", v)
        return None
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Multiply):
        # `a.norm(dim=-1) * b.norm(dim=-1)`: 0 as soon as one factor is
        if any(zero_kind(ctx, factor) is not None for factor in (v.left, v.right)):
            return _divisor("product", v)
        return None
    root = root_of(ctx, v)
    if root is not None and root[0] == "sqrt":
        arg = root[1]
        if root_hazard(ctx, arg) is not None or sum_of_squares(ctx, arg, v) is not None:
            return _divisor("sqrt", v)
        inner_kind = zero_kind(ctx, arg)
        if inner_kind is not None and inner_kind.kind != "sqrt":
            return _divisor("sqrt", v)
    return None


def _count_at(ctx: "FileContext", value: cst.BaseExpression) -> Optional[Tuple[Optional[str], bool]]:
    """`zero_evidence` of a count (or sum of counts) where it is set or passed; None for any other value."""
    found = zero_kind(ctx, value)
    return zero_evidence(ctx, found, None) if found is not None and found.kind in ("count", "total") else None


_CONSTANT_RANGE = "for constant data (a blank image, a flat signal: its max equals its min)"
_STANDARDISING = "for constant data (a constant feature, equal rewards, a blank input)"
# Reasons that hold in principle but that an independent reading of the shared corpus found
# implausible in real use (docs/precision.md): a degenerate box (predicted sizes are exp() of a
# delta times a positive anchor; ground truth is filtered for empty boxes, anchors are positive),
# data that is exactly constant (a std of advantages, of a speech mixture, a range of an image),
# and two different values that coincide (distinct junctions, a variance plus eps upstream; two
# of six such findings were true, Gram-Schmidt residues). Reported under --strict, named.
_WEAK = frozenset({_CONSTANT_RANGE, _STANDARDISING})
# In code without gradients (inference, post-processing, data preparation, an optimizer's step)
# the values are finished data: the same reading found none of them exactly degenerate (a
# constant batch, two junctions that coincide, all-zero errors); only a selection that can be
# empty, weights the caller gives, the code's own edge test and a graph's isolated node (a property
# of the data, like an empty selection) stay evidence there.
_SELECTION_REASONS = ("when nothing is selected", "when a mask", "when the mask", "when every weight", "as the code's own test", ISOLATED)


def _value_range(ctx: "FileContext", v: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` of `x.max() - x.min()` (also `amax`/`amin`, `torch.max(x)`, with any dim): the range
    of one tensor, never negative, 0 exactly when it is constant along the reduced dims."""
    if not (isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Subtract)):
        return None
    high, low = (_reduced_by(ctx, strip_parens(side), names) for side, names in ((v.left, ("max", "amax")), (v.right, ("min", "amin"))))
    if high is None or low is None or not same_code(ctx, high, low):
        return None
    return high


def _reduced_by(ctx: "FileContext", expr: cst.BaseExpression, names: Tuple[str, ...]) -> Optional[cst.BaseExpression]:
    """The tensor `expr` reduces by one of `names` (`x.max(-1).values`, `x.amax(dim=1)`,
    `torch.max(x)`), or None."""
    expr = strip_parens(ctx.resolve(expr))
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "values_"):
        expr = strip_parens(expr.value)
    if isinstance(expr, cst.Subscript):  # `x.max(1)[0]`
        expr = strip_parens(expr.value)
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    qual = ctx.qualname(func)
    if qual is not None and qual.rpartition(".")[2] in names and qual.startswith("torch.") and expr.args:
        return expr.args[0].value
    if isinstance(func, cst.Attribute) and func.attr.value in names and qual is None:
        return func.value
    return None


def zero_evidence(
    ctx: "FileContext", found: Divisor, numerator: Optional[cst.BaseExpression], *written: cst.BaseExpression
) -> Tuple[Optional[str], bool]:
    """(why the divisor `found` reaches 0 for real inputs, or None when nothing in the code says
    it does; whether it is never negative, so that a clamp keeps every value it can take). The
    code's own tensor test of the divisor, as `found` or as `written` (`torch.where(n > 0, x / n,
    0)`), is evidence too (`edge_tests`)."""
    why, non_negative = _zero_evidence(ctx, found, numerator)
    if (
        why is not None
        and not ctx.strict
        and (found.kind == "box" or why in _WEAK or "coincide" in why or (gradient_free(ctx) and not why.startswith(_SELECTION_REASONS)))
    ):
        why = None  # a reason a reviewer did not find plausible in real use: strict mode names it
    if why is None and not gradient_free(ctx):  # without a gradient, a mended forward is no hazard
        why = edge_test(ctx, found.value, *written)
    return why, non_negative and not found.several


def _zero_evidence(ctx: "FileContext", found: Divisor, numerator: Optional[cst.BaseExpression]) -> Tuple[Optional[str], bool]:
    kind, v = found.kind, strip_parens(found.value)
    if kind == "degree":  # read only at the endpoints it counted (`deg_inv[col]`): never 0 there
        return (None if read_at_endpoints(ctx, ctx.stack[-1]) else ISOLATED), True
    if found.counted is not None:
        return found.counted.why, True
    if kind == "count":
        counted = match_call(ctx.imports, v, "sum", "count_nonzero")
        return (mask_evidence(ctx, counted.input) if counted is not None else None), True
    if kind == "box":
        _, why, non_negative = box_divisor(ctx, v)  # type: ignore[misc]  # a box divisor of this kind is found (`zero_kind`)
        return why, non_negative
    if kind == "range":
        # min-max scaling: 0/0 for a constant input, which data can be (a blank image, a flat
        # signal, equal scores); a learned or computed value is left to strict mode
        data = _value_range(ctx, v)
        return (_CONSTANT_RANGE if data is not None and is_data(ctx, data) else None), True
    if kind == "total":
        # both parts must reach 0 together: evidence for each, and the same selection at best
        parts = [zero_evidence(ctx, zero_kind(ctx, side), numerator) for side in (v.left, v.right)]  # type: ignore[arg-type, attr-defined]  # a total divisor is a BinaryOperation (`zero_kind`)
        if any(why is None for why, _ in parts):
            return None, all(nonneg for _, nonneg in parts)
        first, second = parts[0][0], parts[1][0]
        why = first if first == second else f"{first}, and {str(second).split(': ', 1)[-1]}"
        return why, all(nonneg for _, nonneg in parts)
    if kind == "product":
        factors = [zero_kind(ctx, f) for f in (v.left, v.right)]  # type: ignore[attr-defined]  # a product divisor is a BinaryOperation (`zero_kind`)
        evidence = [zero_evidence(ctx, f, numerator) for f in factors if f is not None]
        why = next((w for w, _ in evidence if w is not None), None)
        others = [f for f, k in zip((v.left, v.right), factors) if k is None]  # type: ignore[attr-defined]  # a product divisor is a BinaryOperation (`zero_kind`)
        positive = all((number_value(strip_parens(f)) or 0) > 0 for f in others)
        return why, all(nonneg for _, nonneg in evidence) and positive
    if kind == "sqrt":
        arg = root_of(ctx, v)[1]  # type: ignore[index]  # a sqrt divisor is a root (`zero_kind`)
        squares = sum_of_squares(ctx, arg, v)
        if squares is not None:
            return row_evidence(ctx, squares.base), True
        hazard = root_hazard(ctx, arg)
        if hazard == "a variance":
            var = match_call(ctx.imports, strip_parens(through_shape(ctx, arg)), "var")
            return (_spread_evidence(ctx, numerator, var.input) if var is not None else None), True
        if hazard in ("a mean of squares", "a sum of squares", "a square"):
            return row_evidence(ctx, reduced_square(ctx, arg)[0]), True  # type: ignore[index]  # this hazard comes from a reduced square (`root_hazard`)
        if hazard is not None:
            return f"where the terms of {hazard} coincide", True
        inner = zero_kind(ctx, arg)
        return (zero_evidence(ctx, inner, numerator)[0] if inner is not None else None), True
    match = match_call(ctx.imports, v, "sum", *NORMS, "std", "var")
    if match is None:  # pragma: no cover - zero_kind found one
        return None, False
    if kind == "sum":
        square = reduced_square(ctx, match.input)
        if square is not None:  # a sum of squares is 0 where every squared value is
            return row_evidence(ctx, square[0]), True
        underflow = _underflowing_exp(ctx, match.input)
        if underflow is not None:
            return underflow, True
        why, non_negative = summand_evidence(ctx, match.input)
        if why == _GIVEN_WEIGHTS:
            why = _weights_from_callers(ctx, match.input)
        return why, non_negative
    if kind == "norm":
        return row_evidence(ctx, match.input), True
    return _spread_evidence(ctx, numerator, match.input), True


# Non-negative values without bound: distances, squares, norms (`exp(-d / t)` of one is a kernel).
_DISTANCES = (
    make_op("cdist", {"torch.cdist"}, None),
    make_op("pairwise_distance", {"torch.pairwise_distance", "torch.nn.functional.pairwise_distance"}, None),
    *NORMS,
    "abs",
    "square",
)
_UNDERFLOW = (
    "when every exponential underflows: exp(-v) is exactly 0 for v >= 104 in float32 (17.5 in "
    "float16), so a kernel of distances far beyond its width sums to 0"
)


def _underflowing_exp(ctx: "FileContext", summed: cst.BaseExpression) -> Optional[str]:
    """Why a sum of `summed` is 0: it is `exp(-v)` (or `exp(-v / t)`, `exp(-g * v)`) of a
    non-negative value without bound (a distance, a square, a norm), whose every term underflows
    to 0 for far-away points (measured, torch 2.13 CPU: exp(-104.0) == 0 in float32, exp(-17.5)
    in float16, exp(-92.75) in bfloat16). A softmax's `exp(x - max)` keeps a 1 in every row."""
    exp = match_call(ctx.imports, strip_parens(ctx.resolve(summed)), "exp")
    if exp is None:
        return None
    factors = _factors(ctx, exp.input)
    negated = [f for f in factors if isinstance(f, cst.UnaryOperation) and isinstance(f.operator, cst.Minus)]
    if len(negated) != 1:
        return None
    factors = [strip_parens(ctx.resolve(strip_parens(negated[0].expression))) if f is negated[0] else f for f in factors]
    factors = [g for f in factors for g in _factors(ctx, f)]  # `-(d2 / (2 * s ** 2))`
    if any(_distance(ctx, f) and not _on_a_grid(ctx, f) for f in factors):
        return _UNDERFLOW
    return None


_GRIDS = frozenset({"torch.arange", "torch.linspace", "torch.meshgrid"})


def _on_a_grid(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `expr` is computed from a grid (`torch.arange(k) - k // 2`, `linspace`,
    `meshgrid`): a fixed kernel, whose centre term is exp(0) = 1."""
    if depth > 4:
        return False
    expr = strip_parens(ctx.resolve(expr))
    if isinstance(expr, cst.Call) and ctx.qualname(expr.func) in _GRIDS:
        return True
    return any(_on_a_grid(ctx, child, depth + 1) for child in _operands_of(expr))


def _operands_of(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The sub-expressions a value is computed from: operands, arguments, receivers."""
    if isinstance(expr, cst.BinaryOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.UnaryOperation):
        return [expr.expression]
    if isinstance(expr, cst.Call):
        receiver = [expr.func.value] if isinstance(expr.func, cst.Attribute) else []
        return receiver + [a.value for a in expr.args]
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return [expr.value]
    return []


def _factors(ctx: "FileContext", expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The factors and numerators of a product or quotient (`-d / t` -> [-d]; `-g * d` -> [-g, d]),
    through names bound once; a divisor (a width, a temperature) is left out."""
    expr = strip_parens(ctx.resolve(strip_parens(expr)))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _factors(ctx, expr.left) + _factors(ctx, expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _factors(ctx, expr.left)
    return [expr]


def _distance(ctx: "FileContext", value: cst.BaseExpression) -> bool:
    """A non-negative value without bound: a distance, a norm, an absolute value, a square or a
    sum of squares."""
    value = strip_parens(ctx.resolve(value))
    if reduced_square(ctx, value) is not None:
        return True
    return match_call(ctx.imports, value, *_DISTANCES) is not None


# `summand_evidence`'s reason for weights a function is given (`weights.sum()` of a parameter).
_GIVEN_WEIGHTS = "when every weight is 0"


def _weights_from_callers(ctx: "FileContext", weights: cst.BaseExpression) -> Optional[str]:
    """Why weights a function is given can all be 0: a caller in the project passes a selection
    (a 0/1 mask of matches, a threshold, a random drop; `mask_origin.origin`), named with its line.
    Weights that no caller shows can vanish (a RANSAC's `exp(-d)` scores, a caller outside the
    project) are no evidence: a finding needs strict mode."""
    found = origin(ctx, weights)
    return f"{_GIVEN_WEIGHTS}: {found.why}" if found.why is not None else None


def _spread_evidence(ctx: "FileContext", numerator: Optional[cst.BaseExpression], spread_of: cst.BaseExpression) -> Optional[str]:
    """Why a std or variance of `spread_of` is 0: rows the code shows can be all zero (relu
    outputs, zeroed rows, a forward's input rows), else a standardisation of data (weak: a
    constant batch of real data was read as implausible)."""
    rows = row_evidence(ctx, spread_of, strong=True)
    if rows is not None:
        return rows
    return _STANDARDISING if standardises(ctx, numerator, spread_of) else None


# ---------------------------------------------------------------------------------------------
# Divisions


def division_operands(ctx: "FileContext", node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(numerator, denominator) of `x / d`, `x /= d`, `torch.div(x, d)`, `x.div(d)` (true division)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        return node.left, node.right
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign):
        return node.target, node.value
    match = match_call(ctx.imports, node, *DIV_METHODS)
    if match is not None and match.fully_known and "other" in match.args and "rounding_mode" not in match.args:
        return match.input, match.args["other"].value
    return None


def replaces_whole(node: cst.CSTNode) -> bool:
    """A division whose value can be replaced by another expression: not `x /= d`, not `x.div_(d)`."""
    if isinstance(node, cst.AugAssign):
        return False
    return not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "div_")


def in_where(ctx: "FileContext") -> bool:
    """Inside `torch.where(...)`: the forward selects the branch away where it is not finite, but
    its NaN still flows into the gradient (the catalogue's where-unselected-branch)."""
    return any(isinstance(n, cst.Call) and ctx.qualname(n.func) == "torch.where" for n in ctx.stack[:-1])


def normalize_site(ctx: "FileContext", x: cst.BaseExpression, d: cst.BaseExpression, use: cst.CSTNode):
    """For `x / x.norm(dim=k, keepdim=True)` (2-norm, same plain x, any norm spelling, the norm
    directly or through a name): the dim expression; else None."""
    if not is_plain(x):
        return None
    norm = strip_parens(ctx.resolve(d))
    match = match_call(ctx.imports, norm, *NORMS)
    if match is None or not match.fully_known or not same_code(ctx, match.input, x):
        return None
    if ctx.resolve(d) is not d and ctx.rebound_between(match.input, use):
        return None
    dim = match.arg("dim")
    if dim is None or not match.given("dim") or isinstance(strip_parens(dim), (cst.Tuple, cst.List)):
        return None
    if not is_literal(match.arg("keepdim"), "True"):
        return None
    order = match.arg("p") if match.op.name == "norm" else match.arg("ord")
    if order is not None and number_value(order) != 2:
        return None
    if "dtype" in match.args:
        return None
    return dim


def root_floor(ctx: "FileContext", arg: cst.BaseExpression) -> str:
    """The clamp floor for the argument of a root: 1 for an integer count, else EPS."""
    inner = zero_kind(ctx, arg)
    return count_floor(ctx, inner.value) if inner is not None and inner.kind == "count" else EPS


def count_floor(ctx: "FileContext", count: cst.BaseExpression) -> str:
    """The clamp floor for a count: 1 (exact, and keeps an integer dtype) where it is sure to be
    an integer (`count_nonzero`, the sum of a comparison or a boolean), else EPS (a mask known
    only by its name can be soft: clamping a sum of 0.5 at 1 would change it)."""
    match = match_call(ctx.imports, count, "sum")
    if match is None or is_mask(ctx, match.input, by_name=False):
        return COUNT_EPS
    return EPS


def floor_safety(floor: str) -> Optional[Safety]:
    """A clamp at 1 of an integer count is exact wherever the original was finite (a count of 0
    made it Inf or NaN): SAFE. A clamp at eps changes tiny values: the rule's UNSAFE."""
    return Safety.SAFE if floor == COUNT_EPS else None


def clamp_fix(rule: "Rule", expr: cst.BaseExpression, floor: str = EPS) -> "FixBuilder":
    """The family's one clamp: `expr` replaced by `expr.clamp_min(floor)`, with the safety that
    floor gives (`floor_safety`)."""
    return rule.fix(floor_safety(floor)).replace(expr, with_clamp(expr, floor))


def may_divide_by_zero(tree: CandidateTree) -> bool:
    """The candidate test of `division_operands` and `zero_kind` on CPython's tree: a call of a
    DIV_METHODS op by name, or a true division (`x / d`, `x /= d`) whose denominator is not a
    Python number written out (`number_kinds.python_number_tree`: `zero_kind` takes it for a
    constant, and a normalisation, a cosine or a softmax by hand divides by a norm or a sum)."""
    if tree.has_word(*DIV_METHODS):
        return True
    modules = import_targets(tree)
    if modules is None:
        return any(isinstance(node.op, ast.Div) for node in tree.nodes(ast.BinOp)) or any(
            isinstance(node.op, ast.Div) for node in tree.nodes(ast.AugAssign)
        )
    if any(isinstance(node.op, ast.Div) and not python_number_tree(node.right, modules) for node in tree.nodes(ast.BinOp)):
        return True
    return any(isinstance(node.op, ast.Div) and not python_number_tree(node.value, modules) for node in tree.nodes(ast.AugAssign))


class DivisionRule(Rule):
    """Visits every division form once (`x / d`, `x /= d`, `torch.div(x, d)`, `x.div(d)`,
    `x.div_(d)`); a rule implements `division(node, x, d)`. The division family and TNL110
    (an exp over its own sum) see the same divisions."""

    # what `division_operands` reads: a true division (not `//`: `ast.FloorDiv`), or a call of a
    # DIV_METHODS op by name; a `/` in a path string or `//` keeps no group, nor (`tree_test`) a
    # division by a Python number (`x / 2`, `x / len(xs)`, `x / x.size(0)`)
    ast_kinds = frozenset({"Div"})
    ast_words = frozenset(DIV_METHODS)

    @classmethod
    def tree_test(cls, tree: CandidateTree, index: Optional[ProjectIndex] = None) -> bool:
        return may_divide_by_zero(tree)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self.division(node, node.left, node.right)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.DivideAssign):
            self.division(node, node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        operands = division_operands(self.ctx, node)
        if operands is not None:
            self.division(node, *operands)

    def division(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> None:
        raise NotImplementedError(f"{type(self).__name__} visits divisions")  # pragma: no cover
