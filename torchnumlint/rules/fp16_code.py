"""Where the code being visited runs in float16, and which values are float16 there: the evidence
every mixed-precision rule on LibCST nodes needs before it reports (TNL303, TNL305, TNL308).

Code runs in float16 when, going out from the node:

- a `with` of an fp16 autocast encloses it in its function (`with torch.autocast("cuda"):`), or
  the function is decorated with one;
- or the project index (`torchnumlint/index.py`) says an fp16 region reaches the enclosing
  function through the call graph (a training loop under autocast calling `model(x)`, a model
  built by a project builder, a `.half()` model): the finding cites that region.

An island on the way out (a `with` or decorator whose autocast is not float16: disabled,
bfloat16, CPU) ends the search with no evidence: what runs there is float32 or bfloat16.
The index's `Site` says where the region is; `region_text` is how every finding says it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.amp import fp16_openers, opens_island, submodule_output

if TYPE_CHECKING:
    from torchnumlint.context import FileContext
    from torchnumlint.index import Site


@dataclass(frozen=True)
class Fp16Reach:
    """Why the visited code runs in float16: `text` is what a finding says (the region, where it
    is, whether only a flag turns it on, and the builder it reaches through)."""

    text: str


MATMUL_FUNCS = frozenset({"torch.matmul", "torch.bmm", "torch.einsum"})
MATMUL_METHODS = frozenset({"matmul", "bmm"})


class Product:
    """A matrix product `a @ b` / `torch.matmul(a, b)` / `torch.bmm(a, b)` / `a.matmul(b)` /
    `torch.einsum(eq, a, b)`: `first` is the operand a scale can move onto."""

    def __init__(self, node: cst.BaseExpression, first: cst.BaseExpression, second: cst.BaseExpression) -> None:
        self.node = node
        self.first = first
        self.second = second
        # `torch.matmul(a, b)`, `torch.einsum(eq, a, b)`: `a` is an argument, not an operand
        self.as_argument = isinstance(node, cst.Call) and not (isinstance(node.func, cst.Attribute) and node.func.value is first)

    def with_first(self, first: cst.BaseExpression) -> cst.BaseExpression:
        node = self.node
        if isinstance(node, cst.BinaryOperation):
            return node.with_changes(left=first)
        assert isinstance(node, cst.Call)
        if isinstance(node.func, cst.Attribute) and node.func.value is self.first:  # a.matmul(b)
            return node.with_changes(func=node.func.with_changes(value=first))
        args = [arg.with_changes(value=first) if arg.value is self.first else arg for arg in node.args]
        return node.with_changes(args=args)


def product_of(ctx, expr: cst.BaseExpression) -> Optional[Product]:
    """The matrix product `expr` is, if it is one of two operands."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
        return Product(expr, expr.left, expr.right)
    if not isinstance(expr, cst.Call) or any(arg.star or arg.keyword for arg in expr.args):
        return None
    values = [arg.value for arg in expr.args]
    qual = ctx.qualname(expr.func)
    if qual == "torch.einsum" and len(values) == 3 and isinstance(values[0], cst.SimpleString):
        return Product(expr, values[1], values[2])
    if qual in MATMUL_FUNCS and len(values) == 2:
        return Product(expr, values[0], values[1])
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in MATMUL_METHODS and len(values) == 1 and qual is None:
        return Product(expr, func.value, values[0])
    return None


def region_text(site: "Site") -> str:
    """Where a finding's fp16 comes from: the region (and the framework setting, `Site.what`),
    whether only a flag turns it on, and the builder that carries it to the code (`Site.via`)."""
    text = site.where + (f", {site.what}" if site.what else "")
    if site.opt_in:
        text += ", if its precision setting is fp16" if site.what else ", enabled only by its `enabled=` flag"
    return text + (f", {site.via}" if site.via else "")


def fp16_reach(ctx: "FileContext") -> Optional[Fp16Reach]:
    """The fp16 region the node being visited runs in, innermost first; None when none is known or
    an island (a non-float16 autocast) encloses it first."""
    positions = None
    for node in reversed(ctx.stack):
        if not isinstance(node, (cst.With, cst.FunctionDef)):
            continue
        if opens_island(ctx, node):
            return None
        openers = fp16_openers(ctx, node)
        if openers:
            expr, (_, opt_in) = openers[0]
            positions = positions or ctx.positions
            line = positions[expr].start.line
            flag = ", enabled only by its `enabled=` flag" if opt_in else ""
            return Fp16Reach(f"{ctx.path}:{line}{flag}")
        if isinstance(node, cst.FunctionDef) and ctx.index is not None:
            positions = positions or ctx.positions
            key = f"{ctx.path}:{positions[node.name].start.line}:{node.name.value}"
            site = ctx.index.reached.get(key)
            if site is not None:
                return Fp16Reach(region_text(site))
    return None


# Methods that keep their receiver's dtype (and values, or a selection or arrangement of them).
_KEEPS_DTYPE = frozenset(
    {
        "view",
        "reshape",
        "permute",
        "transpose",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "flatten",
        "clone",
        "masked_fill",
        "masked_fill_",
        "expand",
        "expand_as",
        "repeat",
        "narrow",
        "chunk",
        "split",
        "unbind",
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "relu",
        "abs",
        "tanh",
        "sigmoid",
        "amax",
        "amin",
        "mean",
    }
)
_FP16_LAYERS_FUNCS = frozenset(
    {
        "torch.nn.functional.linear",
        "torch.nn.functional.conv1d",
        "torch.nn.functional.conv2d",
        "torch.nn.functional.conv3d",
        "torch.addmm",
        "torch.baddbmm",
    }
)
_FP32_CASTS = frozenset({"float", "double"})
_DEPTH = 8


def fp16_value(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> Optional[str]:
    """Why `expr` is a float16 tensor where it is read in an fp16 region, or None when that is not
    known: it comes (through names, reshapes, masks and arithmetic with numbers) from an op CUDA
    autocast runs in float16 (a matmul, `F.linear`, a convolution, a submodule of such a layer,
    `rules/module_outputs.py`) or from an explicit `.half()` / `.to(torch.float16)`; a `.float()`
    on the way makes it float32."""
    if depth > _DEPTH:
        return None
    if isinstance(expr, cst.Name):
        binding = ctx.binding(expr)
        if binding is None or binding.value is None:
            # changed in place (`scores.masked_fill_(...)`, which keeps its dtype): what it was bound to
            before = [b for b in ctx.bindings_before(expr) if not (b.value is None and isinstance(b.node, cst.Call))]
            binding = before[0] if len(before) == 1 else None
        return fp16_value(ctx, binding.value, depth + 1) if binding is not None and binding.value is not None else None
    if product_of(ctx, expr) is not None:
        return "a matmul, which CUDA autocast runs in float16"
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        return fp16_value(ctx, expr.left, depth + 1) or fp16_value(ctx, expr.right, depth + 1)
    if isinstance(expr, cst.UnaryOperation):
        return fp16_value(ctx, expr.expression, depth + 1)
    if isinstance(expr, cst.Subscript):
        return fp16_value(ctx, expr.value, depth + 1)
    if not isinstance(expr, cst.Call):
        return None
    qual = ctx.qualname(expr.func)
    if qual in _FP16_LAYERS_FUNCS:
        return f"`{qual.rsplit('.', 1)[-1]}`, which CUDA autocast runs in float16"
    func = expr.func
    if not isinstance(func, cst.Attribute) or qual is not None:
        return None
    method = func.attr.value
    if method in _FP32_CASTS:
        return None
    if method == "half" or (method == "to" and any(ctx.qualname(a.value) in ("torch.float16", "torch.half") for a in expr.args)):
        return "an explicit cast to float16"
    kind = submodule_output(ctx, expr)
    if kind == "fp16":
        return f"`{ctx.module.code_for_node(func)}`, a layer CUDA autocast runs in float16"
    if kind == "keep" and expr.args:
        return fp16_value(ctx, expr.args[0].value, depth + 1)
    if method in _KEEPS_DTYPE:
        return fp16_value(ctx, func.value, depth + 1)
    return None
