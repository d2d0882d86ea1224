"""Tensor exponents that lie in (0, 1): `x ** self.p` with a learned `p`, `torch.pow(d, g)` with
`g` a sigmoid. Such a power is a root: its derivative in the base, p * x ** (p - 1), is infinite
at x = 0, as for `x ** 0.5`.

Measured on torch 2.13 CPU (x = [0, 1], p = 0.25, 0.5, 0.75): d/dx is [inf, p] whether p is a
Python float, a tensor or an `nn.Parameter`; d/dp is 0.0 at x = 0 (PyTorch masks the 0 ** p *
log 0 term), so the exponent's own gradient adds no NaN. For p = 1 or 2 d/dx is finite. So a
tensor exponent is a fractional power exactly when its value is in (0, 1), which the code shows
by construction:

- a sigmoid of anything (`torch.sigmoid(self.a)`, `g.sigmoid()`);
- a learned exponent the class creates at a value in (0, 1): `nn.Parameter(torch.tensor(0.5))`,
  `torch.full(shape, 0.3)`, `torch.ones(c) * 0.5` (training moves it, but it starts there, and
  the first step's gradient is the one that turns Inf).

An exponent that starts at 1 or above (GeM pooling's `p = 3`) is no root, and an unknown tensor
is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.attributes import assignments, on_self
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.syntax import number_value, strip_parens

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_TABLES = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor"})
_FULL = frozenset({"torch.full"})
_ONES = frozenset({"torch.ones", "torch.ones_like"})


def fractional_exponent(ctx: "FileContext", exponent: Optional[cst.BaseExpression]) -> bool:
    """Whether the tensor `exponent` is in (0, 1) by construction (a sigmoid, or a learned
    exponent created there)."""
    if exponent is None:
        return False
    value = strip_parens(ctx.resolve(exponent))
    if match_call(ctx.imports, value, "sigmoid") is not None or _starts_fractional(ctx, value):
        return True  # a sigmoid, or `self.p` followed to its one assignment in `__init__`
    if not on_self(value):
        return False
    assert isinstance(value, cst.Attribute)
    created = [path[-1] for function, path in assignments(ctx, value) if function.name.value == "__init__"]
    return bool(created) and all(isinstance(v, cst.BaseExpression) and _starts_fractional(ctx, v) for v in created)


def _starts_fractional(ctx: "FileContext", created: cst.BaseExpression) -> bool:
    """`nn.Parameter(init)` whose every entry starts in (0, 1)."""
    created = strip_parens(created)
    if not (isinstance(created, cst.Call) and ctx.qualname(created.func) in _PARAMETERS and created.args):
        return False
    start = _initial(ctx, strip_parens(created.args[0].value))
    return start is not None and 0 < start < 1


def _initial(ctx: "FileContext", init: cst.BaseExpression) -> Optional[float]:
    """The one value every entry of `init` starts at: `torch.tensor(0.5)`, `torch.tensor([0.5])`,
    `torch.full(shape, 0.5)`, `torch.ones(c) * 0.5`; None when unknown or mixed."""
    if isinstance(init, cst.BinaryOperation) and isinstance(init.operator, cst.Multiply):
        for ones, factor in ((init.left, init.right), (init.right, init.left)):
            ones = strip_parens(ones)
            if isinstance(ones, cst.Call) and ctx.qualname(ones.func) in _ONES:
                return number_value(strip_parens(factor))
        return None
    if not isinstance(init, cst.Call) or not init.args:
        return None
    qual = ctx.qualname(init.func)
    if qual in _FULL and len(init.args) >= 2:
        return number_value(strip_parens(init.args[1].value))
    if qual in _TABLES:
        table = strip_parens(init.args[0].value)
        entries = [strip_parens(e.value) for e in table.elements] if isinstance(table, (cst.List, cst.Tuple)) else [table]
        values = {number_value(e) for e in entries}
        return values.pop() if len(values) == 1 else None
    return None
