"""What a value is used for: followed forward from where it is computed, through the names it is
bound to, to what finally reads it.

What it answers:

- `uses_of(ctx, path)`: the set of sinks of the value at `path[-1]` (its ancestors before it):
  "rank" (`topk`, `max`, `sort`: values that carry a gradient), "index" (`argmax`, `argsort`, a
  comparison: no gradient), "write" (the target of an indexed assignment), "shape", "loss"
  (`nll_loss`, `sum`, `mean`), "product" (`*`), or "other" for anything not understood. Values
  pass through operations that keep an -inf an -inf (`+`, `-`, `/`, indexing, views).
- `only_ranked(ctx, uses)`: the value is only compared, sorted or top-k'd where no gradient flows,
  so an -inf in it ranks last, as it should (beam search, greedy decoding).
- `reads_of(ctx, target)`: the reads that can see the value a function-local `name = value`
  binds; `binding_line(ctx, target)`: the statement line of that binding, when it holds nothing
  else (for a fix that leaves the name unread and removes it).

Why here: a log-probability, a division or a root is harmless or hazardous depending on what
reads it; every rule that tunes its message or its silence to the use asks the same question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple, Type, TypeVar, Union

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.gradient_context import gradient_free
from torchnumlint.rules.calls import match_call
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# rankings that return values (a gradient flows through them), and ones that return only indices
_RANKING = frozenset({"topk", "sort", "msort", "max", "min", "kthvalue"})
_INDEXING = frozenset({"argmax", "argmin", "argsort"})
_TORCH_RANKING = {f"torch.{name}": "rank" for name in _RANKING} | {f"torch.{name}": "index" for name in _INDEXING}
# methods whose result holds the same values, or a selection of them: the use is the result's
_SAME_VALUES = vocabulary.SAME_VALUES | vocabulary.REPEATS | vocabulary.DETACH | {"gather", "index_select", "masked_fill"}
_SHAPE = frozenset({"shape", "size", "dim", "ndim", "dtype", "device", "numel"})
_REDUCTIONS = frozenset({"sum", "mean"})
_TORCH_REDUCTIONS = frozenset({"torch.sum", "torch.mean"})
_HARMLESS = frozenset({"rank", "index", "write", "shape"})
_MAX_FOLLOW = 3  # names followed forward: `logp = log(p)`, `total = scores + logp`, ...
_BLOCKS = (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)
_LOOPS = (cst.For, cst.While)
_NESTED = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_ASSIGNS = (cst.Assign, cst.AnnAssign, cst.NamedExpr)
Path = Tuple[cst.CSTNode, ...]


def sink(ctx: "FileContext", path: Sequence[cst.CSTNode]) -> Union[str, cst.Name]:
    """What the value at `path[-1]` ends up as, one of the sinks of `uses_of`; or the Name that a
    plain `name = value` binds, for the caller to follow."""
    i = len(path) - 1  # path[i] is the value followed
    while i >= 2:
        child, parent, grand = path[i], path[i - 1], path[i - 2]
        i -= 1
        if isinstance(parent, cst.Attribute) and parent.value is child:
            method = parent.attr.value
            if method in _SHAPE:
                return "shape"
            if not (isinstance(grand, cst.Call) and grand.func is parent):
                return "other"
            if method in _RANKING or method in _INDEXING:
                return "rank" if method in _RANKING else "index"
            if method in _REDUCTIONS:
                return "loss"
            if method not in _SAME_VALUES:
                return "other"
            i -= 1  # the method call's result
        elif isinstance(parent, cst.Arg) and isinstance(grand, cst.Call) and parent.value is child:
            first = grand.args[0] is parent
            qual = ctx.qualname(grand.func)
            if first and qual in _TORCH_RANKING:
                return _TORCH_RANKING[qual]
            nll = match_call(ctx.imports, grand, "nll_loss")
            return "loss" if (first and qual in _TORCH_REDUCTIONS) or (nll is not None and nll.input is child) else "other"
        elif isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, cst.Multiply):
                return "product"
            if not isinstance(parent.operator, (cst.Add, cst.Subtract, cst.Divide)):
                return "other"
        elif (isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus)) or (
            isinstance(parent, cst.Subscript) and parent.value is child
        ):
            continue
        elif isinstance(parent, cst.AssignTarget):
            return "write"
        elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return "index"
        elif isinstance(parent, cst.Assign) and parent.value is child:
            targets = parent.targets
            return targets[0].target if len(targets) == 1 and isinstance(targets[0].target, cst.Name) else "other"
        else:
            return "other"
    return "other"


@dataclass
class NameUse:
    path: Path  # ancestors from the scope down, the Name last
    store: bool  # binds the name: an assignment target, a loop variable, a parameter
    nested: bool  # inside a nested function, lambda or class


class NameUses(Visitor):
    """Every mention of every name in one function, in execution order (an assignment binds its
    targets after its value is read), with its ancestors."""

    def __init__(self, scope: cst.CSTNode) -> None:
        super().__init__()
        self.scope = scope
        self.stack: List[cst.CSTNode] = []
        self.uses: Dict[str, List[NameUse]] = {}
        self.pending: List[Tuple[cst.CSTNode, str, NameUse]] = []  # targets of unfinished assignments
        self.nested = 0
        self.walk(scope)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, _NESTED) and node is not self.scope:
            self.nested += 1
        if isinstance(node, cst.Name) and len(self.stack) > 1:
            parent = self.stack[-2]
            if not (isinstance(parent, cst.Attribute) and parent.attr is node) and not (
                isinstance(parent, cst.Arg) and parent.keyword is node
            ):
                use = NameUse(tuple(self.stack), _is_store(self.stack), self.nested > 0)
                assign = _innermost(self.stack, _ASSIGNS) if use.store else None
                if assign is not None:
                    self.pending.append((assign, node.value, use))
                else:
                    self.uses.setdefault(node.value, []).append(use)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if isinstance(node, _NESTED) and node is not self.scope:
            self.nested -= 1
        if isinstance(node, _ASSIGNS):
            for assign, name, use in [p for p in self.pending if p[0] is node]:
                self.uses.setdefault(name, []).append(use)
            self.pending = [p for p in self.pending if p[0] is not node]
        self.stack.pop()


def _is_store(stack: Sequence[cst.CSTNode]) -> bool:
    """Whether the Name at `stack[-1]` is bound there (through tuple unpacking). `x += v` is a
    read: the value goes on."""
    child = stack[-1]
    for node in reversed(stack[:-1]):
        if isinstance(node, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            child = node
            continue
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            return node.target is child
        if isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
            return node.name is child
        return isinstance(node, (cst.AsName, cst.Import, cst.ImportFrom, cst.ImportAlias, cst.Global, cst.Nonlocal))
    return False


N = TypeVar("N", bound=cst.CSTNode)


def _innermost(path: Sequence[cst.CSTNode], types: Union[Type[N], Tuple[Type[N], ...]]) -> Optional[N]:
    return next((n for n in reversed(path) if isinstance(n, types)), None)


def _events(ctx: "FileContext", target: cst.Name) -> Optional[Tuple[List[NameUse], int]]:
    """The mentions of `target`'s name in its function, and the index of `target` among them."""
    scope_uses = ctx.per_scope("uses-name-uses", lambda scope: NameUses(scope) if isinstance(scope, cst.FunctionDef) else None)
    if scope_uses is None:
        return None
    events = scope_uses.uses.get(target.value, [])
    at = next((i for i, e in enumerate(events) if e.path[-1] is target), None)
    return None if at is None else (events, at)


def reads_of(ctx: "FileContext", target: cst.Name) -> Optional[List[Path]]:
    """The reads that can see the value a function-local `name = value` binds: after it up to
    an unconditional rebinding and, in a loop, at the top of the body before the name is bound
    again. None when that is unknown: a module global, a name a nested scope reads."""
    found = _events(ctx, target)
    if found is None:
        return None
    events, at = found
    blocks = {id(n) for n in events[at].path if isinstance(n, _BLOCKS)}
    reads: List[Path] = []

    def scan(seq: Sequence[NameUse]) -> bool:
        for event in seq:
            if event.nested:
                return False
            if event.store:
                if id(_innermost(event.path, _BLOCKS)) in blocks:
                    break
                continue
            reads.append(event.path)
        return True

    loop = _innermost(events[at].path, _LOOPS)
    if not scan(events[at + 1 :]):
        return None
    if loop is not None and not scan([e for e in events[:at] if any(n is loop for n in e.path)]):
        return None
    return reads


def binding_line(ctx: "FileContext", target: cst.Name) -> Optional[cst.SimpleStatementLine]:
    """The line of the function-local assignment whose target is `target`, when that line holds
    only this one-target assignment and the name is bound nowhere else (removing the line
    removes exactly this value)."""
    found = _events(ctx, target)
    if found is None:
        return None
    events, at = found
    if sum(e.store for e in events) != 1:
        return None
    path = events[at].path
    line = _innermost(path, (cst.SimpleStatementLine,))
    assign = _innermost(path, _ASSIGNS)
    if line is None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or list(line.body) != [assign]:
        return None
    return line


def uses_of(ctx: "FileContext", path: Sequence[cst.CSTNode], depth: int = 0) -> Set[str]:
    """What the value at `path[-1]` is used for (see `sink`), following the names it is bound
    to forward; "other" stands for anything not understood."""
    found = sink(ctx, path)
    if isinstance(found, str):
        return {found}
    reads = reads_of(ctx, found) if depth < _MAX_FOLLOW else None
    if not reads:
        return {"other"}
    return set().union(*(uses_of(ctx, read, depth + 1) for read in reads))


def only_ranked(ctx: "FileContext", uses: Set[str]) -> bool:
    """-inf log-probabilities that are only compared, sorted or top-k'd (search, decoding): they
    rank last, as they should. The values of `topk`/`max`/`sort` carry a gradient, so those count
    only where none flows; indices (`argmax`, `argsort`, a comparison) never carry one."""
    if not uses <= _HARMLESS or not uses & {"rank", "index"}:
        return False
    return "rank" not in uses or gradient_free(ctx)
