"""Graph degrees: the value a graph convolution raises to -1/2 (`D^-1/2 A D^-1/2`) or inverts.

A node that no edge reaches has degree 0, and real graphs have such nodes (isolated nodes: a
paper nobody cites, an atom the bond filter dropped, a node sampled without its neighbours); then
`deg.pow(-0.5)` is Inf, and the Inf times that node's zero row of the adjacency is NaN, which the
next matrix product spreads over every node (measured, torch 2.13 CPU: a 3-node graph with one
isolated node gives 12 NaN of 12 outputs). `degree` answers whether a value is such a degree,
read by construction:

- `torch_geometric.utils.degree(index, num_nodes)`, a sparse adjacency's `rowcount()`, DGL's
  `g.in_degrees()` / `out_degrees()`: counts of edges (integers);
- `scatter(weight, index, ..., reduce="sum")`, `scatter_add(...)` over an edge endpoint index
  (`col`, `edge_index[0]`), `torch_sparse.sum(adj, dim)`, and `adj.sum(dim)` of a value named as
  an adjacency: sums of edge weights. A scatter over a k-NN query index is none (every query has
  k neighbours: PyG's `knn_interpolate` read on the corpus).

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

from torchnumlint.rules.syntax import number_value, strip_parens, words
from torchnumlint.rules.shapes import through_shape
from torchnumlint.rules.uses import reads_of
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
# Words that name an edge endpoint index (`row, col = edge_index`).
_ENDPOINT_WORDS = frozenset(
    {"edge", "edges", "row", "col", "src", "dst", "source", "target", "sender", "receiver", "senders", "receivers", "index"}
)
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
    if value is not strip_parens(expr) and _picks(ctx, expr):
        return None  # `degree(col)[col]`: read only where an edge was counted, never 0
    if isinstance(value, cst.Name):  # `deg.pow_(-0.5)` rebinds `deg` where it reads it: the one before
        before = [b.value for b in ctx.bindings_before(value) if isinstance(b.value, cst.BaseExpression)]
        if len(before) == 1:  # the in-place step itself binds no value
            value = strip_parens(through_shape(ctx, before[0]))
    if not isinstance(value, cst.Call):
        return None
    found = _degree_call(ctx, value)
    if found is None or _self_loops(ctx) or _zeros_refilled(ctx, expr):
        return None
    return found


def _zeros_refilled(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """`deg[deg == 0] = 1e-12` (or `deg.masked_fill_(deg == 0, 1)`) before the use: the zeros are
    replaced by a positive number, a guard written in place."""
    name = strip_parens(expr)
    for _ in range(8):  # under indexing and method steps: `deg[:, None]`, `deg.float()`
        if isinstance(name, cst.Subscript):
            name = strip_parens(name.value)
        elif isinstance(name, cst.Call) and isinstance(name.func, cst.Attribute):
            name = strip_parens(name.func.value)
        else:
            break
    if not isinstance(name, cst.Name):
        return False
    for binding in ctx.bindings_before(name):
        node = binding.node
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if (
                isinstance(target, cst.Subscript)
                and isinstance(strip_parens(target.value), cst.Name)
                and (number_value(strip_parens(node.value)) or 0) > 0
                and _tests_zero(target, name.value)
            ):
                return True
        fill = node.value if isinstance(node, cst.Expr) else node
        if (
            isinstance(fill, cst.Call)
            and isinstance(fill.func, cst.Attribute)
            and fill.func.attr.value == "masked_fill_"
            and len(fill.args) == 2
            and (number_value(strip_parens(fill.args[1].value)) or 0) > 0
            and _tests_zero(fill.args[0], name.value)
        ):
            return True
    return False


def _tests_zero(node: cst.CSTNode, name: str) -> bool:
    """`node` holds `name == 0` (either side)."""
    found = False

    class _Find(Visitor):
        def visit_Comparison(self, comparison: cst.Comparison) -> None:
            nonlocal found
            if len(comparison.comparisons) != 1 or not isinstance(comparison.comparisons[0].operator, cst.Equal):
                return
            sides = (strip_parens(comparison.left), strip_parens(comparison.comparisons[0].comparator))
            if any(isinstance(s, cst.Name) and s.value == name for s in sides) and any(number_value(s) == 0 for s in sides):
                found = True

    _Find().walk(node)
    return found


def _degree_call(ctx: "FileContext", call: cst.Call) -> Optional[Degree]:
    func = call.func
    qual = ctx.qualname(func) or ""
    library = qual.startswith(_GRAPH_LIBRARIES)
    last = qual.rpartition(".")[2] if qual else func.attr.value if isinstance(func, cst.Attribute) else ""
    if last in _COUNTS and (library or (not qual and isinstance(func, cst.Attribute))):
        if last == "degree" and not (call.args and _endpoint(call.args[0].value)):
            return None  # `degree(batch, n)`: nodes per graph, never 0 for a real graph
        return Degree(call, True, library)
    if last in _SCATTERS and library:
        # over edges (`scatter(w, col, ...)`): a scatter over another assignment (a k-NN query's
        # index, which gives every query k entries) is no degree
        index = call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else None
        if (last == "scatter_add" or _reduces_by_sum(call)) and index is not None and _endpoint(index):
            return Degree(call, False, True)
        return None
    if (
        last == "sum"
        and call.args
        and (
            (library and _says_adjacency(call.args[0].value))
            or (not qual and isinstance(func, cst.Attribute) and _says_adjacency(func.value))
        )
    ):
        return Degree(call, False, library)
    return None


def read_at_endpoints(ctx: "FileContext", node: cst.CSTNode) -> bool:
    """Whether the value computed at `node` (a degree's root or reciprocal, the node being
    visited) is read only at entries an index picks: `(w * (1. / deg))[edge_index[0]]` inline, or
    `deg_inv = ...` read only as `deg_inv[row]`, `deg_inv[col]`, `deg_inv.index_select(0, col)`.
    An edge's endpoints are what the degree counted, so their degree is not 0 (for a directed
    graph, the other endpoint's can be: strict mode's); a dense use (`d[:, None] * adj`) reads
    every node."""
    stack = ctx.stack
    at = len(stack) - 1
    while at >= 1 and isinstance(stack[at - 1], cst.BinaryOperation):
        at -= 1  # through `w * (1. / deg)`
    parent = stack[at - 1] if at >= 1 else None
    if isinstance(parent, cst.Subscript) and parent.value is stack[at] and _index_read(parent):
        return True
    if isinstance(parent, (cst.Assign,)) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        reads = reads_of(ctx, parent.targets[0].target)
        return bool(reads) and all(_picked_read(path) for path in reads)  # type: ignore[union-attr]
    return False


def _picked_read(path) -> bool:
    """A read (ancestors, the name last) that picks entries: `d[row]`, `d.index_select(0, i)`."""
    name, parent = path[-1], path[-2] if len(path) > 1 else None
    if isinstance(parent, cst.Subscript) and parent.value is name:
        return _index_read(parent)
    if isinstance(parent, cst.Attribute) and parent.value is name and parent.attr.value in ("index_select", "gather"):
        return True
    return False


def _index_read(subscript: cst.Subscript) -> bool:
    """`d[row]`, `d[edge_index[0]]`: one index that is a tensor of positions, not a slice or None."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return False
    index = strip_parens(subscript.slice[0].slice.value)
    return isinstance(index, (cst.Name, cst.Attribute, cst.Subscript))


def _picks(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """`expr` indexes its degree at positions (`degree(col, n)[col]`) on the way to it."""
    expr = strip_parens(expr)
    for _ in range(8):
        if isinstance(expr, cst.Subscript):
            if _index_read(expr):
                return True
            expr = strip_parens(expr.value)
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not ctx.qualname(expr.func):
            expr = strip_parens(expr.func.value)
        else:
            return False
    return False


def _endpoint(expr: cst.BaseExpression) -> bool:
    """An edge endpoint index: `edge_index[0]`, `row`, `col`, `src`, `dst` (as graph code names
    them), not a batch vector."""
    expr = strip_parens(expr)
    ident = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else None
    if isinstance(expr, cst.Subscript):
        inner = strip_parens(expr.value)
        ident = inner.value if isinstance(inner, cst.Name) else inner.attr.value if isinstance(inner, cst.Attribute) else None
    return bool(words(ident) & _ENDPOINT_WORDS)


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
