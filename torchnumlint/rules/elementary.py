"""Elementary functions written out by hand: the shapes that `log1p`, `expm1`, `softplus`,
`sigmoid` and `logit` replace, recognised once for every rule that asks.

- `one_plus(ctx, expr)`: `expr` as `1 + x` in any spelling: `1 + x`, `x + 1`, `1.0 + x`,
  `torch.ones_like(x) + x`, `x.add(1)`, `torch.add(x, 1)`; and `1 - x`, `torch.ones_like(x) - x`
  (`negative`). The literal is exactly one. A `1 + x` whose `x` is itself `-y` comes back as it is
  (`term` is `-y`): `log1p(-y)` is its exact form.
- `exp_of(ctx, expr)`: the `exp` behind `expr`, `torch.exp(x)` under any alias or `x.exp()`,
  inline or through the one local assignment of a name (`e = x.exp()`), with the names followed,
  for a fix that rewrites them (`rewrite.at_source`). `math.exp`/`np.exp` are not torch's.
- `minus_one(ctx, expr)`: `expr` as `v - 1` in any spelling: `v - 1`, `-1 + v`, `v.sub(1)`,
  `torch.sub(v, 1)`, `v - torch.ones_like(v)`.

These only say what shape an expression has; whether a shape is a hazard (what its `x` may be)
is each rule's question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules.guards import number_value, strip_parens
from torchnumlint.rules.names import Binding, CallMatch, make_op, match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# `torch.add(x, 1)` / `x.add(1)` and `torch.sub(v, 1)` / `v.sub(1)`: an `alpha` scales the other
# operand, so a call that passes one is no plain sum.
_ADD = make_op("add", {"torch.add"}, "add", ("other", "alpha"))
_SUB = make_op("sub", {"torch.sub", "torch.subtract"}, "sub", ("other", "alpha"))
_ONES_LIKE = frozenset({"torch.ones_like"})
# Local names followed from an expression to the exp it holds (`e = x.exp()`).
_MAX_CHAIN = 4


def is_one(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A literal one (`1`, `1.0`, `1.`) or `torch.ones_like(...)`, which holds ones."""
    expr = strip_parens(expr)
    if isinstance(expr, (cst.Integer, cst.Float)):
        return number_value(expr) == 1.0
    return isinstance(expr, cst.Call) and ctx.qualname(expr.func) in _ONES_LIKE


@dataclass(frozen=True)
class OnePlus:
    """`1 + term` (or `1 - term` when `negative`), as written in `whole`."""

    whole: cst.BaseExpression
    term: cst.BaseExpression
    negative: bool


def one_plus(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[OnePlus]:
    """`expr` (names are not followed) as `1 + x` or `1 - x` in any spelling, else None."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation):
        left, right = strip_parens(expr.left), strip_parens(expr.right)
        if isinstance(expr.operator, cst.Add):
            if is_one(ctx, left) and not is_one(ctx, right):
                return OnePlus(expr, right, False)
            if is_one(ctx, right) and not is_one(ctx, left):
                return OnePlus(expr, left, False)
        elif isinstance(expr.operator, cst.Subtract) and is_one(ctx, left) and not is_one(ctx, right):
            return OnePlus(expr, right, True)
        return None
    add = match_call(ctx.imports, expr, _ADD)
    if add is not None and add.fully_known and not add.given("alpha"):
        other = add.arg("other")
        if other is not None and is_one(ctx, other) and not is_one(ctx, add.input):
            return OnePlus(expr, strip_parens(add.input), False)
    return None


def minus_one(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`v` for `expr` (names are not followed) written as `v - 1` in any spelling, else None."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation):
        left, right = strip_parens(expr.left), strip_parens(expr.right)
        if isinstance(expr.operator, cst.Subtract) and is_one(ctx, right):
            return left
        if isinstance(expr.operator, cst.Add):
            for one, other in ((left, right), (right, left)):
                if number_value(one) == -1.0:
                    return other
        return None
    sub = match_call(ctx.imports, expr, _SUB)
    if sub is not None and sub.fully_known and not sub.given("alpha"):
        other = sub.arg("other")
        if other is not None and is_one(ctx, other):
            return strip_parens(sub.input)
    return None


@dataclass(frozen=True)
class Exp:
    """An `exp` call, and the local names followed to it from where it was asked (nearest first;
    empty when the call was inline)."""

    call: CallMatch
    chain: Tuple[Binding, ...]


def exp_of(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Exp]:
    """The torch `exp` that `expr` is, inline or through local names, with every argument
    accounted for; else None."""
    chain: List[Binding] = ctx.chain(expr, _MAX_CHAIN, names_only=True)
    value = strip_parens(chain[-1].value if chain else expr)  # type: ignore[arg-type]
    match = match_call(ctx.imports, value, "exp")
    if match is None or not match.fully_known:
        return None
    return Exp(match, tuple(chain))
