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
from torchnumlint.rules.guards import number_value, same_code, sigmoid_call, strip_parens
from torchnumlint.rules.log_domain.sites import chain, resolved
from torchnumlint.rules.names import Binding, CallMatch, is_literal, match_call

_LOG_SPACE = ("log_softmax", "logsigmoid", "log")
_MAX = frozenset({"max", "amax"})
_LOG_PROB_NAME = re.compile(r"log_?probs?|^log_?p$|lprobs?")


@dataclass
class HandSoftmax:
    division: cst.BinaryOperation  # exp(x) / exp(x).sum(d, keepdim=True)
    logits: cst.BaseExpression  # the exp's input
    dim: cst.Arg  # the sum's dim, as passed
    exp_chain: List[Binding]  # the names from the numerator to the exp (`e = x.exp()`)
    shifted: bool  # the exp's input is `x - max(x)`


def _exp(ctx, expr: cst.BaseExpression) -> Optional[Tuple[CallMatch, List[Binding]]]:
    match = match_call(ctx.imports, resolved(ctx, expr), "exp")
    return (match, chain(ctx, expr)) if match is not None and match.fully_known else None


def _is_max_of(ctx, expr: cst.BaseExpression, of: cst.BaseExpression) -> bool:
    """`expr` is a max of `of`: `of.max(d, keepdim=True)[0]`, `.values`, `of.amax(d)`,
    `torch.max(of, d, keepdim=True)`, through a local name."""
    expr = resolved(ctx, expr)
    while isinstance(expr, (cst.Subscript, cst.Attribute)) and not (
        isinstance(expr, cst.Attribute) and expr.attr.value in _MAX
    ):
        expr = strip_parens(expr.value)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    qual = ctx.qualname(func)
    if qual in ("torch.max", "torch.amax"):
        return bool(expr.args) and same_code(ctx, expr.args[0].value, of)
    return isinstance(func, cst.Attribute) and func.attr.value in _MAX and same_code(ctx, func.value, of)


def _log_space(ctx, expr: cst.BaseExpression) -> bool:
    """Already log-probabilities: a log_softmax / logsigmoid / log through local names, or a
    value its author names so (`log_probs`, `logp`, `self.lprobs`)."""
    if match_call(ctx.imports, resolved(ctx, expr), *_LOG_SPACE) is not None:
        return True
    ident = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return _LOG_PROB_NAME.search(ident.lower()) is not None


def hand_softmax(ctx, expr: cst.BaseExpression) -> Optional[HandSoftmax]:
    """`expr` (or its one local assignment) as a hand-written softmax, or None."""
    value = resolved(ctx, expr)
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, cst.Divide):
        return None
    total = match_call(ctx.imports, strip_parens(value.right), "sum")
    if total is None or not total.fully_known or not total.given("dim") or not is_literal(total.arg("keepdim"), "True"):
        return None
    top, bottom = _exp(ctx, value.left), _exp(ctx, total.input)
    if top is None or bottom is None or not same_code(ctx, top[0].input, bottom[0].input):
        return None
    logits = strip_parens(top[0].input)
    if _log_space(ctx, logits) or not may_carry_grad(ctx, logits):
        return None
    shifted = (
        isinstance(logits, cst.BinaryOperation)
        and isinstance(logits.operator, cst.Subtract)
        and _is_max_of(ctx, logits.right, strip_parens(logits.left))
    )
    return HandSoftmax(value, logits, total.args["dim"], top[1], shifted)


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
