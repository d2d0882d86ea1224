"""What kind of number a value is, through every way it may hold: a plain Python number
(`is_python_number`), a constant (`is_constant`), strictly positive (`is_positive`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Dict, Set

import libcst as cst

from torchnumlint.rules.calls import match_call
from torchnumlint.rules.syntax import number_value, unwrap_casts
from torchnumlint.rules.ways import every_way, ways

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


_BUILTIN_NUMBERS = {"len", "int", "float", "round", "abs", "min", "max", "sum", "pow", "divmod"}


_SHAPE_METHODS = {"size", "numel", "dim", "nelement", "item", "__len__", "count"}


_SHAPE_ATTRS = {"shape", "ndim"}


_NON_TORCH_MODULES = ("math.", "numpy.", "np.", "random.", "statistics.")


# Python floats, never tensors. inf counts here only: it is a number, but no guard (is_eps_like).
_NUMBER_CONSTANTS = {f"{m}.{c}" for m in ("math", "torch", "numpy") for c in ("pi", "e", "tau", "inf")}


_POSITIVE = ("exp", "softmax", "sigmoid", "softplus")


_TENSOR_OF = ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor")


def is_python_number(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A plain Python number: literals, `len(...)`, shapes and sizes, `math.*`, and arithmetic of
    those, on every way the value comes. Division by or sqrt of these never makes a NaN gradient."""
    return every_way(ctx, expr, "python", lambda value: _python_number(ctx, value))


def _python_number(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    if number_value(expr) is not None:
        return True
    if isinstance(expr, cst.BinaryOperation):
        return is_python_number(ctx, expr.left) and is_python_number(ctx, expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return is_python_number(ctx, expr.expression)
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value in _SHAPE_ATTRS
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _SHAPE_ATTRS or ctx.qualname(expr) in _NUMBER_CONSTANTS
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


def python_number_tree(node: ast.expr, modules: Dict[str, Set[str]]) -> bool:
    """`_python_number` on CPython's tree, for an expression in which no name's value is asked
    (`every_way` follows a name's or `self.attr`'s assignments): numeric literals and their
    arithmetic, `x.shape[i]`, `len(...)` and `_BUILTIN_NUMBERS` by a name no import binds,
    `x.size(d)` and `_SHAPE_METHODS` of a value no import names (no qualname), and calls of an
    attribute of `math`, `numpy`, `random` or `statistics`. `modules`: each name the code's imports
    bind, with every module or object they bind it to (two: ambiguous, no qualname)."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.UnaryOp):
        return python_number_tree(node.operand, modules)
    if isinstance(node, ast.BinOp):
        return python_number_tree(node.left, modules) and python_number_tree(node.right, modules)
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr in _SHAPE_ATTRS
    if not isinstance(node, ast.Call):
        return False
    root = node.func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):  # `x.view(-1).size(0)`: no qualname
        return isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_METHODS
    targets = modules.get(root.id)
    if targets is None:  # no import binds it: no qualname but torch's
        if root.id == "torch":
            return False
        return node.func.attr in _SHAPE_METHODS if isinstance(node.func, ast.Attribute) else root.id in _BUILTIN_NUMBERS
    return isinstance(node.func, ast.Attribute) and len(targets) == 1 and f"{next(iter(targets))}.".startswith(_NON_TORCH_MODULES)


def is_constant(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A Python number, or a tensor made of one (`torch.tensor(d_k)`, through casts): the same
    value on every call, so never the 0 of an empty or constant row. Every way must be one."""
    return every_way(ctx, expr, "constant", lambda value: _constant(ctx, value))


def _constant(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    if is_python_number(ctx, expr):
        return True
    inner = unwrap_casts(ctx, expr, names=False)
    if ways(ctx, inner) is not None:
        return is_constant(ctx, inner)
    if isinstance(inner, cst.Call) and ctx.qualname(inner.func) in _TENSOR_OF:
        return bool(inner.args) and is_python_number(ctx, inner.args[0].value)
    return False


def is_positive(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """exp / softmax / sigmoid / softplus (through casts): never negative, and 0 only by
    underflow, which is the log-domain rules' hazard, not a guard's. Every way must be one."""
    return every_way(ctx, expr, "positive", lambda value: _positive(ctx, value))


def _positive(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    inner = unwrap_casts(ctx, expr, names=False)
    if ways(ctx, inner) is not None:
        return is_positive(ctx, inner)
    return match_call(ctx.imports, inner, *_POSITIVE) is not None
