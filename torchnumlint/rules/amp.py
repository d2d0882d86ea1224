"""Mixed-precision questions on LibCST nodes, for any rule: what a call's shape is, whether an
expression is an fp16 autocast, which `with` items or decorators open fp16 regions, where a class
and its methods are.

The meaning of a call lives in `rules/autocast.py` (the vocabulary the `ast` project index reads
too); this module only turns LibCST nodes into the plain values it reads, so a rule and the index
cannot disagree about what an autocast, a scaler or a custom_fwd is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules.autocast import CallShape, Dotted, classify_autocast, is_other_autocast, source_value, with_partial
from torchnumlint.rules.autocast import call_shape as shape_of
from torchnumlint.rules.module_outputs import layer_output
from torchnumlint.walk import Visitor

if TYPE_CHECKING:
    from torchnumlint.context import FileContext


def _value(ctx: "FileContext", expr: cst.BaseExpression) -> object:
    """An argument in the vocabulary of `rules/autocast.py`."""
    if isinstance(expr, (cst.Name, cst.Attribute)):
        qual = ctx.qualname(expr)
        if qual is not None:
            return Dotted(qual)
    return source_value(ctx.module.code_for_node(expr), None)


def call_shape(ctx: "FileContext", call: cst.Call) -> CallShape:
    """The call as `rules/autocast.py` reads it: qualified callee, positional and keyword values
    (`torch.autocast("cuda", dtype=torch.float16)` gives `("torch.autocast", ("cuda",),
    {"dtype": Dotted("torch.float16")})`), as the project index reads the same call."""
    arguments = [(arg.keyword.value if arg.keyword else None, arg.star or "", _value(ctx, arg.value)) for arg in call.args]
    return shape_of(ctx.qualname(call.func), arguments)


def fp16_autocast(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Tuple[str, bool]]:
    """(device, opt_in) of an fp16 autocast used as a `with` item or decorator, else None: a call
    (`torch.autocast("cuda")`), a name bound to one (`amp = torch.autocast(...)`; `with amp:`),
    or a call of `functools.partial(torch.autocast, ...)`, as the index reads them. `opt_in`:
    only an `enabled=` flag turns it on."""
    if isinstance(expr, cst.Name):
        expr = ctx.resolve(expr)
    if not isinstance(expr, cst.Call):
        return None
    partial = None
    if isinstance(expr.func, cst.Name):
        bound = ctx.resolve(expr.func)
        partial = call_shape(ctx, bound) if isinstance(bound, cst.Call) else None
    return classify_autocast(with_partial(call_shape(ctx, expr), partial))


def opens_island(ctx: "FileContext", node: cst.CSTNode) -> bool:
    """Whether `node` is a `with` (or a function decorated with) an autocast that is not float16
    (disabled, bfloat16, CPU): what runs in it is no float16 business, as the index reads it."""
    if isinstance(node, cst.With):
        exprs = [item.item for item in node.items]
    elif isinstance(node, cst.FunctionDef):
        exprs = [deco.decorator for deco in node.decorators]
    else:
        return False
    return any(isinstance(e, cst.Call) and is_other_autocast(call_shape(ctx, e)) for e in exprs)


def fp16_openers(ctx: "FileContext", node: cst.CSTNode) -> List[Tuple[cst.BaseExpression, Tuple[str, bool]]]:
    """What makes the body of `node` an fp16 region: for a `with`, its fp16 autocast items; for a
    function, its fp16 autocast decorators (`@torch.autocast("cuda")`); each with its (device,
    opt_in). Empty for anything else."""
    if isinstance(node, cst.With):
        exprs = [item.item for item in node.items]
    elif isinstance(node, cst.FunctionDef):
        exprs = [deco.decorator for deco in node.decorators]
    else:
        return []
    return [(expr, found) for expr in exprs for found in [fp16_autocast(ctx, expr)] if found is not None]


def find_class(module: cst.Module, name: str) -> Optional[cst.ClassDef]:
    """The one class called `name` in `module` (at any depth), else None."""
    found: List[cst.ClassDef] = []

    class _Find(Visitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            if node.name.value == name:
                found.append(node)

    _Find().walk(module)
    return found[0] if len(found) == 1 else None


def find_method(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    """The one method called `name` in the class's own body, else None."""
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    return methods[0] if len(methods) == 1 else None


def decorator_qualname(ctx: "FileContext", deco: cst.Decorator) -> Optional[str]:
    """The qualified name of a decorator, called or not (`@torch.amp.custom_fwd(...)`,
    `@amp.custom_bwd`)."""
    expr = deco.decorator
    return ctx.qualname(expr.func if isinstance(expr, cst.Call) else expr)


def submodule_output(ctx: "FileContext", call: cst.Call) -> Optional[str]:
    """What a module call gives under CUDA fp16 autocast (`module_outputs.py`), on LibCST nodes:
    `self.proj(x)` where `__init__` binds `self.proj` once to a torch layer or a project module,
    `nn.Linear(d, d)(x)`, or a name bound once to one (`head = Head(); head(x)`): "fp16", "fp32",
    "keep" (its input's dtype), or None when it is not known to be a module call. The project
    index judges a project module's output (`forward_hazards.output_kind`), as TNL301 does."""
    func = call.func
    bound: Optional[cst.BaseExpression] = func
    if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        binding = ctx.binding(func)
        bound = binding.value if binding is not None else None
    if not isinstance(bound, cst.Call):
        return None
    qual = ctx.qualname(bound.func)
    kind = layer_output(qual)
    if kind is not None or ctx.index is None or not isinstance(bound.func, (cst.Name, cst.Attribute)):
        return kind
    name = bound.func.value if isinstance(bound.func, cst.Name) else bound.func.attr.value
    info = ctx.index.lookup(name, qual, ctx.path)
    if info is None or info.kind != "module":
        return None
    # the family's judge; imported here: the family's package imports this module first
    from torchnumlint.rules.mixed_precision.forward_hazards import output_kind

    return output_kind(info, ctx.index.lookup)
