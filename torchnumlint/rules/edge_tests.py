"""The code's own edge test as evidence: a tensor comparison of a value with 0 in the function
that uses it.

`torch.where(n > 0, x / n, 0)`, `out[n == 0] = 0`, `cos.masked_fill(den == 0, 0.0)`,
`loss[count.eq(0)] = 0`: the author wrote down that the value reaches 0, and handled the forward
only. These are no guard (the division's Inf or NaN still flows into the gradient of the branch
not taken, or was computed before it was overwritten), but they are the best evidence a linter
can have that 0 is reached for real inputs, so a rule that needs evidence takes it from here
and names the test in its message.

A control-flow test (`if n > 0:`, `assert n.all()`) is different: it keeps the division from
running at all, and `guarding.is_tested` reports it as a guard; it is never evidence here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Set

import libcst as cst

from torchnumlint.rules.syntax import code_key, number_value, strip_parens
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# Comparison methods and functions whose second operand is the edge.
_METHODS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})


# How a reason from the code's own test begins: the claim it supports is about the gradient alone.
EDGE_TEST_WHY = "as the code's own test"


def edge_test(ctx: "FileContext", *exprs: cst.BaseExpression) -> Optional[str]:
    """Why one of `exprs` reaches 0 by the enclosing function's own tensor test of it (`n > 0`,
    `den == 0`, `n.eq(0)`), as a phrase for the message; None when the function has none."""
    tests: Dict[str, str] = ctx.per_scope("edge tests", lambda scope: _edge_tests(ctx, scope))
    for expr in exprs:
        found = tests.get(code_key(ctx, strip_parens(expr)))
        if found is not None:
            return f"{EDGE_TEST_WHY} {found} expects (it mends the forward, not the gradient)"
    return None


def _is_zero(expr: cst.BaseExpression) -> bool:
    return number_value(strip_parens(expr)) == 0


def _edge_tests(ctx: "FileContext", scope: cst.CSTNode) -> Dict[str, str]:
    """code key of the compared value -> the test as written, with its line, for every
    comparison with 0 in `scope` outside control-flow tests."""
    found: Dict[str, str] = {}

    def add(value: cst.BaseExpression, test: cst.CSTNode) -> None:
        span = ctx.positions.get(test)
        text = "`" + " ".join(ctx.module.code_for_node(test).split()) + "`"
        found.setdefault(code_key(ctx, strip_parens(value)), text + (f" on line {span.start.line}" if span else ""))

    control: Set[int] = set()

    class _Tests(Visitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.If, cst.While, cst.Assert, cst.IfExp)):
                control.add(id(node.test))  # control flow: a guard, `guarding.is_tested`
            if id(node) in control:
                return False
            if node is not scope and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
                left, right = node.left, node.comparisons[0].comparator
                if _is_zero(right):
                    add(left, node)
                elif _is_zero(left):
                    add(right, node)
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and len(node.args) == 1:
                if node.func.attr.value in _METHODS and _is_zero(node.args[0].value):
                    add(node.func.value, node)
            return True

    _Tests().walk(scope)
    return found
