"""Graph degrees: the value a graph convolution raises to -1/2 (`D^-1/2 A D^-1/2`) or inverts.

A node that no edge reaches has degree 0, and real graphs have such nodes (isolated nodes: a
paper nobody cites, an atom the bond filter dropped, a node sampled without its neighbours); then
`deg.pow(-0.5)` is Inf, and the Inf times that node's zero row of the adjacency is NaN, which the
next matrix product spreads over every node (measured, torch 2.13 CPU: a 3-node graph with one
isolated node gives 12 NaN of 12 outputs). `degree` answers whether a value is such a degree,
read by construction:

- `torch_geometric.utils.degree(index, num_nodes)`, a sparse adjacency's `rowcount()`, DGL's
  `g.in_degrees()` / `out_degrees()`: counts of edges (integers);
- `scatter(weight, index, ..., reduce="sum")`, `scatter_add(...)`, `torch_sparse.sum(adj, dim)`,
  and `adj.sum(dim)` of a value named as an adjacency: sums of edge weights.

Not a degree that can be 0: one the code bounds (`degree(...) + 1`, `clamp(min=1)`: guards ask
that before this module is asked), or one of a graph the function gives self-loops first
(`add_self_loops`, `add_remaining_self_loops`, `fill_diag`, `+ torch.eye(n)`): every node then
has an edge to itself. A function that adds them only on one branch counts as adding them (the
branch is the caller's choice, and a finding there would be a guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.guards import strip_parens, words
from torchnumlint.rules.shapes import through_shape
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

ISOLATED = "for a node without edges (an isolated node's degree is 0)"
# Functions and methods that count edges per node (integers).
_COUNTS = frozenset({"degree", "in_degrees", "out_degrees", "rowcount", "colcount"})
# Functions that sum edge weights per node.
_SCATTERS = frozenset({"scatter", "scatter_add"})
_SUM_REDUCES = frozenset({"sum", "add"})
# Graph libraries whose functions of those names compute degrees.
_GRAPH_LIBRARIES = ("torch_geometric", "torch_scatter", "torch_sparse", "dgl")
# Steps that give every node an edge to itself.
_SELF_LOOPS = frozenset({"add_self_loops", "add_remaining_self_loops", "fill_diag", "set_diag", "fill_diagonal_"})


@dataclass(frozen=True)
class Degree:
    """A graph degree: the call that computes it, whether it counts edges (an integer, so
    that a clamp at 1 is exact) or sums their weights, and whether a graph library computes it
    (then it is surely a torch tensor, which a `clamp_min` fix needs)."""

    value: cst.BaseExpression
    counts: bool
    library: bool = False


def degree(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Degree]:
    """The graph degree `expr` is (through names, casts and shape-only steps) when it can be 0
    for an isolated node, else None."""
    value = strip_parens(through_shape(ctx, expr))
    if isinstance(value, cst.Name):  # `deg.pow_(-0.5)` rebinds `deg` where it reads it: the one before
        before = [b.value for b in ctx.bindings_before(value) if isinstance(b.value, cst.BaseExpression)]
        if len(before) == 1:  # the in-place step itself binds no value
            value = strip_parens(through_shape(ctx, before[0]))
    if not isinstance(value, cst.Call):
        return None
    found = _degree_call(ctx, value)
    if found is None or _self_loops(ctx):
        return None
    return found


def _degree_call(ctx: "FileContext", call: cst.Call) -> Optional[Degree]:
    func = call.func
    qual = ctx.qualname(func) or ""
    library = qual.startswith(_GRAPH_LIBRARIES)
    last = qual.rpartition(".")[2] if qual else func.attr.value if isinstance(func, cst.Attribute) else ""
    if last in _COUNTS and (library or (not qual and isinstance(func, cst.Attribute))):
        return Degree(call, True, library)
    if last in _SCATTERS and library:
        if last == "scatter_add" or _reduces_by_sum(call):
            return Degree(call, False, True)
        return None
    if last == "sum" and call.args and (
        (library and _says_adjacency(call.args[0].value))
        or (not qual and isinstance(func, cst.Attribute) and _says_adjacency(func.value))
    ):
        return Degree(call, False, library)
    return None


def _reduces_by_sum(call: cst.Call) -> bool:
    """`scatter(src, index, dim, dim_size, reduce)` sums: `reduce` given as "sum"/"add" by keyword
    or as the fifth argument, or not given (both libraries' default is "sum")."""
    reduce = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "reduce"), None)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if reduce is None and len(positional) >= 5:
        reduce = positional[4]
    if reduce is None:
        return not any(a.star for a in call.args)
    return isinstance(reduce, cst.SimpleString) and reduce.evaluated_value in _SUM_REDUCES


def _says_adjacency(expr: cst.BaseExpression) -> bool:
    """`adj`, `adj_t`, `adjacency`, `self.adj`: a value named as an adjacency matrix."""
    expr = strip_parens(expr)
    ident = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else None
    return bool(words(ident) & {"adj", "adjacency"})


def _self_loops(ctx: "FileContext") -> bool:
    """Whether the enclosing function gives the graph self-loops anywhere (see the docstring)."""
    return bool(ctx.per_scope("self loops", _adds_self_loops))


def _adds_self_loops(scope: cst.CSTNode) -> bool:
    found = False

    class _Find(Visitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal found
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            found = found or name in _SELF_LOOPS

        def visit_BinaryOperation(self, op: cst.BinaryOperation) -> None:
            nonlocal found
            if isinstance(op.operator, cst.Add):
                for side in (op.left, op.right):
                    side = strip_parens(side)
                    if isinstance(side, cst.Call) and isinstance(side.func, (cst.Attribute, cst.Name)):
                        name = side.func.attr.value if isinstance(side.func, cst.Attribute) else side.func.value
                        found = found or name == "eye"

    _Find().walk(scope)
    return found
