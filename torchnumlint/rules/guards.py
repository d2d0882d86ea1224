"""Shared questions about values: is it a softmax, is it guarded, is it a plain Python number,
does it carry a gradient. Every rule asks these the same way, so they are answered once, here.

All functions follow names to their single assignment (`FileContext.resolve`) before looking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.names import CallMatch, match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.engine import FileContext

_EPS_WORDS = ("eps", "epsilon", "tiny", "smooth")
_BUILTIN_NUMBERS = {"len", "int", "float", "round", "abs", "min", "max", "sum", "pow", "divmod"}
_SHAPE_METHODS = {"size", "numel", "dim", "nelement", "item", "__len__", "count"}
_SHAPE_ATTRS = {"shape", "ndim"}
_NON_TORCH_MODULES = ("math.", "numpy.", "np.", "random.", "statistics.")


def strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    """LibCST keeps parentheses on the node itself; this is the same node without them."""
    if getattr(expr, "lpar", None):
        return expr.with_changes(lpar=[], rpar=[])
    return expr


def number_value(expr: cst.BaseExpression) -> Optional[float]:
    """The value of a numeric literal (with an optional unary minus), else None."""
    sign = 1.0
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        sign = -1.0 if isinstance(expr.operator, cst.Minus) else 1.0
        expr = expr.expression
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return sign * float(expr.evaluated_value)
        except (ValueError, OverflowError):  # pragma: no cover - literal forms always evaluate
            return None
    return None


def _last_identifier(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def is_eps_like(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A small positive guard: `eps`, `self.eps`, `1e-8`, `torch.finfo(x.dtype).tiny`, `tensor(eps)`."""
    expr = ctx.resolve(expr)
    value = number_value(expr)
    if value is not None:
        return value > 0
    ident = _last_identifier(expr)
    if ident is not None and any(word in ident.lower() for word in _EPS_WORDS):
        return True
    if isinstance(expr, cst.Call):
        if expr.args and ctx.qualname(expr.func) in ("torch.tensor", "torch.as_tensor", "torch.full_like"):
            return any(is_eps_like(ctx, a.value) for a in expr.args)
        ident = _last_identifier(expr.func)
        return ident is not None and "eps" in ident.lower()
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return is_eps_like(ctx, expr.left) or is_eps_like(ctx, expr.right)
    return False


def is_guarded(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Kept away from 0 (or from its domain's edge): `+ eps`, `clamp(min=)`, `clamp_min`,
    `torch.maximum(d, eps)`, `max(d, eps)`, `torch.where(...)`, `masked_fill`, `torch.finfo`."""
    expr = ctx.resolve(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return is_eps_like(ctx, expr.left) or is_eps_like(ctx, expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)):
        # guarded * anything-nonzero is still guarded only when both sides are; stay simple
        return is_guarded(ctx, expr.left) and is_guarded(ctx, expr.right)
    clamp = match_call(ctx.imports, expr, "clamp", "clip", "clamp_", "clamp_min", "clamp_min_")
    if clamp is not None:
        low = clamp.arg("min")
        return low is not None and not (isinstance(low, cst.Name) and low.value == "None")
    if match_call(ctx.imports, expr, "maximum") is not None:
        return True
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        if qual in ("torch.where", "torch.nan_to_num") or _last_identifier(expr.func) in ("masked_fill", "nan_to_num"):
            return True
        if isinstance(expr.func, cst.Name) and expr.func.value == "max" and qual is None:
            return any(is_eps_like(ctx, a.value) for a in expr.args)
        if qual == "torch.max" and len(expr.args) == 2:
            return is_eps_like(ctx, expr.args[1].value) or is_eps_like(ctx, expr.args[0].value)
    return _mentions_finfo(expr)


def _mentions_finfo(expr: cst.CSTNode) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if node.attr.value == "finfo":
                found.append(node)
            return not found

        def visit_Name(self, node: cst.Name) -> bool:
            if node.value == "finfo":
                found.append(node)
            return False

    expr.visit(_Find())
    return bool(found)


def is_python_number(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A plain Python number: literals, `len(...)`, shapes and sizes, `math.*`, and arithmetic of
    those. Division by or sqrt of these never makes a NaN gradient."""
    expr = ctx.resolve(expr)
    if number_value(expr) is not None:
        return True
    if isinstance(expr, cst.BinaryOperation):
        return is_python_number(ctx, expr.left) and is_python_number(ctx, expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return is_python_number(ctx, expr.expression)
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value in _SHAPE_ATTRS
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _SHAPE_ATTRS
    if isinstance(expr, cst.Call):
        func = expr.func
        qual = ctx.qualname(func)
        if qual is not None:
            return qual.startswith(_NON_TORCH_MODULES)
        if isinstance(func, cst.Name):
            return func.value in _BUILTIN_NUMBERS
        if isinstance(func, cst.Attribute):
            return func.attr.value in _SHAPE_METHODS
    return False


def softmax_call(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """`expr` (or what it was assigned) as a softmax call, in any alias or the method form."""
    return match_call(ctx.imports, ctx.resolve(expr), "softmax")


def is_detached(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """No gradient flows back through `expr`: it is `.detach()`ed, or was computed under
    `torch.no_grad()` in this function; for a call, so is its tensor input."""
    for _ in range(8):
        binding = ctx.binding(expr)
        if binding is not None:
            if binding.no_grad:
                return True
            if binding.value is None:
                return False
            expr = binding.value
            continue
        if match_call(ctx.imports, expr, "detach") is not None:
            return True
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ("detach", "detach_", "data"):
                return True
            if ctx.imports.is_module_ref(expr.func.value):
                # function form: look at the tensor input (first argument)
                if not expr.args:
                    return False
                expr = expr.args[0].value
            else:
                expr = expr.func.value  # method form: the receiver
            continue
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return True
        if isinstance(expr, cst.BinaryOperation):  # `t / T`: detached when every tensor side is
            sides = [s for s in (expr.left, expr.right) if not is_python_number(ctx, s)]
            return bool(sides) and all(is_detached(ctx, s) for s in sides)
        return False
    return False


def module_call(ctx: "FileContext", call: cst.Call, *classes: str) -> Optional[cst.Call]:
    """For `nn.KLDivLoss(...)(a, b)`, `crit(a, b)` or `self.crit(a, b)` where the callee was built
    from one of `classes` (qualified names), the constructor call; else None."""
    func = call.func
    ctor = func if isinstance(func, cst.Call) else ctx.resolve(func)
    if isinstance(ctor, cst.Call) and ctx.qualname(ctor.func) in classes:
        return ctor
    return None
