"""Why an ENTRY of a value can be exactly 0: the question of an elementwise log.

`evidence.row_evidence` and `divisors.zero_evidence` ask whether a whole row, a sum or a norm
reaches 0 (the edge of a division or a root). A log is taken entry by entry, so one zero entry
is enough: a relu output, an absolute value, a uniform draw (`torch.rand` returns 0.0), a
one-hot tensor, a literal table with a zero, a count of what a mask selects, a ratio whose
numerator is one of these, the zeros an accumulator starts from. `element_zero` answers with
the reason, as a phrase for the message, and whether the value is known never to be negative
(so that a clamp at a small floor keeps every value it can take). Sums, norms and counts are
asked of the division layer (`divisors.zero_kind`, `zero_evidence`), which already knows them;
a sum of powers (`(d.abs() ** p).sum()`) is 0 where every base is.

Not evidence: a box's width or height (the box encoding `log(gt_w / anchor_w)` runs on
ground-truth boxes that every detection pipeline filters for area first: both corpus findings of
it, detectron2's, were such), a value guarded by `+ eps` or a clamp with a positive floor, a constant,
exp/softmax/sigmoid/softplus (positive; their underflow is the log-domain rules' own), a mask
(`log(mask)` is the deliberate 0/-inf additive mask), and anything unknown (a parameter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.divisors import zero_evidence, zero_kind
from torchnumlint.rules.elementary import is_random_draw
from torchnumlint.rules.elementary import is_integer_valued
from torchnumlint.rules.evidence import difference_evidence, is_learned, row_evidence, some_way
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.number_kinds import is_constant, is_positive
from torchnumlint.rules.syntax import number_value, strip_parens, unwrap_casts
from torchnumlint.rules.ways import branches, every_way
from torchnumlint.rules.calls import match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# Measured on torch 2.13 (CPU): `torch.rand` draws multiples of 2^-24 in float32, 0.0 included
# (P = 2^-24 = 6e-8 per entry: once per 16.7M entries, a 512 x 32768 Gumbel draw); of 2M draws
# 3981 were 0.0 in bfloat16 (1 in 500) and 501 in float16 (1 in 4000).
RANDOM_WHY = "a uniform draw (`torch.rand` returns exactly 0.0: 1 in 2^24 float32 entries, 1 in 500 bfloat16)"
_ZEROS = frozenset({"torch.zeros", "torch.zeros_like"})
_ZERO_METHODS = frozenset({"new_zeros", "zero_"})
_HISTOGRAMS = frozenset({"torch.bincount", "torch.histc", "torch.histogram"})
_ONE_HOT = frozenset({"torch.nn.functional.one_hot"})
_TABLES = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor"})
_RELU = frozenset({"torch.relu", "torch.nn.functional.relu", "torch.nn.functional.relu6"})
_ATTENTION_WORDS = ("attn", "attention", "coverage", "alignment")


@dataclass(frozen=True)
class Zero:
    """Why an entry can be 0 (`why`, a phrase), and whether the value is never negative."""

    why: str
    non_negative: bool


def element_zero(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> Optional[Zero]:
    """Why an entry of `expr` can be exactly 0 for real inputs, or None without evidence (or
    where a guard, a positive op or a constant rules it out)."""
    if depth > 6:
        return None
    several = branches(ctx, expr)
    if several is not None:  # one unguarded way with a reason is enough; its sign says nothing of the rest
        why = some_way(ctx, expr, lambda value: _why(ctx, value, depth))
        return Zero(why, False) if why is not None else None
    value = unwrap_casts(ctx, expr)
    if value is not strip_parens(expr) and branches(ctx, value) is not None:
        return element_zero(ctx, value, depth + 1)
    clamp = match_call(ctx.imports, value, "clamp", "clip", "clamp_min")
    if clamp is not None and number_value(strip_parens(clamp.arg("min") or cst.Name("None"))) == 0:
        return Zero("values clamped at 0", True)  # a floor of 0 is no floor for a log
    if is_guarded(ctx, value) or is_constant(ctx, value) or is_positive(ctx, value):
        return None
    if is_mask(ctx, value, by_name=False):
        return None
    if _draw_from_zero(ctx, value):
        return Zero(RANDOM_WHY, True)
    return _made_zero(ctx, value, depth, inline=not isinstance(strip_parens(expr), (cst.Name, cst.Attribute)))


def _draw_from_zero(ctx: "FileContext", value: cst.BaseExpression) -> bool:
    """A uniform draw on [0, 1) itself (`torch.rand(...)`, `rand_like(x)`, `.uniform_()`), or its
    absolute value: not an affine map of one (`1 - u`, `lo + (hi - lo) * u` need not reach 0)."""
    value = strip_parens(value)
    if not isinstance(value, cst.Call) or not is_random_draw(ctx, value):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "uniform_":
        low = value.args[0].value if value.args else None
        return low is None or number_value(strip_parens(low)) == 0
    inner = (
        value.args[0].value
        if ctx.qualname(func) == "torch.abs" and value.args
        else (func.value if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value) else None)
    )
    return inner is None or _draw_from_zero(ctx, unwrap_casts(ctx, inner))


def _why(ctx: "FileContext", value: cst.CSTNode, depth: int) -> Optional[str]:
    if not isinstance(value, cst.BaseExpression):
        return None
    if _zeros(ctx, value):
        return "where it still holds the zeros it starts from"
    found = element_zero(ctx, value, depth + 1)
    return found.why if found is not None else None


def _zeros(ctx: "FileContext", value: cst.BaseExpression) -> bool:
    """`torch.zeros(...)`, `zeros_like(x)`, `x.new_zeros(...)`: an accumulator's start."""
    value = strip_parens(value)
    if not isinstance(value, cst.Call):
        return False
    if ctx.qualname(value.func) in _ZEROS:
        return True
    return isinstance(value.func, cst.Attribute) and value.func.attr.value in _ZERO_METHODS


def _absolute(ctx: "FileContext", inner: cst.BaseExpression, depth: int) -> Optional[Zero]:
    """`abs(x)` is 0 only where x is: x an integer (a relative position, a count), a difference
    of values that coincide, or a value whose own entries reach 0. Not a learned weight."""
    if is_learned(ctx, inner):
        return None
    if is_integer_valued(ctx, inner):
        return Zero("absolute values of integers (0 where one is 0)", True)
    found = element_zero(ctx, inner, depth + 1)
    if found is not None:
        return Zero(f"absolute values of {found.why}", True)
    bare = strip_parens(unwrap_casts(ctx, inner))
    why = difference_evidence(ctx, bare) if isinstance(bare, cst.BinaryOperation) else None
    return Zero(f"absolute values of a difference, 0 {why}", True) if why is not None else None


def kept_positive(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Kept above 0 by construction on every way it comes: a guarded value (`clamp(eps)`, `+ eps`),
    exp/softmax/sigmoid/softplus, a positive constant, and sums, means, products and quotients of
    such values (`P = P.clamp(eps); P /= P.sum()`: a density that never reaches 0)."""
    return every_way(ctx, expr, "kept positive", lambda value: _kept(ctx, value))


def _kept(ctx: "FileContext", value: cst.CSTNode) -> bool:
    if not isinstance(value, cst.BaseExpression):
        return False
    if is_guarded(ctx, value) or is_positive(ctx, value):
        return True
    if is_constant(ctx, value):
        return (number_value(strip_parens(value)) or 0) > 0
    bare = strip_parens(unwrap_casts(ctx, value, names=False))
    if bare is not strip_parens(value) and branches(ctx, bare) is None:
        return kept_positive(ctx, bare)
    if isinstance(bare, cst.BinaryOperation) and isinstance(bare.operator, (cst.Multiply, cst.Divide, cst.Add)):
        return kept_positive(ctx, bare.left) and kept_positive(ctx, bare.right)
    total = match_call(ctx.imports, bare, "sum", "mean")
    return total is not None and kept_positive(ctx, total.input)


def _made_zero(ctx: "FileContext", value: cst.BaseExpression, depth: int, inline: bool = True) -> Optional[Zero]:
    """The kinds of value whose entries are 0 by construction (after guards are ruled out). A
    literal table counts only when read through a name (`inline` False): written inline, its 0
    is in plain sight, and its -inf meant (a test's masked slot)."""
    if isinstance(value, cst.Call):
        qual = ctx.qualname(value.func)
        method = value.func.attr.value if isinstance(value.func, cst.Attribute) else None
        if qual in _RELU or (qual is None and method == "relu" and not value.args):
            return Zero("relu outputs (0 for every negative input)", True)
        absolute = match_call(ctx.imports, value, "abs")
        if absolute is not None:
            return _absolute(ctx, absolute.input, depth)
        if qual in _HISTOGRAMS or (qual is None and method == "bincount"):
            return Zero("a histogram (0 for an empty bin)", True)
        if qual in _ONE_HOT:
            return Zero("a one-hot tensor (0 off the label)", True)
        if qual in _TABLES and value.args and _has_zero_literal(value.args[0].value) and not inline:
            return Zero("a table with a 0 entry", _all_non_negative(value.args[0].value))
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        if is_mask(ctx, value.left) or is_mask(ctx, value.right):
            return Zero("entries a mask zeroes", False)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
        numerator = element_zero(ctx, value.left, depth + 1)
        if numerator is not None:
            return Zero(f"a ratio whose numerator is {numerator.why}", numerator.non_negative and _positive_or_count(ctx, value.right))
        return _attention_ratio(ctx, value)
    sum_of_powers = _sum_of_powers(ctx, value)
    if sum_of_powers is not None:
        return sum_of_powers
    found = zero_kind(ctx, value)
    if found is not None and found.kind in ("count", "sum", "norm"):  # not a box side: see the module's docstring
        why, non_negative = zero_evidence(ctx, found, None)
        if why is not None:
            return Zero(f"{found.what} {why}", non_negative)
        if found.kind == "sum" and _says_attention(value):
            return Zero("a sum of attention weights (0 for a key that no query attends to)", True)
    return None


def _attention_ratio(ctx: "FileContext", value: cst.BinaryOperation) -> Optional[Zero]:
    """`a / a.sum(d, keepdim=True)` of attention or coverage: probabilities, 0 where `a` is."""
    if _says_attention(value.left):
        found = zero_kind(ctx, value.right)
        if found is not None and found.kind == "sum":
            return Zero("normalised attention weights (0 where a weight is)", False)
    return None


def _says_attention(expr: cst.BaseExpression) -> bool:
    """A name (or a sum of a name) that says attention or coverage: `attn_weights.sum(1)`."""
    expr = strip_parens(expr)
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = strip_parens(expr.func.value)
    ident = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return any(word in ident.lower() for word in _ATTENTION_WORDS)


def _sum_of_powers(ctx: "FileContext", value: cst.BaseExpression) -> Optional[Zero]:
    """`(d.abs() ** p).sum(...)`, `d.pow(2).sum()`: 0 where every base of the row is."""
    total = match_call(ctx.imports, value, "sum", "mean")
    if total is None:
        return None
    term = strip_parens(unwrap_casts(ctx, total.input))
    base: Optional[cst.BaseExpression] = None
    exponent: Optional[cst.BaseExpression] = None
    if isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Power):
        base, exponent = term.left, term.right
    else:
        power = match_call(ctx.imports, term, "pow")
        if power is not None:
            base, exponent = power.input, power.arg("exponent")
    if base is None or exponent is None or not ((number_value(strip_parens(exponent)) or 0) > 0 or _says_power(exponent)):
        return None
    inner = element_zero(ctx, base, 1)
    why = inner.why if inner is not None else row_evidence(ctx, base, strong=True)
    if why is None:
        return None
    return Zero(f"a sum of powers of {why}, 0 where every one of them is", True)


def _says_power(expr: cst.BaseExpression) -> bool:
    expr = strip_parens(expr)
    ident = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return ident in ("p", "q", "ord", "power", "exponent")


def _positive_or_count(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A denominator that keeps the sign: a positive constant, a sum or count (never negative
    where the numerator is not)."""
    if is_constant(ctx, expr):
        return (number_value(strip_parens(unwrap_casts(ctx, expr))) or 1) > 0
    found = zero_kind(ctx, expr)
    return found is not None and found.kind in ("count", "sum", "norm")


def _has_zero_literal(expr: cst.BaseExpression) -> bool:
    expr = strip_parens(expr)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_has_zero_literal(e.value) for e in expr.elements)
    return number_value(expr) == 0


def _all_non_negative(expr: cst.BaseExpression) -> bool:
    expr = strip_parens(expr)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(_all_non_negative(e.value) for e in expr.elements)
    value = number_value(expr)
    return value is not None and value >= 0
