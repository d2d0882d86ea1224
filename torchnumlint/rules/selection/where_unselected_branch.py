"""TNL209 where-unselected-branch: a log, root or reciprocal computed on every entry inside a
`torch.where` branch (or under `masked_fill`) whose condition tests the very value it guards:
`torch.where(x > 0, torch.log(x), 0)`, `torch.where(n != 0, s / n, 0)`,
`torch.sqrt(v).masked_fill(v <= 0, 0)`. The forward drops the -inf / NaN entries; the backward
multiplies their derivative (1 / 0 = inf) by the 0 the selection gives them: NaN, which then
spreads to every parameter.

The condition is the evidence: it tests the value, so its author expects the edge. The claim is
about a gradient, so it is made where one is shown to flow (`gradient_context.gradient_note`). A division by
a norm, sum or count inside a `where` is TNL201's (`rules/ownership.py`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, AbstractSet, Optional, Set, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.candidate_tree import integral_literal
from torchnumlint.rules.divisors import zero_kind
from torchnumlint.rules.evidence import is_not_torch, may_carry_grad
from torchnumlint.rules.gradient_context import gradient_note
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.number_kinds import is_positive
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.calls import make_op, match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.elementary import says_count
from torchnumlint.rules.selections import MASKED_FILL_METHODS, Selection, edge_value, enclosing_selection, plain_condition
from torchnumlint.rules.shapes import root_of

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.index import ProjectIndex
    from torchnumlint.rules.candidate_tree import CandidateTree

_LOG_OPS = ("log", make_op("log2", {"torch.log2"}, "log2"), make_op("log10", {"torch.log10"}, "log10"))
_RECIPROCAL = make_op("reciprocal", {"torch.reciprocal"}, "reciprocal")
_MASSES = frozenset({"nelems", "weight", "weights", "mass", "total", "norm"})
# the ops `visit_Call` checks, by the name `match_call` and `root_of` know them by
_OP_NAMES = frozenset({"log", "log2", "log10", "reciprocal", "sqrt", "rsqrt", "pow", "pow_"})


class WhereUnselectedBranch(Rule):
    code = "TNL209"
    name = "where-unselected-branch"
    finds = "a `log`/`sqrt`/`rsqrt`/reciprocal/division/fractional power inside a `torch.where` branch or under `masked_fill` whose condition tests its input (`torch.where(x > 0, torch.log(x), 0)`), where a gradient flows: the dropped entries send 0 * inf = NaN into the gradient"
    fix_summary = "safe: the double where, `torch.log(torch.where(x > 0, x, 1))`"
    message = (
        "{op} is computed on every entry and {how} where `{cond}`: the dropped entries' "
        "derivative (1 / 0 = inf) times 0 is NaN in the gradient{note}; "
        "make the input safe first: `torch.where(c, x, 1)` inside (a double where)"
    )
    rationale = (
        "`torch.where(c, a, b)` and `masked_fill` evaluate both branches everywhere and select "
        "afterwards. The forward is finite, but the backward sends the dropped entries a gradient "
        "of 0, and 0 times the local derivative of `log`, `sqrt` or `1 / x` at 0 (inf) is NaN "
        "(measured on torch 2.13: `torch.where(x > 0, torch.log(x), 0)` at x = [0, -1, 2] has "
        "gradient [nan, 0, 0.5]; with `sqrt` [nan, nan, 0.354]; `torch.where(x != 0, 1 / x, 0)` "
        "[nan, -1, -0.25]). One NaN entry makes the whole step's update NaN. The fix, the "
        "'double where', replaces the input where it is dropped by 1 before the operation: "
        "`torch.where(x > 0, torch.log(torch.where(x > 0, x, 1)), 0)`, whose entries and "
        "gradients are the same wherever the original's were finite (gradient [0, 0, 0.5]): "
        "safe. Reported only where the condition tests the guarded value itself and a gradient "
        "is shown to flow."
    )
    safety = Safety.SAFE
    needles = ("where", "masked_fill")
    pattern = r"log|sqrt|reciprocal|/|\*\*|pow"

    @classmethod
    def tree_test(cls, tree: "CandidateTree", index: "Optional[ProjectIndex]" = None) -> bool:
        # `enclosing_selection` reads the visited op's own expression: a `where` call (torch's,
        # under any name) or `.masked_fill` whose branch or receiver holds the op
        names = _OP_NAMES | {a.asname for a in tree.nodes(ast.alias) if a.asname and a.name.split(".")[-1] in _OP_NAMES}
        wheres = {a.asname or a.name for a in tree.nodes(ast.alias) if a.name.split(".")[-1] == "where"}
        for call in tree.nodes(ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in MASKED_FILL_METHODS and call.args:
                branches = [func.value]
            elif len(call.args) == 3 and _named(func, wheres):
                branches = call.args[1:]
            else:
                continue
            if any(_hazard(node, names) for branch in branches for node in ast.walk(branch)):
                return True
        return False

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def log_depth_loss(depth, gt):\n"
                "    log_d = torch.where(depth > 0, torch.log(depth), torch.zeros_like(depth))\n"
                "    return (log_d - gt).abs().mean()\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def log_depth_loss(depth, gt):\n"
                "    log_d = torch.where(depth > 0, torch.log(torch.where(depth > 0, depth, 1)), torch.zeros_like(depth))\n"
                "    return (log_d - gt).abs().mean()\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def inverse_scale_loss(pred, scale):\n"
                "    inv = (1 / scale).masked_fill(scale == 0, 0.0)\n"
                "    return (pred * inv).pow(2).mean()\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def inverse_scale_loss(pred, scale):\n"
                "    inv = (1 / torch.where(scale == 0, 1, scale)).masked_fill(scale == 0, 0.0)\n"
                "    return (pred * inv).pow(2).mean()\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "\n"
        "\n"
        "def log_depth_loss(depth, gt):\n"
        "    log_d = torch.where(depth > 0, torch.log(torch.where(depth > 0, depth, 1)), torch.zeros_like(depth))\n"
        "    return (log_d - gt).abs().mean()\n",
        "import torch\n"
        "\n"
        "\n"
        "@torch.no_grad()\n"
        "def log_depth(depth):\n"
        "    return torch.where(depth > 0, torch.log(depth), torch.zeros_like(depth))\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        log = match_call(self.ctx.imports, node, *_LOG_OPS)
        if log is not None and log.fully_known:
            self._check(node, f"`{log.op.name}`", log.input)
            return
        reciprocal = match_call(self.ctx.imports, node, _RECIPROCAL)
        if reciprocal is not None and reciprocal.fully_known:
            self._check(node, "a reciprocal", reciprocal.input)
            return
        self._root(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            if zero_kind(self.ctx, node.right) is not None and owned_elsewhere(self.ctx, self.code, "division-in-where"):
                return
            self._check(node, "a division", node.right)
        else:
            self._root(node)

    def _root(self, node: cst.CSTNode) -> None:
        root = root_of(self.ctx, node)
        if root is not None:
            op = {"sqrt": "`sqrt`", "rsqrt": "`rsqrt`", "pow": "a fractional power"}[root[0]]
            self._check(node, op, root[1])

    def _check(self, node: cst.CSTNode, op: str, value: cst.BaseExpression) -> None:
        ctx = self.ctx
        selection = enclosing_selection(ctx)
        if selection is None or edge_value(ctx, selection.condition, value) in (None, selection.kept_if):
            return  # no edge test of the value, or its edge is in the kept entries (not this hazard)
        if is_guarded(ctx, value) or is_positive(ctx, value) or is_not_torch(ctx, value):
            return
        note = gradient_note(ctx)
        if note is None or not may_carry_grad(ctx, value):
            return  # the forward is finite; only a gradient is at stake, and none flows here
        if op == "a division" and _bookkeeping(value) and not ctx.strict:
            return  # an average of what was accumulated (`sums / counts`): rarely differentiated
        cond = ctx.module.code_for_node(strip_parens(selection.condition))
        if selection.form == "where":
            how = "`torch.where` keeps it only" if selection.kept_if else "`torch.where` drops it"
        else:
            how = "`masked_fill` overwrites it"
        self.report(node, self._fix(selection, value), op=op, how=how, cond=cond, note=note)

    def _fix(self, selection: Selection, value: cst.BaseExpression):
        """The input replaced by `torch.where(c, x, 1)` (kept where c holds) or `torch.where(c, 1, x)`:
        the condition is written twice, so it must be plain (recomputing it gives the same mask)."""
        if not plain_condition(selection.condition):
            return None
        fix = self.fix()
        x = strip_parens(value)
        one = cst.Integer("1")
        branches: Tuple[cst.BaseExpression, cst.BaseExpression] = (x, one) if selection.kept_if else (one, x)
        where = cst.Call(
            func=fix.ref("torch.where"),
            args=[cst.Arg(strip_parens(selection.condition)), cst.Arg(branches[0]), cst.Arg(branches[1])],
        )
        fix.replace(value, where)
        return fix


def _bookkeeping(divisor: cst.BaseExpression) -> bool:
    """A divisor named as a count or a mass of what was accumulated (`num_times`, `nelems`,
    `weight_bg`): measured on the corpus, such averages ran without a gradient in every case
    (inference blocks, histograms, targets)."""
    bare = strip_parens(divisor)
    ident = bare.value if isinstance(bare, cst.Name) else bare.attr.value if isinstance(bare, cst.Attribute) else None
    if ident is None:
        return False
    return says_count(ident) or bool(set(ident.lower().split("_")) & _MASSES)


def _named(func: ast.expr, wheres: Set[str]) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "where") or (isinstance(func, ast.Name) and func.id in wheres | {"where"})


def _hazard(node: ast.AST, names: AbstractSet[str]) -> bool:
    """An op `visit_Call` or `visit_BinaryOperation` may check: a call named (or aliased) as a
    log, reciprocal or root, a true division, or a `**` that is no whole power."""
    if isinstance(node, ast.Call):
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr in names) or (isinstance(func, ast.Name) and func.id in names)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Div) or (isinstance(node.op, ast.Pow) and not integral_literal(node.right))
    return False
