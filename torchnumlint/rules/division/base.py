"""The division family's one visitor: every form of a division (`x / d`, `x /= d`,
`torch.div(x, d)`, `x.div(d)`, `x.div_(d)`) reaches a rule's `division(node, x, d)` once, so the
two rules agree on what a division is (`divisors.division_operands`)."""

from __future__ import annotations

import libcst as cst

from torchnumlint.rules.base import Rule
from torchnumlint.rules.divisors import division_operands


class DivisionRule(Rule):
    """Visits every division form once; a rule implements `division`."""

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self.division(node, node.left, node.right)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.DivideAssign):
            self.division(node, node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        operands = division_operands(self.ctx, node)
        if operands is not None:
            self.division(node, *operands)

    def division(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> None:
        raise NotImplementedError(f"{type(self).__name__} visits divisions")  # pragma: no cover
