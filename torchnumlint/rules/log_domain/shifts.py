"""The max subtracted before an exp: what makes a hand-written softmax or logsumexp stable.

`is_shifted(ctx, logits)`: the exp's input is `x - max(x)` (so its exp is at most 1), also
through names, under a positive scale (`(x - m) / t`, `r * (x - m)`), with the max reached:

- inline or through names: `x.max(d, keepdim=True).values`, `[0]`, `x.amax(d)`, a tuple unpack
  `m, _ = x.max(1, keepdim=True)`, `.detach()`, a `logsumexp`, a max pool (timm's LSE pools);
- through every assignment that may reach the name (`m = x.amax(1) if c else x.max(1)[0]`, one
  per branch of an `if`): each must be a max (`ways.every_way`);
- with its infinite entries replaced by a number, `torch.masked_fill(m, m.abs() == inf, 0)` or
  `torch.where(torch.isinf(m), 0, m)`: where the max is infinite the row holds an inf (or only
  -inf), whose exp is already the true inf (or 0), so the shift keeps every row exact (torch's
  `_refs.logsumexp`);
- through a function of the same file whose every `return` is a max
  (`_softmax_unbacked_safe_amax` in torch's decompositions), undecorated, not a generator.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import libcst as cst

from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.ways import every_way, ways
from torchnumlint.rules.log_domain.sites import resolved
from torchnumlint.rules.log_domain.unreached import non_finite
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.shapes import shape_step

# what a stable exp subtracts from its input (timm's generalised-mean pools subtract a max pool)
_SHIFTS = frozenset({"max", "amax", "logsumexp", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"})
_DEPTH = 8  # steps followed from the subtracted value to its max
_OPAQUE = (cst.FunctionDef, cst.ClassDef, cst.Lambda)  # their returns are not the helper's


def _unpacked_max(ctx, binding: Binding, depth: int) -> bool:
    """`m, _ = x.max(1, keepdim=True)`: the values of a max, bound by unpacking."""
    return binding.unpacked is not None and binding.unpacked[1] == 0 and is_max(ctx, binding.unpacked[0], depth - 1)


def _finite_fill(ctx, call: cst.Call) -> Optional[cst.BaseExpression]:
    """`m` for `torch.masked_fill(m, <m non-finite>, c)`, `m.masked_fill(...)` and
    `torch.where(<m non-finite>, c, m)` with a finite number `c`: the max with its infinite
    entries replaced."""
    qual = ctx.qualname(call.func)
    args = [a.value for a in call.args if a.keyword is None]
    if qual == "torch.masked_fill" and len(args) == 3:
        value, cond, fill = args
    elif qual is None and isinstance(call.func, cst.Attribute) and call.func.attr.value == "masked_fill" and len(args) == 2:
        value, (cond, fill) = call.func.value, args
    elif qual == "torch.where" and len(args) == 3:
        cond, fill, value = args
    else:
        return None
    number = number_value(strip_parens(fill))
    if number is None or not math.isfinite(number):
        return None
    return value if any(same_code(ctx, value, v) for v in non_finite(ctx, cond)) else None


def _module_function(ctx, func: cst.Name) -> Optional[cst.FunctionDef]:
    """The function of this file `func` calls: a module-level `def`, the one binding of its name
    (the scope tables bind defs too), undecorated (a decorator may change what it returns)."""
    binding = ctx.binding(func)
    node = binding.node if binding is not None else None
    if (
        not isinstance(node, cst.FunctionDef)
        or node.decorators
        or node.asynchronous is not None
        or not any(s is node for s in ctx.module.body)
    ):
        return None
    return node


def _returns(node: cst.CSTNode, path: tuple) -> Optional[List[tuple]]:
    """The paths to the `return`s of a function body (not of nested functions); None where it
    yields."""
    found: List[tuple] = []
    for child in node.children:
        if isinstance(child, _OPAQUE):
            continue
        here = path + (child,)
        if isinstance(child, cst.Yield):
            return None
        if isinstance(child, cst.Return):
            found.append(here)
            continue
        inner = _returns(child, here)
        if inner is None:
            return None
        found += inner
    return found


def _max_helper(ctx, func: cst.BaseExpression, depth: int) -> bool:
    """`func` names a function of this file whose every `return` gives a max."""
    function = _module_function(ctx, func) if isinstance(func, cst.Name) else None
    if function is None:
        return False
    known: Dict[int, bool] = ctx.per_file("log_domain.max helpers", lambda _: {})
    if id(function) not in known:
        known[id(function)] = False  # a helper that calls itself proves nothing by that call
        paths = _returns(function, (ctx.module, function))
        known[id(function)] = bool(paths) and all(_returns_max(ctx, path, depth) for path in paths)  # type: ignore[union-attr]  # `bool(paths)` has ruled out None
    return known[id(function)]


def _returns_max(ctx, path: tuple, depth: int) -> bool:
    value = path[-1].value
    if value is None:
        return False
    with ctx.visiting(path + (value,)):
        return is_max(ctx, value, depth - 1)


def is_max(ctx, expr: cst.BaseExpression, depth: int = _DEPTH) -> bool:
    """`expr` is a max (or a logsumexp) of some value: `x.max(d, keepdim=True)[0]`, `.values`,
    `x.amax(d)`, `torch.max(x, d, keepdim=True)`, `m.detach()`, through every assignment of a
    name, a same-file helper, or with its infinite entries filled."""
    expr = strip_parens(expr)
    if depth <= 0:
        return False
    if ways(ctx, expr) is not None:
        return every_way(
            ctx,
            expr,
            "log_domain.is_max",
            lambda value: isinstance(value, cst.BaseExpression) and ways(ctx, value) is None and is_max(ctx, value, depth - 1),
            decided=lambda binding: _unpacked_max(ctx, binding, depth),
        )
    if isinstance(expr, cst.Call):
        func = expr.func
        qual = ctx.qualname(func)
        filled = _finite_fill(ctx, expr)
        if filled is not None:
            return is_max(ctx, filled, depth - 1)
        if qual is not None:
            return qual.rsplit(".", 1)[-1] in _SHIFTS and qual.startswith("torch.")
        if isinstance(func, cst.Attribute) and func.attr.value in _SHIFTS:
            return not ctx.imports.is_module_ref(func.value)
        if _max_helper(ctx, func, depth):
            return True
    value = expr.value if isinstance(expr, cst.Attribute) and expr.attr.value == "values" else shape_step(ctx, expr)
    return value is not None and is_max(ctx, value, depth - 1)


def is_shifted(ctx, logits: cst.BaseExpression) -> bool:
    """The exp's input has the max subtracted: `x - x.max(d, keepdim=True).values`, also through
    names (`z = x - m`) and under a positive scale (`(x - m) / t`, `r * (x - m)`). Exp of it is
    at most 1."""
    value = resolved(ctx, logits)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract):
        return is_max(ctx, value.right)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
        return is_shifted(ctx, value.left)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return is_shifted(ctx, value.left) or is_shifted(ctx, value.right)
    return False
