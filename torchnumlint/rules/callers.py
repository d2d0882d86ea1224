"""The calls of a function in its own file: who passes a parameter its value.

A parameter's kind is what its callers pass (a softmax, a mask that selects, logits with a
gradient): `callers_of(ctx)` gives the call sites of the function being visited, each as the
path of ancestors that `ctx.visiting` takes, and `argument_for` the argument a call passes for a
parameter. A module-level function is called by its bare name, a method through `self.`/`cls.`
inside its class. Calls from other files are not seen here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import libcst as cst

from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


class CallSites(Visitor):
    """Every call in a module by what it calls, with its ancestors: a module-level function by
    its bare name (`f(...)`), a method by `self.f(...)` / `cls.f(...)` inside its own class (an
    unrelated `log.f(...)` is not a call of either). Calls from other files are not seen: a
    function they call with gradients is missed here."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.stack: List[cst.CSTNode] = []
        self.functions: Dict[str, List[Tuple[cst.CSTNode, ...]]] = {}
        self.methods: Dict[Tuple[int, str], List[Tuple[cst.CSTNode, ...]]] = {}
        self.walk(module)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name):
                self.functions.setdefault(func.value, []).append(tuple(self.stack))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
                cls = next((n for n in reversed(self.stack) if isinstance(n, cst.ClassDef)), None)
                if cls is not None:
                    self.methods.setdefault((id(cls), func.attr.value), []).append(tuple(self.stack))
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self.stack.pop()

    def of(self, function: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> List[Tuple[cst.CSTNode, ...]]:
        """The calls of `function` (a method of `cls`, or a module-level function when None)."""
        if cls is not None:
            return self.methods.get((id(cls), function.name.value), [])
        return self.functions.get(function.name.value, [])


def argument_for(call: cst.Call, function: cst.FunctionDef, param: cst.Param) -> Optional[cst.Arg]:
    """The argument `call` passes for `param` of `function`; None when unknown (*args, **kwargs,
    not passed: the default)."""
    if any(a.star for a in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param.name.value:
            return arg
    ordered = list(function.params.posonly_params) + list(function.params.params)
    if param not in ordered:
        return None
    index = ordered.index(param)
    bound = isinstance(call.func, cst.Attribute) and ordered and ordered[0].name.value in ("self", "cls")
    index -= 1 if bound else 0
    positional = [a for a in call.args if a.keyword is None]
    return positional[index] if 0 <= index < len(positional) else None


def callers_of(ctx: "FileContext") -> List[Tuple[cst.CSTNode, ...]]:
    """The call sites in this file of the function being visited (a method through its class)."""
    function = ctx.enclosing(cst.FunctionDef)
    if function is None:
        return []
    at = ctx.stack.index(function)
    above = ctx.stack[at - 2] if at >= 2 else None
    cls = above if isinstance(above, cst.ClassDef) else None
    return ctx.per_file("call-sites", lambda c: CallSites(c.module)).of(function, cls)
