"""Counts a divisor reads without a `.sum()` at the division: where the count was made.

`divisors.zero_kind` knows a count written where it divides (`mask.sum()`, `count_nonzero`).
Real code often divides by a count made elsewhere, and each of these forms was a real NaN fix:

- a per-class count, `torch.bincount(labels, minlength=C)` or `F.one_hot(labels, C).sum(0)`,
  read whole or at one class (`counts[k]`, `counts[:, k]`): 0 for a class the batch lacks
  (measured, torch 2.13 CPU: a class mean over an absent class is Inf, 12 of 12 gradient
  entries Inf). Read at the labels it counted (`counts[labels]`) it is never 0, and a quotient
  by it read only at such positions (`w = 1. / y.bincount(); w[y]`, `degrees.read_at_endpoints`)
  never uses an absent class's Inf;
- the last entry of a cumulative count, `torch.cumsum(mask, d)[..., -1]` of a boolean mask (a
  comparison: its count is an integer, so a clamp at 1 is exact): the count of the mask, 0
  when it selects nothing (measured: a row with no score past the threshold is NaN,
  and so is its gradient);
- a count held in an attribute, `self.num_pos = pos.sum()` in one method of a class and
  `loss / self.num_pos` in another: judged where it is set;
- a count passed as a parameter, `def normalise(loss, count)`: judged at its callers in the
  project (`callers.py`), one caller with evidence is enough, and the message names it.

`counted` answers with the evidence as a phrase for the message (None: strict mode only), the
way `zero_evidence` does for the forms written in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules.attributes import assignments, on_self
from torchnumlint.rules.callers import callers
from torchnumlint.rules.degrees import read_at_endpoints
from torchnumlint.rules.calls import make_op, match_call
from torchnumlint.rules.evidence import mask_evidence
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.number_kinds import is_constant
from torchnumlint.rules.shapes import shape_step
from torchnumlint.rules.syntax import number_value, same_code, strip_parens

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

ABSENT_CLASS = "for a class the batch lacks (a per-class count of labels is 0 there)"
_HISTOGRAMS = frozenset({"torch.bincount"})
_ONE_HOT = frozenset({"torch.nn.functional.one_hot"})
_CUMSUM = make_op("cumsum", {"torch.cumsum"}, "cumsum", ("dim", "dtype"))
# How `divisors` judges a value where it is written: (why it reaches 0 or None, whether it is
# never negative) when it is a count, None when it is none. Passed in, since `divisors` asks
# this module first.
Judge = Callable[["FileContext", cst.BaseExpression], Optional[Tuple[Optional[str], bool]]]


# Set while a value set or passed elsewhere is judged: that judgement follows no further attribute
# or caller (depth 1, as `callers.py`; `self.x = self.x.to(device)` would lead back to itself).
_ASKING: List[int] = []


@dataclass(frozen=True)
class Counted:
    """A count made away from the division: the phrase that names it, and why it is 0 for real
    inputs (None where nothing in the code says so)."""

    what: str
    why: Optional[str]


def counted(ctx: "FileContext", d: cst.BaseExpression, judge: Judge) -> Optional[Counted]:
    """The count `d` reads (through names, casts and shape-only steps), when it is one of this
    module's forms; None otherwise. `judge` says what a value set or passed elsewhere is."""
    value, reads = _read(ctx, d)
    if isinstance(value, cst.Call):
        labels = _per_class(ctx, value)
        if labels is not None:
            if any(_at(ctx, index, labels) for index in reads) or (not reads and read_at_endpoints(ctx, ctx.stack[-1])):
                return None  # `counts[labels]`, `(1. / counts)[labels]`: read where a label was counted, never 0
            return Counted("a per-class count", ABSENT_CLASS)
        mask = _cumulative(ctx, value)
        if mask is not None and is_mask(ctx, mask, by_name=False) and any(_last(index) for index in reads):
            return Counted("a cumulative count's last entry", mask_evidence(ctx, mask))
        return None
    if _ASKING or reads:
        return None
    _ASKING.append(1)
    try:
        if isinstance(value, cst.Attribute) and on_self(value):
            return _attribute(ctx, value, judge)
        return _parameter(ctx, value, judge) if isinstance(value, cst.Name) else None
    finally:
        _ASKING.pop()


def _read(ctx: "FileContext", d: cst.BaseExpression) -> Tuple[cst.BaseExpression, List[cst.Subscript]]:
    """The value under names and shape-only steps, and the subscripts read on the way."""
    reads: List[cst.Subscript] = []
    expr = strip_parens(d)
    for _ in range(12):
        if isinstance(expr, cst.Name):
            resolved = strip_parens(ctx.resolve(expr))
            if resolved is expr:
                break
            expr = resolved
            continue
        if isinstance(expr, cst.Subscript):
            reads.append(expr)
        inner = shape_step(ctx, expr)
        if inner is None:
            break
        expr = strip_parens(inner)
    return expr, reads


def _per_class(ctx: "FileContext", value: cst.Call) -> Optional[cst.BaseExpression]:
    """The labels of `torch.bincount(labels, ...)` or `F.one_hot(labels, ...).sum(0)`."""
    if ctx.qualname(value.func) in _HISTOGRAMS and value.args:
        return value.args[0].value
    if isinstance(value.func, cst.Attribute) and value.func.attr.value == "bincount" and ctx.qualname(value.func) is None:
        return value.func.value
    total = match_call(ctx.imports, value, "sum")
    if total is None or not total.given("dim"):
        return None
    hot = strip_parens(ctx.resolve(total.input))
    if isinstance(hot, cst.Call) and isinstance(hot.func, cst.Attribute) and hot.func.attr.value in ("float", "long", "int"):
        hot = strip_parens(hot.func.value)
    if isinstance(hot, cst.Call) and ctx.qualname(hot.func) in _ONE_HOT and hot.args:
        return hot.args[0].value
    return None


def _at(ctx: "FileContext", read: cst.Subscript, labels: cst.BaseExpression) -> bool:
    """`counts[labels]`: an index that is the counted labels (or reads them)."""
    for element in read.slice:
        index = element.slice
        if isinstance(index, cst.Index) and (
            same_code(ctx, index.value, labels) or same_code(ctx, strip_parens(ctx.resolve(index.value)), labels)
        ):
            return True
    return False


def _cumulative(ctx: "FileContext", value: cst.Call) -> Optional[cst.BaseExpression]:
    """The input of `torch.cumsum(x, d)` / `x.cumsum(d)`."""
    match = match_call(ctx.imports, value, _CUMSUM)
    return match.input if match is not None else None


def _last(read: cst.Subscript) -> bool:
    """A subscript whose last element is `-1`: the last entry along the dim it reads."""
    index = read.slice[-1].slice
    return isinstance(index, cst.Index) and number_value(strip_parens(index.value)) == -1


def _attribute(ctx: "FileContext", attribute: cst.Attribute, judge: Judge) -> Optional[Counted]:
    """`self.num_pos` set from a count in another method of the class: every value it is set to
    outside `__init__` is a count, one with evidence (its initial value in `__init__` is state
    the first call replaces)."""
    sets = [(f, path) for f, path in assignments(ctx, attribute) if f.name.value != "__init__"]
    if not sets:
        return None
    why: Optional[str] = None
    for _, path in sets:
        value = path[-1]
        assert isinstance(value, cst.BaseExpression)
        with ctx.visiting(path):
            reason = judge(ctx, value)
        if reason is None:
            return None
        if why is None and reason[0] is not None:
            line = ctx.positions.get(value)
            why = f"{reason[0]} (set as `self.{attribute.attr.value}`{f' at line {line.start.line}' if line else ''})"
    return Counted("a count held in an attribute", why)


def _parameter(ctx: "FileContext", name: cst.Name, judge: Judge) -> Optional[Counted]:
    """A parameter that its callers in the project pass a count: one caller's evidence is
    enough, and the message names the call; a caller that passes a count with none, or
    anything else, leaves the parameter unknown."""
    binding = ctx.binding(name)
    if binding is None or not isinstance(binding.node, cst.Param) or is_constant(ctx, name):
        return None
    param = binding.node
    function = ctx.enclosing(cst.FunctionDef)
    if function is None:
        return None
    for caller in callers(ctx):
        arg = caller.argument(function, param)
        if arg is None:
            continue
        with caller.ctx.visiting(caller.path + (arg, arg.value)):
            reason = judge(caller.ctx, arg.value)
        if reason is not None and reason[0] is not None:
            return Counted(
                "a count passed as a parameter",
                f"{reason[0]}, passed as `{name.value}` to `{function.name.value}` by the call ({caller.where})",
            )
    return None
