"""Attention scores, as TNL308 reads them: whether a value reaches a softmax, whether the operands
of a product are normalised (cosine attention, bounded by 1), and whether a scale is a plain
Python number (then moving it onto the first operand gives the same product for every value).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Sequence

import libcst as cst

from torchnumlint.rules.bindings import all_params
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.uses import reads_of

if TYPE_CHECKING:
    from torchnumlint.context import FileContext

# Steps between the scores and their softmax that keep an Inf an Inf (or NaN): a mask, a bias, a
# cast, a reshape, a dropout of the scores.
_KEEPING_METHODS = frozenset(
    {
        "masked_fill",
        "masked_fill_",
        "float",
        "to",
        "type_as",
        "view",
        "reshape",
        "permute",
        "transpose",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "flatten",
        "clone",
        "add",
        "add_",
        "sub",
        "mul",
        "div",
    }
)
_FOLLOW = 3  # names followed forward: `attn = ...`, `attn = attn + bias`, `attn = attn.masked_fill(...)`
_SOFTMAX_LAYERS = frozenset({"torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.modules.activation.Softmax"})
_NUMBER_CALLS = frozenset({"len", "int", "float", "abs", "min", "max", "round"})
_NUMBER_METHODS = frozenset({"size", "dim", "numel", "item"})


def feeds_softmax(ctx: "FileContext", node: cst.CSTNode) -> bool:
    """Whether the value of `node` (being visited) reaches a softmax or log-softmax: as its input,
    through steps that keep an Inf (a mask, a bias, a cast, a reshape), or through the names it is
    bound to, followed forward."""
    return _reaches(ctx, tuple(ctx.stack), 0)


def _reaches(ctx: "FileContext", path: Sequence[cst.CSTNode], depth: int) -> bool:
    i = len(path) - 1
    while i > 0:
        child, parent = path[i], path[i - 1]
        if isinstance(parent, (cst.Arg, cst.Subscript, cst.SubscriptElement, cst.Index)):
            i -= 1
            continue
        if isinstance(parent, cst.BinaryOperation) and not isinstance(parent.operator, cst.MatrixMultiply):
            i -= 1
            continue
        call = path[i - 2] if i >= 2 else None
        if isinstance(parent, cst.Attribute) and parent.value is child and isinstance(call, cst.Call):
            if _is_softmax(ctx, call) or parent.attr.value not in _KEEPING_METHODS:
                return _is_softmax(ctx, call)
            i -= 2
            continue
        if isinstance(parent, cst.Call):
            return _is_softmax(ctx, parent) or (_keeps(ctx, parent) and _reaches(ctx, path[:i], depth))
        if isinstance(parent, cst.Assign) and depth < _FOLLOW and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Name):
                reads = reads_of(ctx, target) or []
                return any(_reaches(ctx, read, depth + 1) for read in reads)
        return False
    return False


def _keeps(ctx: "FileContext", call: cst.Call) -> bool:
    """`torch.where(m, s, fill)`, `s.masked_fill(...)` in function form, a dropout: keeps the values."""
    qual = ctx.qualname(call.func) or ""
    return qual in ("torch.where", "torch.masked_fill") or qual.endswith("dropout")


def _is_softmax(ctx: "FileContext", call: cst.Call) -> bool:
    """A softmax or log-softmax call (`F.softmax(s, -1)`, `s.softmax(-1)`, `self.softmax(s)` of an
    `nn.Softmax` attribute); the value reaches it as an argument or its receiver."""
    if match_call(ctx.imports, call, "softmax", "log_softmax") is not None:
        return True
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        binding = ctx.binding(func)  # `self.softmax = nn.Softmax(dim=-1)`
        bound = binding.value if binding is not None else None
        return isinstance(bound, cst.Call) and ctx.qualname(bound.func) in _SOFTMAX_LAYERS
    return False


def normalised(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Every way `expr` comes is `F.normalize(...)` or `x / x.norm(...)`: its rows have norm 1."""
    origins = ctx.origins(expr)
    return bool(origins) and all(_unit(ctx, o) for o in origins)


def _unit(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    if match_call(ctx.imports, expr, "normalize") is not None:
        return True
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Divide)
        and match_call(ctx.imports, expr.right, "norm", "linalg_norm", "vector_norm") is not None
    )


def scale_value(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> Optional[float]:
    """The value of a scale written with literals (`0.125`, `64 ** -0.5`, `math.sqrt(64)`), through
    names bound once; None when it is not known."""
    if depth > 6:
        return None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = scale_value(ctx, expr.expression, depth + 1)
        return -inner if inner is not None else None
    if isinstance(expr, cst.BinaryOperation):
        left, right = scale_value(ctx, expr.left, depth + 1), scale_value(ctx, expr.right, depth + 1)
        if left is None or right is None:
            return None
        try:
            if isinstance(expr.operator, cst.Power):
                return float(left**right)
            if isinstance(expr.operator, cst.Multiply):
                return left * right
            if isinstance(expr.operator, cst.Divide) and right:
                return left / right
        except (OverflowError, ZeroDivisionError, TypeError):
            return None
        return None
    if isinstance(expr, cst.Call) and ctx.qualname(expr.func) == "math.sqrt" and len(expr.args) == 1:
        inner = scale_value(ctx, expr.args[0].value, depth + 1)
        return math.sqrt(inner) if inner is not None and inner >= 0 else None
    if isinstance(expr, cst.Name):
        binding = ctx.binding(expr)
        if binding is not None and binding.value is not None:
            return scale_value(ctx, binding.value, depth + 1)
    return None


def plain_number(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `expr` is surely a Python number, not a tensor: a literal, a size (`x.shape[-1]`,
    `x.size(-1)`, `len(...)`), a `math` function, arithmetic of those, a name bound once to one
    or a parameter that says it is one (`d: int`, `scale=0.125`), or a `self.` attribute
    computed in `__init__` as arithmetic of names and numbers (`self.scale = head_dim ** -0.5`)."""
    if depth > 6:
        return False
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return plain_number(ctx, expr.expression, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        return plain_number(ctx, expr.left, depth + 1) and plain_number(ctx, expr.right, depth + 1)
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"
    if isinstance(expr, cst.Attribute) and expr.attr.value == "ndim":
        return True
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func) or ""
        if qual.startswith("math.") or (isinstance(expr.func, cst.Name) and expr.func.value in _NUMBER_CALLS):
            return all(plain_number(ctx, a.value, depth + 1) or _size_like(a.value) for a in expr.args)
        return isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _NUMBER_METHODS and qual == ""
    if isinstance(expr, cst.Name):
        binding = ctx.binding(expr)
        if binding is not None and binding.value is not None:
            return plain_number(ctx, binding.value, depth + 1)
        return _number_param(ctx, expr.value)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        binding = ctx.binding(expr)
        value = binding.value if binding is not None else None
        return value is not None and _init_arithmetic(ctx, value)
    return False


def _size_like(expr: cst.BaseExpression) -> bool:
    """A bare name or attribute passed to a `math` function (`math.sqrt(self.head_dim)`): math
    functions take numbers only, so whatever it is, the result is a Python float."""
    return isinstance(expr, (cst.Name, cst.Attribute))


def _number_param(ctx: "FileContext", name: str) -> bool:
    """A parameter of the enclosing function annotated `int`/`float`, or defaulting to a number."""
    func = ctx.enclosing(cst.FunctionDef)
    if not isinstance(func, cst.FunctionDef):
        return False
    for param in all_params(func.params):
        if param.name.value != name:
            continue
        annotation = param.annotation.annotation if param.annotation is not None else None
        if isinstance(annotation, cst.Name) and annotation.value in ("int", "float"):
            return True
        return isinstance(param.default, (cst.Integer, cst.Float))
    return False


def _init_arithmetic(ctx: "FileContext", value: cst.BaseExpression) -> bool:
    """`head_dim ** -0.5`, `qk_scale or head_dim ** -0.5`, `math.sqrt(d)`, `1 / math.sqrt(d)`:
    arithmetic of names and numbers with an operator or a `math` call, no torch call in it."""
    if isinstance(value, cst.BooleanOperation):
        return _init_arithmetic(ctx, value.right) and _leaf(ctx, value.left)
    if isinstance(value, cst.UnaryOperation):
        return _leaf(ctx, value.expression) or _init_arithmetic(ctx, value.expression)
    if isinstance(value, cst.BinaryOperation):
        return all(_leaf(ctx, side) or _init_arithmetic(ctx, side) for side in (value.left, value.right))
    if isinstance(value, cst.Call):
        return (ctx.qualname(value.func) or "").startswith("math.")
    return isinstance(value, (cst.Integer, cst.Float))


def _leaf(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Attribute):
        return isinstance(expr.value, cst.Name) and expr.value.value == "self"
    return isinstance(expr, cst.Call) and (ctx.qualname(expr.func) or "").startswith("math.")
