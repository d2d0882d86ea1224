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

from torchnumlint.rules import vocabulary
from torchnumlint.rules import masks, syntax, ways
from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.evidence import is_torch_value
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.calls import CallMatch, make_op, match_call

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
        subtrahend = sub.arg("other")
        if subtrahend is not None and is_one(ctx, subtrahend):
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
    value = strip_parens(chain[-1].value if chain else expr)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
    match = match_call(ctx.imports, value, "exp")
    if match is None or not match.fully_known:
        return None
    return Exp(match, tuple(chain))


# ---------------------------------------------------------------------------------------------
# Values with no fraction: `log(1 + n)` of a count loses nothing (n is 0 or at least 1)

_INTEGER_CASTS = frozenset({"long", "int", "short", "bool"})
_INTEGER_DTYPES = frozenset(f"torch.{t}" for t in ("long", "int", "int64", "int32", "int16", "int8", "uint8", "bool"))
_COUNTING = frozenset(
    {
        "torch.count_nonzero",
        "torch.bincount",
        "torch.numel",
        "torch.randint",
        "torch.argmax",
        "torch.argmin",
        "torch.argsort",
        "torch.searchsorted",
        "torch.bucketize",
    }
)
_COUNTING_METHODS = frozenset({"count_nonzero", "bincount", "numel", "size", "argmax", "argmin", "argsort", "nelement", "dim"})
# `.float()` / `.to(x.dtype)` keep an integer an integer; a sum or product of integers is one.
_KEEPING = vocabulary.SAME_VALUES | vocabulary.REPEATS | {"sum", "cumsum", "abs", "clamp", "clamp_min", "clip"}
# Functions whose result holds the values of their first argument (a tensor, or a list of them).
_GATHERING = frozenset(
    {"torch.stack", "torch.cat", "torch.concat", "torch.meshgrid", "torch.flatten", "torch.abs", "einops.rearrange", "einops.repeat"}
)


# Words that name a count (`num_tokens`, `lengths`, `deg`, `n`): no one names a fraction so.
_COUNT_WORDS = frozenset(
    {
        "n",
        "num",
        "count",
        "counts",
        "cnt",
        "length",
        "lengths",
        "len",
        "lens",
        "deg",
        "degree",
        "degrees",
        "step",
        "steps",
        "epoch",
        "epochs",
        "iteration",
        "iterations",
        "idx",
        "index",
        "indices",
        "rank",
        "ranks",
        "position",
        "positions",
        "occurrences",
        "dur",
        "durs",
        "duration",
        "durations",
    }
)


# Words that make a count-like name something else: `log_dur_pred` is a log of a prediction.
_NOT_COUNT_WORDS = frozenset(
    {
        "log",
        "logs",
        "pred",
        "preds",
        "prediction",
        "predictions",
        "predicted",
        "logit",
        "logits",
        "mean",
        "std",
        "ratio",
        "prob",
        "probs",
        "frac",
        "emb",
        "embedding",
        "hat",
    }
)


def says_count(ident: Optional[str]) -> bool:
    """`num_items`, `lengths`, `node_deg`, `n`: a name that says it counts (`log_dur_pred`, a log
    of a predicted duration, does not)."""
    if ident is None:
        return False
    words = ident.lower().split("_")
    return any(word in _COUNT_WORDS for word in words) and not any(word in _NOT_COUNT_WORDS for word in words)


def is_integer_valued(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Holds whole numbers on every way it comes (`ways.every_way`): an integer literal,
    `len(...)`, a shape, `torch.arange` of integers, a count (`count_nonzero`, `bincount`, the
    `sum` of a comparison), an integer cast (`.long()`, `dtype=torch.long`), a name that says it
    counts (`says_count`), and sums, products, casts and reshapes of such values."""
    if says_count(_identifier(strip_parens(expr))):
        return True
    return ways.every_way(ctx, expr, "integer valued", lambda value: _integer(ctx, value))


def _identifier(expr: cst.CSTNode) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Param):
        return expr.name.value
    return None


def _integer(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    expr = strip_parens(expr)  # type: ignore[arg-type]  # strip_parens leaves any other node as it is
    if isinstance(expr, cst.Integer) or says_count(_identifier(expr)):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return is_integer_valued(ctx, expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)):
            return is_integer_valued(ctx, expr.left) and is_integer_valued(ctx, expr.right)
        return False
    if isinstance(expr, cst.Comparison):
        return True  # a boolean
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ("shape", "ndim") or (expr.attr.value in ("T", "mT") and is_integer_valued(ctx, expr.value))
    if isinstance(expr, cst.Subscript):  # `x.shape[0]`, `coords[:, None]`: a selection keeps the values
        return is_integer_valued(ctx, expr.value)
    if not isinstance(expr, cst.Call):
        return False
    if any(a.keyword is not None and a.keyword.value == "dtype" and ctx.qualname(a.value) in _INTEGER_DTYPES for a in expr.args):
        return True
    qual = ctx.qualname(expr.func)
    if qual in ("len", None) and isinstance(expr.func, cst.Name) and expr.func.value == "len":
        return True
    if qual in _COUNTING:
        return True
    if qual == "torch.arange":  # of integers, whatever its dtype: a float literal step says otherwise
        return not any(isinstance(strip_parens(a.value), cst.Float) for a in expr.args)
    grid = isinstance(expr.func, (cst.Name, cst.Attribute)) and _identifier(expr.func) in ("meshgrid", "ndgrid")
    if grid:  # a grid of integer coordinates (timm's `ndgrid` helper too)
        return bool(expr.args) and all(is_integer_valued(ctx, a.value) for a in expr.args if a.keyword is None)
    if qual in _GATHERING and expr.args:
        first = strip_parens(expr.args[0].value)
        parts = [e.value for e in first.elements] if isinstance(first, (cst.List, cst.Tuple)) else [first]
        return all(is_integer_valued(ctx, part) for part in parts)
    func = expr.func
    if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
        method = func.attr.value
        if method in _INTEGER_CASTS or method in _COUNTING_METHODS:
            return True
        if method in ("to", "type") and any(ctx.qualname(a.value) in _INTEGER_DTYPES for a in expr.args):
            return True
        if method in _KEEPING:
            return is_integer_valued(ctx, func.value) or masks.is_mask(ctx, func.value, by_name=False)
    return False


# ---------------------------------------------------------------------------------------------
# Values bounded above: their `exp` cannot overflow

_NON_NEGATIVE = frozenset({"abs", "relu", "square", "exp", "sigmoid", "softplus", "norm", "vector_norm"})
_NON_POSITIVE = frozenset({"logsigmoid", "log_softmax"})
_CLAMP_MAX = frozenset({"clamp", "clip", "clamp_max", "minimum"})


def bounded_above(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Kept below a bound on every way it comes, so that `exp` of it is finite: a number, the
    negation of a non-negative value (`-x.abs()`, `-F.relu(x)`, `-(d ** 2)`), a log-probability
    (`F.logsigmoid`, `log_softmax`), a value with a ceiling (`x.clamp(max=c)`, `torch.clamp(x,
    lo, hi)`, `clamp_max`, `torch.minimum`), or a value minus its max (`x - x.max(d, keepdim=True)[0]`,
    `x - x.amax(d)`)."""
    return ways.every_way(ctx, expr, "bounded above", lambda value: _bounded_above(ctx, value))


def _non_negative(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        return number_value(strip_parens(expr.right)) == 2.0
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        name = qual.rsplit(".", 1)[-1] if qual is not None else (expr.func.attr.value if isinstance(expr.func, cst.Attribute) else None)
        return name in _NON_NEGATIVE
    return False


def _floored(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A value with a floor, whose negation has a ceiling: `x.clamp(min=c)` (any clamp spelling),
    `clamp_min`, `torch.maximum` (`exp(-x.clamp(min=-30))`, the guarded sigmoid by hand)."""
    floor = match_call(ctx.imports, strip_parens(expr), "clamp", "clip", "clamp_min", "maximum")
    return floor is not None and (floor.given("min") or floor.given("other"))


def _bounded_above(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    expr = strip_parens(expr)
    if number_value(expr) is not None:
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _non_negative(ctx, expr.expression) or _floored(ctx, expr.expression)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract):
        if bounded_above(ctx, expr.left) and _non_negative(ctx, expr.right):
            return True  # `-F.relu(-x) - F.relu(x)`
        if _says(expr.left, "min") and _says(expr.right, "max"):
            return True  # `min_ - max_` of a pair (torch's own logaddexp)
        return _max_of(ctx, strip_parens(expr.right), strip_parens(expr.left))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return bounded_above(ctx, expr.left) and bounded_above(ctx, expr.right)
    call = match_call(ctx.imports, expr, *_NON_POSITIVE)
    if call is not None:
        return True
    if not isinstance(expr, cst.Call):
        return False
    qual = ctx.qualname(expr.func)
    name = (
        qual.rsplit(".", 1)[-1]
        if qual is not None and qual.startswith("torch.")
        else (expr.func.attr.value if isinstance(expr.func, cst.Attribute) and not ctx.imports.is_module_ref(expr.func.value) else None)
    )
    if name not in _CLAMP_MAX:
        return False
    if name in ("clamp_max", "minimum"):
        return True
    function = qual is not None
    positional = [a for a in expr.args if a.keyword is None]
    return any(a.keyword is not None and a.keyword.value == "max" for a in expr.args) or len(positional) >= (3 if function else 2)


def _says(expr: cst.BaseExpression, word: str) -> bool:
    """A name or attribute one of whose words is `word` (`min_`, `x_min`, `self.max_val`)."""
    ident = _identifier(strip_parens(expr))
    return ident is not None and word in ident.lower().split("_")


def _max_of(ctx: "FileContext", expr: cst.BaseExpression, of: cst.BaseExpression) -> bool:
    """`expr` is a max of `of` along some dim: `of.max(d, keepdim=True)[0]` / `.values`,
    `of.amax(d)`, `torch.max(of, d, keepdim=True)[0]`, `torch.amax(of, d)`, `of.logsumexp(d)`."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)) and not (
        isinstance(expr, cst.Attribute) and expr.attr.value in ("max", "amax", "logsumexp")
    ):
        expr = strip_parens(expr.value)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if ctx.qualname(func) in ("torch.max", "torch.amax", "torch.logsumexp"):
        return bool(expr.args) and syntax.same_code(ctx, expr.args[0].value, of)
    return isinstance(func, cst.Attribute) and func.attr.value in ("max", "amax", "logsumexp") and syntax.same_code(ctx, func.value, of)


def overflowing_exp(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Exp]:
    """`exp_of(expr)` where the exp can overflow: its input is not `bounded_above` (the stable
    softplus `log(1 + exp(-x.abs()))` is no such exp)."""
    found = exp_of(ctx, expr)
    if found is None or bounded_above(ctx, found.call.input):
        return None
    return found


# ---------------------------------------------------------------------------------------------
# Random draws: noise, whose last digits no one reads

_RANDOM = frozenset({"torch.rand", "torch.rand_like"})
_RANDOM_METHODS = frozenset({"uniform_", "random_", "bernoulli_", "exponential_"})
_KEEPS_DRAW = frozenset({"abs", "torch.abs", "clamp", "torch.clamp", "clamp_", "float", "to"})


def is_random_draw(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A uniform random draw on every way it comes (`torch.rand_like(x)`, `empty_like(x).uniform_()`),
    or an affine map, `abs` or clamp of one (`(1 - 2 * b) * torch.rand_like(x) + b`,
    `2 * (p - 0.5).abs()`): Gumbel, logistic or concrete noise, not a value computed to the last
    digit."""
    return ways.every_way(ctx, expr, "random draw", lambda value: _random(ctx, value))


def _random(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation):
        return is_random_draw(ctx, expr.expression)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        sides = (expr.left, expr.right)
        return any(is_random_draw(ctx, side) for side in sides) and all(
            is_random_draw(ctx, side) or not is_torch_value(ctx, side) for side in sides
        )
    if not isinstance(expr, cst.Call):
        return False
    qual = ctx.qualname(expr.func)
    if qual in _RANDOM:
        return True
    func = expr.func
    if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
        if func.attr.value in _RANDOM_METHODS:
            return True
        if func.attr.value in _KEEPS_DRAW:
            return is_random_draw(ctx, func.value)
    if qual in _KEEPS_DRAW and expr.args:
        return is_random_draw(ctx, expr.args[0].value)
    return False
