"""The root family's one visitor: every square root, reciprocal root and fractional power
(`shapes.root_of`: `torch.sqrt(v)`, `v.rsqrt()`, `v ** 0.5`, `torch.pow(v, 1.5)`) reaches a rule's
`root(node, kind, arg)` once, so the two rules agree on what a root is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.base import Rule
from torchnumlint.rules.candidate_tree import CandidateTree, may_be_root
from torchnumlint.rules.shapes import root_of

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.index import ProjectIndex

ROOT_WORDS = ("sqrt", "rsqrt", "pow", "pow_")  # the calls `root_of` matches by name


class RootRule(Rule):
    """Visits every root once; a rule implements `root`."""

    # what `root_of` reads: a `**` power, or a call of sqrt, rsqrt, pow or pow_ by name (the
    # node types a group must hold, then `tree_test`: a `**` that is no whole power)
    ast_kinds = frozenset({"Pow"})
    ast_words = frozenset(ROOT_WORDS)

    @classmethod
    def tree_test(cls, tree: CandidateTree, index: Optional[ProjectIndex] = None) -> bool:
        return may_be_root(tree, ROOT_WORDS)

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
