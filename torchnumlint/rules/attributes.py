"""Where a class sets one of its attributes: every `self.<name> = value` in its methods.

A value read as `self.num_pos` in one method was often set in another (`forward` stores a count
that a helper divides by; `__init__` creates a learned exponent that `forward` raises to). The
questions about such a value are asked where it is set, in that method's own context:
`assignments` gives the method and the path of ancestors of each value (the value last), which
`ctx.visiting` takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

import libcst as cst

from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

Set_ = Tuple[cst.FunctionDef, Tuple[cst.CSTNode, ...]]


def on_self(expr: cst.BaseExpression) -> bool:
    """`self.<name>`."""
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def assignments(ctx: "FileContext", attribute: cst.Attribute) -> List[Set_]:
    """Every `self.<name> = value` of `attribute`'s name in the methods of the class around the
    node being visited (none outside a class), in source order."""
    cls = ctx.enclosing(cst.ClassDef)
    if cls is None:
        return []
    found: List[Set_] = ctx.per_scope(f"sets of self.{attribute.attr.value}", lambda _: _Sets(ctx, cls, attribute.attr.value).found)
    return found


class _Sets(Visitor):
    def __init__(self, ctx: "FileContext", cls: cst.ClassDef, name: str) -> None:
        super().__init__()
        self.stack: List[cst.CSTNode] = list(ctx.stack[: ctx.stack.index(cls)])
        self.name = name
        self.found: List[Set_] = []
        self.walk(cls)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if on_self(target) and target.attr.value == self.name:  # type: ignore[attr-defined]  # on_self: an Attribute
                function = next((n for n in reversed(self.stack) if isinstance(n, cst.FunctionDef)), None)
                if function is not None:
                    self.found.append((function, (*self.stack, node.value)))
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self.stack.pop()
