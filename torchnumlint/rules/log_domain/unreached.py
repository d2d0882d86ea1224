"""Code an exp's overflow cannot reach: where TNL109 and TNL110 leave a hand-written form alone.

Two places run a naive `log(sum(exp(x)))` or `exp(x) / sum(exp(x))` only on inputs it is exact
for, and both are how library code (torch's own `_refs`) handles edge cases:

- `on_empty_input`: under an `if` that holds only when an input is empty
  (`if x.numel() == 0: return torch.sum(torch.exp(x), dim).log()`, and the `else` of
  `if x.numel() > 0`): an empty tensor has no element to overflow.
- `selected_at_non_finite`: a value that `torch.where` keeps only where every exp input is
  already infinite (or NaN): `torch.where(~torch.isfinite(a) & (a == b), log(exp(a) + exp(b)),
  ...)`. There exp gives inf or 0 and the log inf or -inf, which is the true value; everywhere
  else the forward never reads it. (Its gradient at the unselected entries is the catalogue's
  where-unselected-branch hazard, a different finding.)

`non_finite` (what a condition proves infinite or NaN wherever it holds) is also what
`shifts` asks of a max whose infinite entries are replaced (`masked_fill(m, m.abs() == inf, 0)`).
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sequence

import libcst as cst

from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.uses import reads_of

_MAX_HOPS = 6  # names and wheres followed outward from the value
_NON_FINITE_TESTS = frozenset({"isinf", "isposinf", "isneginf", "isnan"})
_EMPTY_SIZES = frozenset({"numel", "nelement"})


def _call_name(ctx, call: cst.BaseExpression) -> Optional[str]:
    """`isinf` for `torch.isinf(v)` and `v.isinf()`; the last part of a torch function or the
    method name."""
    if not isinstance(call, cst.Call):
        return None
    qual = ctx.qualname(call.func)
    if qual is not None:
        return qual.rsplit(".", 1)[-1] if qual.startswith("torch.") else None
    if isinstance(call.func, cst.Attribute) and not ctx.imports.is_module_ref(call.func.value):
        return call.func.attr.value
    return None


def _subject(ctx, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The tensor a one-tensor call is about: `v` in `torch.isinf(v)` and `v.isinf()`, past
    `torch.real(v)`."""
    if ctx.qualname(call.func) is not None:
        if not call.args or call.args[0].keyword is not None:
            return None
        value = strip_parens(call.args[0].value)
    elif isinstance(call.func, cst.Attribute):
        value = strip_parens(call.func.value)
    else:
        return None
    if isinstance(value, cst.Call) and _call_name(ctx, value) == "real":
        return _subject(ctx, value)
    return value


def _infinite(expr: cst.BaseExpression) -> bool:
    """`float("inf")`, `-float("inf")`, `math.inf`, `torch.inf`, `float("-inf")`."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _infinite(expr.expression)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "inf"
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "float":
        arg = expr.args[0].value if len(expr.args) == 1 else None
        text = arg.evaluated_value if isinstance(arg, cst.SimpleString) else None
        return isinstance(text, str) and text.lstrip("+-").lower() in ("inf", "infinity")
    return False


def _conjuncts(ctx, cond: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The parts that all hold where `cond` does: `a & b`, `a and b`, `torch.logical_and(a, b)`,
    through the one assignment of a name (`inf_mask = torch.logical_and(...)`)."""
    cond = strip_parens(ctx.resolve(cond, names_only=True))
    if isinstance(cond, cst.BinaryOperation) and isinstance(cond.operator, cst.BitAnd):
        yield from _conjuncts(ctx, cond.left)
        yield from _conjuncts(ctx, cond.right)
    elif isinstance(cond, cst.BooleanOperation) and isinstance(cond.operator, cst.And):
        yield from _conjuncts(ctx, cond.left)
        yield from _conjuncts(ctx, cond.right)
    elif isinstance(cond, cst.Call) and _call_name(ctx, cond) == "logical_and" and len(cond.args) == 2:
        yield from _conjuncts(ctx, cond.args[0].value)
        yield from _conjuncts(ctx, cond.args[1].value)
    else:
        yield cond


def _negated(ctx, cond: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`c` for `~c`, `not c`, `torch.logical_not(c)`."""
    cond = strip_parens(cond)
    if isinstance(cond, cst.UnaryOperation) and isinstance(cond.operator, (cst.BitInvert, cst.Not)):
        return cond.expression
    if isinstance(cond, cst.Call) and _call_name(ctx, cond) == "logical_not" and len(cond.args) == 1:
        return cond.args[0].value
    return None


def _tested(ctx, part: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The value one condition proves infinite or NaN: `isinf(v)`, `isnan(v)`, `~isfinite(v)`,
    `v.abs() == inf`, `v == -inf`."""
    part = strip_parens(part)
    inner = _negated(ctx, part)
    if inner is not None:
        inner = strip_parens(inner)
        return _subject(ctx, inner) if isinstance(inner, cst.Call) and _call_name(ctx, inner) == "isfinite" else None
    if isinstance(part, cst.Call) and _call_name(ctx, part) in _NON_FINITE_TESTS:
        return _subject(ctx, part)
    if isinstance(part, cst.Comparison) and len(part.comparisons) == 1 and isinstance(part.comparisons[0].operator, cst.Equal):
        left, right = strip_parens(part.left), strip_parens(part.comparisons[0].comparator)
        value = left if _infinite(right) else right if _infinite(left) else None
        if isinstance(value, cst.Call) and _call_name(ctx, value) == "abs":
            return _subject(ctx, value)
        return value
    return None


def _equal_pair(part: cst.BaseExpression):
    part = strip_parens(part)
    if isinstance(part, cst.Comparison) and len(part.comparisons) == 1 and isinstance(part.comparisons[0].operator, cst.Equal):
        return strip_parens(part.left), strip_parens(part.comparisons[0].comparator)
    return None


def _unreal(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    expr = strip_parens(expr)
    while isinstance(expr, cst.Call) and _call_name(ctx, expr) == "real" and _subject(ctx, expr) is not None:
        expr = _subject(ctx, expr)  # type: ignore[assignment]  # not None: the loop test just asked
    return expr


def non_finite(ctx, cond: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The values `cond` proves infinite or NaN wherever it holds (a value equal to one of them,
    `a == b` next to `isinf(a)`, is one too); [] when it proves none."""
    parts = list(_conjuncts(ctx, cond))
    found = [v for v in (_tested(ctx, p) for p in parts) if v is not None]
    pairs = [(_unreal(ctx, a), _unreal(ctx, b)) for a, b in filter(None, map(_equal_pair, parts))]
    grown = True
    while grown:
        grown = False
        for a, b in pairs:
            for this, other in ((a, b), (b, a)):
                if any(same_code(ctx, this, v) for v in found) and not any(same_code(ctx, other, v) for v in found):
                    found.append(other)
                    grown = True
    return found


def _branches(ctx, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The values a `torch.where` assigned once to `expr` picks from (`max_ = torch.where(a >=
    b, a, b)` is `a` or `b`), past `torch.real`; [] for anything else."""
    value = strip_parens(ctx.resolve(expr, names_only=True)) if isinstance(expr, cst.Name) else expr
    if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.where" and len(value.args) == 3:
        return [_unreal(ctx, a.value) for a in value.args[1:]]
    return []


def _all_non_finite(ctx, proven: Sequence[cst.BaseExpression], inputs: Sequence[cst.BaseExpression]) -> bool:
    """Every input is one of the `proven` values, or picks only from them: each exp then gives
    inf, 0 or NaN, which the hand-written form turns into the true value."""

    def known(value: cst.BaseExpression) -> bool:
        return any(same_code(ctx, value, p) for p in proven)

    def covered(x: cst.BaseExpression) -> bool:
        picks = _branches(ctx, _unreal(ctx, x))
        return known(_unreal(ctx, x)) or (bool(picks) and all(map(known, picks)))

    return bool(proven) and all(map(covered, inputs))


def _where_branch(ctx, path: Sequence[cst.CSTNode]):
    """(the where call, its condition, the branch index: 1 kept where the condition holds, 2
    where it fails) when `path[-1]` is the second or third argument of `torch.where`; else None."""
    if len(path) < 3 or not isinstance(path[-2], cst.Arg) or not isinstance(path[-3], cst.Call):
        return None
    call, arg = path[-3], path[-2]
    if ctx.qualname(call.func) != "torch.where" or len(call.args) != 3 or arg.keyword is not None:
        return None
    index = next(i for i, a in enumerate(call.args) if a is arg)
    return (call, call.args[0].value, index) if index else None


def _selected(ctx, path: Sequence[cst.CSTNode], inputs: Sequence[cst.BaseExpression], hops: int) -> bool:
    """Whether the value at `path[-1]` reaches anything only through a `torch.where` that keeps
    it where every input is non-finite (through nested wheres and names every read of which is
    such a branch)."""
    path = list(path)
    while hops > 0:
        found = _where_branch(ctx, path)
        if found is not None:
            _, cond, index = found
            if index == 1 and _all_non_finite(ctx, non_finite(ctx, cond), inputs):
                return True
            path, hops = path[:-2], hops - 1  # a where that keeps it elsewhere too: its result is next
            continue
        parent = path[-2] if len(path) > 1 else None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is path[-1]:
            target = parent.targets[0].target
            reads = reads_of(ctx, target) if isinstance(target, cst.Name) else None
            if not reads:
                return False
            return all(_selected_read(ctx, read, inputs, hops - 1) for read in reads)
        return False
    return False


def _selected_read(ctx, read: Sequence[cst.CSTNode], inputs: Sequence[cst.BaseExpression], hops: int) -> bool:
    with ctx.visiting(read):
        return _selected(ctx, read, inputs, hops)


def selected_at_non_finite(ctx, inputs: Sequence[cst.BaseExpression]) -> bool:
    """The node being visited is kept by `torch.where` only where every one of the exp `inputs`
    is infinite or NaN, where the hand-written form is exact."""
    return _selected(ctx, ctx.stack, inputs, _MAX_HOPS)


def _size_of(ctx, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`v` for `v.numel()`, `torch.numel(v)`, `v.nelement()`."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Call) and _call_name(ctx, expr) in _EMPTY_SIZES:
        return _subject(ctx, expr)
    return None


def _empty(ctx, test: cst.BaseExpression, holds: bool) -> List[cst.BaseExpression]:
    """The values `test` proves empty when it `holds` (or, with `holds` False, when it fails):
    `v.numel() == 0`, `not v.numel()`, `v.numel() < 1` / `v.numel() > 0`, `v.numel() != 0`, `v.numel()`."""
    test = strip_parens(test)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _empty(ctx, test.expression, not holds)
    if holds:
        return [v for part in _conjuncts(ctx, test) for v in _empty_part(ctx, part, True)]
    return _empty_part(ctx, test, False)


def _empty_part(ctx, test: cst.BaseExpression, holds: bool) -> List[cst.BaseExpression]:
    test = strip_parens(test)
    size = _size_of(ctx, test)
    if size is not None:
        return [] if holds else [size]  # `if v.numel():` fails only when v is empty
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return []
    op, left, right = test.comparisons[0].operator, strip_parens(test.left), strip_parens(test.comparisons[0].comparator)
    size, bound = _size_of(ctx, left), number_value(right)
    if size is None or bound is None:
        return []
    empty_when_true = (
        (isinstance(op, cst.Equal) and bound == 0)
        or (isinstance(op, cst.LessThan) and bound == 1)
        or (isinstance(op, cst.LessThanEqual) and bound == 0)
    )
    empty_when_false = (
        (isinstance(op, cst.NotEqual) and bound == 0)
        or (isinstance(op, cst.GreaterThan) and bound == 0)
        or (isinstance(op, cst.GreaterThanEqual) and bound == 1)
    )
    return [size] if (empty_when_true if holds else empty_when_false) else []


def on_empty_input(ctx, inputs: Sequence[cst.BaseExpression]) -> bool:
    """The node being visited runs only when one of the exp `inputs` is empty: in the body of an
    `if` whose test says so, or in the `else` of one whose test says it is not."""
    stack = ctx.stack
    for at, node in enumerate(stack[:-1]):
        if not isinstance(node, cst.If):
            continue
        inside = stack[at + 1]
        if inside is not node.body and inside is not node.orelse:
            continue  # the test itself
        proven = _empty(ctx, node.test, inside is node.body)
        if any(same_code(ctx, _unreal(ctx, x), v) for x in inputs for v in proven):
            return True
    return False
