"""Probabilities written out by hand, recognised for the logs of TNL103 and TNL104.

- `hand_softmax`: `exp(x) / exp(x).sum(d, keepdim=True)`, inline or through names
  (`e = x.exp(); p = e / e.sum(-1, keepdim=True)`), with or without the max subtracted
  (`exp(x - x.max(d, keepdim=True).values)`). Max-subtraction keeps exp from overflowing, not the
  quotient from underflowing: measured on torch 2.13 (CPU), `log(e / e.sum(-1, keepdim=True))`
  with `e = exp(x - x.max(-1, keepdim=True).values)` is -inf from a logit spread of 104.0 in
  float32 (17.4 in float16, 92.8 in bfloat16), -inf at 120 in float32 with a NaN gradient for
  every logit of the row, exactly like `softmax`.
  Not a softmax: an exp of values that are already log-probabilities (`log_probs.exp()`
  renormalised after top-k / top-p filtering, where an -inf is what the author wants), an exp
  of data that carries no gradient (weights from fixed scores).
- `exp_normalisation`: any division of an exp by a sum of the same exp, the forms TNL110 reads
  (`e / e.sum()`, `e / e.sum(1)[:, None]`, `e /= s`, `e.div_(s)`, `torch.div(e, s)`, Sinkhorn's
  `Q = torch.exp(out / eps).t(); Q /= torch.sum(Q)`): names and shape-only steps are followed,
  and `exact` says whether it is `hand_softmax`'s form, the one `torch.softmax` rewrites exactly.
  `exp_of` and `shifts.is_shifted` (the exp's input is `x - max(x)`, through names, every
  assignment of them, a same-file helper returning a max) are what TNL109 asks of its sums;
  `is_gaussian` (the exponent of a Gaussian kernel, `-x ** 2 / (2 * s ** 2)`) is what TNL110
  leaves alone besides (kornia's and speechbrain's kernels on the corpus).
- `sigmoid_pick`: the probability a sigmoid gives the observed label,
  `torch.where(y, p, 1 - p)` or `y * p + (1 - y) * (1 - p)` of a sigmoid `p`: 0 once `p`
  rounds to 0 or 1 (float32: `1 - sigmoid(x)` is 0 from x = 16.64; measured, `log` of either
  form is -inf with a NaN gradient at x = 20 and x = -120). Only `where` has an exact log-space
  form, `F.logsigmoid(torch.where(y, x, -x))` (measured equal to `where` of the two
  `logsigmoid`s, bit for bit); the product equals it only for 0/1 labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

import libcst as cst

from torchnumlint.rules.evidence import may_carry_grad
from torchnumlint.rules.made_by import sigmoid_call
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.log_domain.shifts import is_shifted
from torchnumlint.rules.log_domain.sites import chain, resolved
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.calls import CallMatch, is_literal, match_call
from torchnumlint.rules.value_steps import selection_of
from torchnumlint.rules.rewrite import keyword_arg
from torchnumlint.rules.shapes import shape_step, square_base

_LOG_SPACE = ("log_softmax", "logsigmoid", "log")
_LOG_PROB_NAME = re.compile(r"log_?probs?|^log_?p$|lprobs?")
_MAX_STEPS = 8  # names and shape-only steps followed from a quotient's operands to the exp


@dataclass
class ExpNormalisation:
    """A division of an exp by a sum of the same exp: a softmax (or a Sinkhorn step) by hand."""

    division: cst.CSTNode  # the division, in any of `divisors.division_operands`'s forms
    exp: CallMatch  # the numerator's exp
    logits: cst.BaseExpression  # the summed exp's input
    total: CallMatch  # the denominator's sum
    exp_chain: List[Binding]  # the names from the numerator to the exp (`e = x.exp()`)
    total_chain: List[Binding]  # the names from the denominator to the sum (`s = e.sum(-1, keepdim=True)`)
    shifted: bool  # the exp's input is `x - max(x)`
    exact: bool  # `exp(x) / exp(x).sum(d, keepdim=True)` through names only: a softmax over d
    selected: bool = False  # the numerator's exp is of entries picked from x: one softmax entry

    @property
    def dim(self) -> Optional[cst.Arg]:
        return self.total.args.get("dim")


def _before(ctx, expr: cst.BaseExpression, in_place: cst.CSTNode) -> cst.BaseExpression:
    """The value a name held before the in-place division `in_place` (`w.div_(w.sum(1))` binds
    `w` where it starts): the one other assignment of it before, if there is exactly one."""
    binding = ctx.binding(expr) if isinstance(expr, cst.Name) else None
    if binding is None or binding.node is not in_place:
        return expr
    earlier = [b for b in ctx.bindings_before(expr) if b.node is not in_place]
    return earlier[0].value if len(earlier) == 1 and earlier[0].value is not None else expr


def _through(ctx, expr: cst.BaseExpression, in_place: cst.CSTNode) -> Tuple[cst.BaseExpression, bool]:
    """`expr` followed through local names and shape-only steps (`.t()`, `[:, None]`,
    `.unsqueeze(1)`, `.float()`), and whether a step was passed."""
    stepped = False
    for _ in range(_MAX_STEPS):
        expr = resolved(ctx, _before(ctx, strip_parens(expr), in_place))
        inner = shape_step(ctx, expr)
        if inner is None:
            break
        expr, stepped = strip_parens(inner), True
    return expr, stepped


def exp_of(ctx, expr: cst.BaseExpression) -> Optional[CallMatch]:
    """The exp `expr` is (inline or through local names), with every argument visible."""
    match = match_call(ctx.imports, resolved(ctx, expr), "exp")
    return match if match is not None and match.fully_known else None


def _log_space(ctx, expr: cst.BaseExpression) -> bool:
    """Already log-probabilities: a log_softmax / logsigmoid / log through local names, or a
    value its author names so (`log_probs`, `logp`, `self.lprobs`)."""
    if match_call(ctx.imports, resolved(ctx, expr), *_LOG_SPACE) is not None:
        return True
    ident = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return _LOG_PROB_NAME.search(ident.lower()) is not None


def _sign(ctx, expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
    """-1 or 1: the sign of a product or quotient of squares (also through names and shape
    steps, and sums of squares) and number literals, negations flipping it; None for any other
    factor (a temperature, a score)."""
    expr = strip_parens(expr)
    if depth > _MAX_STEPS:
        return None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _sign(ctx, expr.expression, depth + 1)
        return None if inner is None else -inner
    value = number_value(expr)
    if value is not None:
        return None if value == 0 else (1 if value > 0 else -1)
    if square_base(ctx, expr) is not None:
        return 1
    if isinstance(expr, cst.BinaryOperation):
        left, right = _sign(ctx, expr.left, depth + 1), _sign(ctx, expr.right, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(expr.operator, (cst.Multiply, cst.Divide)):
            return left * right
        if isinstance(expr.operator, cst.Add) and left == right == 1:
            return 1
        return None
    through, stepped = _through(ctx, expr, expr)
    return _sign(ctx, through, depth + 1) if through is not expr and (stepped or isinstance(expr, cst.Name)) else None


def is_gaussian(ctx, logits: cst.BaseExpression) -> bool:
    """`-x ** 2 / (2 * sigma ** 2)`, `-0.5 * x ** 2 / s ** 2`, `-(g[:, None] + g[None])`: the
    exponent of a Gaussian kernel, at most 0, and 0 at the kernel's centre. Normalising its
    exp over the kernel's own grid neither overflows nor underflows to a zero row."""
    return _sign(ctx, logits) == -1


def stable_exp(ctx, logits: cst.BaseExpression) -> bool:
    """An exp of `logits` that cannot overflow: max-subtracted, or of log-probabilities."""
    return is_shifted(ctx, logits) or _log_space(ctx, logits)


def exp_normalisation(
    ctx, division: cst.CSTNode, numerator: cst.BaseExpression, denominator: cst.BaseExpression
) -> Optional[ExpNormalisation]:
    """`numerator / denominator` (at `division`) as an exp over a sum of the same exp, or None.
    An exp of log-probabilities (bounded by 1) is none."""
    top, top_stepped = _through(ctx, numerator, division)
    bottom, bottom_stepped = _through(ctx, denominator, division)
    exp = match_call(ctx.imports, top, "exp")
    total = match_call(ctx.imports, bottom, "sum")
    if exp is None or total is None or not exp.fully_known or not total.fully_known:
        return None
    summed, summed_stepped = _through(ctx, total.input, division)
    inner = match_call(ctx.imports, summed, "exp")
    if inner is None:
        return None
    selected = not (inner.call is exp.call or same_code(ctx, inner.input, exp.input))
    if selected and not _selected_from(ctx, exp.input, inner.input):
        return None
    logits = strip_parens(inner.input if selected else exp.input)
    if _log_space(ctx, logits):
        return None
    exact = (
        not (selected or top_stepped or bottom_stepped or summed_stepped)
        and total.given("dim")
        and is_literal(total.arg("keepdim"), "True")
    )
    return ExpNormalisation(
        division,
        exp,
        logits,
        total,
        chain(ctx, numerator),
        chain(ctx, denominator),
        is_shifted(ctx, logits),
        exact,
        selected,
    )


def _selected_from(ctx, picked: cst.BaseExpression, logits: cst.BaseExpression) -> bool:
    """`picked` is some entries of `logits` (`sim.gather(1, labels[:, None])`, `sim[idx, labels]`,
    `sim.diag()`, through local names): `exp(picked) / exp(logits).sum(d)` is a softmax's entry,
    the InfoNCE / cross-entropy loss written out."""
    value = strip_parens(resolved(ctx, strip_parens(picked)))
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("diag", "diagonal"):
        base = strip_parens(value.func.value)
    else:
        base = strip_parens(selection_of(ctx.imports, value))
        if base is value:
            return False
    return same_code(ctx, resolved(ctx, base), resolved(ctx, strip_parens(logits)))


def hand_softmax(ctx, expr: cst.BaseExpression) -> Optional[ExpNormalisation]:
    """`expr` (or its one local assignment) as a hand-written softmax, or None: the exact form,
    of logits that may carry a gradient."""
    value = resolved(ctx, expr)
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, cst.Divide):
        return None
    found = exp_normalisation(ctx, value, value.left, value.right)
    if found is None or not found.exact or not may_carry_grad(ctx, found.logits):
        return None
    return found


def softmax_like(fix, found: ExpNormalisation, qualified: str) -> cst.Call:
    """`qualified(x, d)` (`torch.softmax`, `F.log_softmax`) for an exact hand-written softmax of
    `x` over `d`, the dim passed as it was (by keyword or position)."""
    dim = found.dim
    assert dim is not None
    dim_arg = keyword_arg("dim", dim.value) if dim.keyword is not None else cst.Arg(value=dim.value)
    args = [cst.Arg(value=found.logits, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), dim_arg]
    return cst.Call(func=fix.ref(qualified), args=args)


@dataclass
class SigmoidPick:
    expr: cst.BaseExpression  # the where call or the sum of products
    sigmoid: CallMatch  # p
    label: cst.BaseExpression  # y
    where: Optional[cst.Call]  # the where call, for the exact fix
    flipped: bool  # where(y, 1 - p, p)
    p_chain: List[Binding]  # the names from the form's p to the sigmoid


def one_minus(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`v` for `1 - v` (any literal one), else None."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract):
        left = strip_parens(expr.left)
        if isinstance(left, (cst.Integer, cst.Float)) and number_value(left) == 1.0:
            return strip_parens(expr.right)
    return None


def _pair(ctx, p: cst.BaseExpression, q: Optional[cst.BaseExpression]) -> Optional[CallMatch]:
    """The sigmoid `p` is, when `q` is the same value (`1 - q` is its complement)."""
    if q is None or not same_code(ctx, p, q):
        return None
    return sigmoid_call(ctx, p)


def _factors(expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return strip_parens(expr.left), strip_parens(expr.right)
    return None


def _product_pick(ctx, value: cst.BinaryOperation) -> Optional[SigmoidPick]:
    """`y * p + (1 - y) * (1 - p)`, either order of the terms and of each product's factors."""
    for first, second in ((value.left, value.right), (value.right, value.left)):
        hit, miss = _factors(first), _factors(second)
        if hit is None or miss is None:
            continue
        for p, y in (hit, hit[::-1]):
            for not_p, not_y in (miss, miss[::-1]):
                match, not_label = _pair(ctx, p, one_minus(not_p)), one_minus(not_y)
                if match is not None and not_label is not None and same_code(ctx, y, not_label):
                    return SigmoidPick(value, match, y, None, False, chain(ctx, p))
    return None


def sigmoid_pick(ctx, expr: cst.BaseExpression) -> Optional[SigmoidPick]:
    """`expr` (or its one local assignment) as the probability a sigmoid gives a label, or None."""
    value = resolved(ctx, expr)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        return _product_pick(ctx, value)
    if not isinstance(value, cst.Call) or ctx.qualname(value.func) != "torch.where":
        return None
    args = value.args
    if len(args) != 3 or any(a.keyword is not None or a.star for a in args):
        return None
    cond, a, b = (strip_parens(arg.value) for arg in args)
    for p, other, flipped in ((a, b, False), (b, a, True)):
        match = _pair(ctx, p, one_minus(other))
        if match is not None:
            return SigmoidPick(value, match, cond, value, flipped, chain(ctx, p))
    return None
