"""The root family's one visitor: every square root, reciprocal root and fractional power
(`shapes.root_of`: `torch.sqrt(v)`, `v.rsqrt()`, `v ** 0.5`, `torch.pow(v, 1.5)`) reaches a rule's
`root(node, kind, arg)` once, so the two rules agree on what a root is."""

from __future__ import annotations

import libcst as cst

from torchnumlint.rules.base import Rule
from torchnumlint.rules.shapes import root_of


class RootRule(Rule):
    """Visits every root once; a rule implements `root`."""

    # what `root_of` reads: a `**` power, or a call of sqrt, rsqrt, pow or pow_ by name
    ast_kinds = frozenset({"Pow"})
    ast_words = frozenset({"sqrt", "rsqrt", "pow", "pow_"})

    def visit_Call(self, node: cst.Call) -> None:
        self._visit(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._visit(node)

    def _visit(self, node: cst.CSTNode) -> None:
        root = root_of(self.ctx, node)
        if root is not None:
            self.root(node, *root)

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:
        raise NotImplementedError(f"{type(self).__name__} visits roots")  # pragma: no cover
