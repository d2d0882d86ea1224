"""Scopes and bindings: the assignments of a function or module (`ScopeTable`, `Binding`), what
no-grad context a binding is made in, the names an expression reads and whether recomputing it
gives the same value (`is_plain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst

from torchnumlint.rules.calls import is_literal
from torchnumlint.rules.flow import Reaching
from torchnumlint.rules.imports import ImportMap
from torchnumlint.walk import Visitor


@dataclass
class Binding:
    node: cst.CSTNode  # the statement (or target) that binds
    value: Optional[cst.BaseExpression]  # the assigned value, None when not a plain assignment
    order: int
    no_grad: bool  # bound inside `with torch.no_grad()` / inference_mode / set_grad_enabled(False)
    statement: int = 0  # id of the statement that binds (0: a parameter), for reaching definitions
    # for one name of a tuple target (`vals, idx = p.topk(5)`): the value unpacked and the name's
    # position in the target; `selection_of_element` says what that element is
    unpacked: Optional[Tuple[cst.BaseExpression, int]] = None
    # only conditionally bound (a walrus): earlier bindings may still reach past it
    conditional: bool = False

    @property
    def rewritable(self) -> bool:
        """A plain `name = value` with one target: rewriting `value` changes only this name."""
        return isinstance(self.node, cst.Assign) and len(self.node.targets) == 1


def is_no_grad_item(imports: ImportMap, expr: cst.BaseExpression) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`."""
    if not isinstance(expr, cst.Call):
        return False
    qual = imports.qualname(expr.func)
    if qual in ("torch.no_grad", "torch.autograd.no_grad", "torch.inference_mode"):
        # inference_mode(False) re-enables autograd
        return not (qual == "torch.inference_mode" and expr.args and is_literal(expr.args[0].value, "False"))
    if qual == "torch.set_grad_enabled" and expr.args:
        return is_literal(expr.args[0].value, "False")
    return False


def is_no_grad_function(imports: ImportMap, func: cst.FunctionDef) -> bool:
    """A function decorated with `@torch.no_grad()` / `@torch.no_grad` / `@torch.inference_mode()`."""
    for deco in func.decorators:
        call = deco.decorator
        if isinstance(call, cst.Call) and is_no_grad_item(imports, call):
            return True
        if imports.qualname(call) in ("torch.no_grad", "torch.inference_mode"):
            return True
    return False


_ASSIGNMENTS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr)


# What reaching definitions are computed over: statements, and the parts of compound ones that
# bind (an `except ... as e` handler, a `match` case).
STATEMENTS = (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.ExceptHandler, cst.MatchCase)


def augmented_value(node: cst.AugAssign) -> cst.BinaryOperation:
    """`d += eps` as the value it gives `d`: `d + eps` (the target read before the statement
    binds it). A guard (`d += eps`) and a running sum (`s += x`) are then recognised as they
    would be written out."""
    operator = getattr(cst, type(node.operator).__name__[: -len("Assign")])()
    return cst.BinaryOperation(left=node.target, operator=operator, right=node.value)


def _assign_targets(node: Union[cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr]) -> List[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, cst.AnnAssign):
        return [node.target] if node.value is not None else []
    return [node.target]  # AugAssign, NamedExpr


class ScopeTable(Visitor):
    """Bindings of one function (or module) body, in source order; nested scopes are opaque."""

    def __init__(self, imports: ImportMap, scope: cst.CSTNode) -> None:
        super().__init__()
        self.imports = imports
        self.scope = scope
        self.order: Dict[int, int] = {}
        self.bindings: Dict[str, List[Binding]] = {}
        self.loads: Dict[str, int] = {}
        self._not_loads: set = set()
        self._counter = 0
        self._no_grad = 0
        # Statements, for reaching definitions: each Name's innermost statement (0: none).
        self._statements: List[int] = [0]
        self.statement_of: Dict[int, int] = {}
        self._reaching: Optional[Reaching] = None
        if isinstance(scope, cst.FunctionDef):
            for param in all_params(scope.params):
                self._bind(param.name.value, param, None)
            self.walk(scope.body)
        else:
            self.walk(scope)

    def _bind(self, name: str, node: cst.CSTNode, value: Optional[cst.BaseExpression], unpacked=None) -> None:
        self.bindings.setdefault(name, []).append(
            Binding(node, value, self._counter, self._no_grad > 0, self._statements[-1], unpacked, isinstance(node, cst.NamedExpr))
        )

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._counter += 1
        self.order[id(node)] = self._counter
        if isinstance(node, STATEMENTS) and node is not self.scope:
            self._statements.append(id(node))
        if isinstance(node, cst.Name):
            self.statement_of[id(node)] = self._statements[-1]
            if id(node) not in self._not_loads:
                self.loads[node.value] = self.loads.get(node.value, 0) + 1
            return False
        if isinstance(node, cst.Attribute):
            self._not_loads.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            self._not_loads.add(id(node.keyword))
        if node is not self.scope and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._bind(node.name.value, node, None)
            return False
        if isinstance(node, cst.Lambda):
            return False
        if isinstance(node, _ASSIGNMENTS):
            for target in _assign_targets(node):  # bound on leave, once the value is read
                self._mark_store(target)
        elif isinstance(node, (cst.For, cst.CompFor)):
            self._bind_target(node.target, node, None)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self._bind_target(node.asname.name, node, None)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:  # bound elsewhere: bind twice so it is never followed
                self._bind(item.name.value, node, None)
                self._bind(item.name.value, node, None)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            self._bind_target(node.name.name, node, None)
        elif isinstance(node, cst.With):
            if any(is_no_grad_item(self.imports, item.item) for item in node.items):
                self._no_grad += 1
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and isinstance(node.func.value, cst.Name)
            and node.func.attr.value.endswith("_")
            and not node.func.attr.value.startswith("_")
        ):
            # `d.clamp_(min=eps)`: an in-place method changes the value, so stop following `d`
            self._bind(node.func.value.value, node, None)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if isinstance(node, _ASSIGNMENTS):
            self._counter += 1
            value = augmented_value(node) if isinstance(node, cst.AugAssign) else node.value
            for target in _assign_targets(node):
                self._bind_target(target, node, value)
        if isinstance(node, cst.With) and any(is_no_grad_item(self.imports, i.item) for i in node.items):
            self._no_grad -= 1
        if isinstance(node, STATEMENTS) and node is not self.scope:
            self._statements.pop()

    def _mark_store(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._not_loads.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._mark_store(element.value)
        elif isinstance(target, cst.StarredElement):
            self._mark_store(target.value)

    def _bind_target(self, target: cst.BaseExpression, node: cst.CSTNode, value, unpacked=None) -> None:
        if isinstance(target, cst.Name):
            self._not_loads.add(id(target))
            self._bind(target.value, node, value, unpacked)
        elif isinstance(target, (cst.Tuple, cst.List)):
            starred = any(isinstance(e, cst.StarredElement) for e in target.elements)
            for position, element in enumerate(target.elements):
                inner = element.value
                if isinstance(inner, cst.StarredElement):  # pragma: no cover - parser shape
                    inner = inner.value
                # positions count only without a starred name; a nested target is not followed
                known = value is not None and not starred and isinstance(inner, cst.Name)
                self._bind_target(inner, node, None, (value, position) if known else None)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, node, None)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self._bind(target.value.value, node, None)  # `d[d == 0] = 1` changes d in place
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            # `self.kl = nn.KLDivLoss()`: tracked under the dotted name
            self._bind(f"{target.value.value}.{target.attr.value}", node, value)

    def rebound_between(self, expr: cst.CSTNode, use: Optional[cst.CSTNode] = None) -> bool:
        """Whether a name read by `expr` is bound again (or changed in place) after `expr` and
        before `use` (anywhere later in the scope when `use` is None): then recomputing `expr`
        there could give another value."""
        start = self.order.get(id(expr))
        end = self.order.get(id(use)) if use is not None else float("inf")
        if start is None or end is None:
            return True
        return any(start < b.order < end for name in read_names(expr) for b in self.bindings.get(name, ()))

    def read_in_nested(self, name: str) -> bool:
        """Whether a function, lambda or class nested in this scope mentions `name`: `loads`
        counts only the scope's own reads."""
        found: List[cst.Name] = []

        class _Nested(Visitor):
            def __init__(self) -> None:
                super().__init__()
                self.depth = 0

            def visit_FunctionDef(self, node) -> None:
                self.depth += 1

            def leave_FunctionDef(self, node) -> None:
                self.depth -= 1

            visit_Lambda = visit_ClassDef = visit_FunctionDef
            leave_Lambda = leave_ClassDef = leave_FunctionDef

            def visit_Name(self, node: cst.Name) -> None:
                if self.depth and node.value == name:
                    found.append(node)

        body = self.scope.body if isinstance(self.scope, cst.FunctionDef) else self.scope
        _Nested().walk(body)
        return bool(found)

    def lookup(self, name: str, use: cst.CSTNode) -> Optional[Binding]:
        """The one binding that reaches `use`, or None when that is not certain: the only
        reaching definition (`reaching`): `t = f(x)`, `t = t.softmax(-1)`, then `t` reads the
        second; a binding in one branch, or later in a loop (it reaches the next iteration's
        top), leaves several."""
        found = self.reaching(name, use)
        return found[0] if found is not None and len(found) == 1 else None

    def reaching(self, name: str, use: cst.CSTNode) -> Optional[List[Binding]]:
        """Every binding of `name` that may give it its value at the Name `use`, in source order;
        None when the scope does not bind `name` before it on any way (or `use` is not the
        scope's own: a lambda, unreachable code)."""
        if name not in self.bindings or not isinstance(use, cst.Name):
            return None
        if self._reaching is None:
            self._reaching = Reaching(self)
        found = self._reaching.at(name, use)
        if not found:
            return None
        return [self.bindings[name][index] for index in found]


def all_params(params: cst.Parameters) -> Iterator[cst.Param]:
    """Every parameter of a signature, `*args` and `**kwargs` included."""
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            yield extra


def read_names(expr: cst.CSTNode) -> Set[str]:
    """Names read by `expr`, plus `a.b` for an attribute of a name (how ScopeTable records
    `self.x = ...`), so that a rebinding of either is seen."""
    found: Set[str] = set()

    class _Collect(Visitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if isinstance(node.value, cst.Name):
                found.add(f"{node.value.value}.{node.attr.value}")
            self.walk(node.value)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            self.walk(node.value)
            return False

    _Collect().walk(expr)
    return found


def is_plain(expr: cst.BaseExpression) -> bool:
    """Recomputing `expr` gives the same value: names, attributes, literals, arithmetic, indexing;
    no calls, no comprehensions, no walrus."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis)):
        return True
    if isinstance(expr, cst.Attribute):
        return is_plain(expr.value)
    if isinstance(expr, cst.UnaryOperation):
        return is_plain(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return is_plain(expr.left) and is_plain(expr.right)
    if isinstance(expr, cst.Tuple):
        return all(isinstance(e, cst.Element) and is_plain(e.value) for e in expr.elements)
    if isinstance(expr, cst.Subscript):
        return is_plain(expr.value) and all(_plain_slice(e.slice) for e in expr.slice)
    return False


def _plain_slice(part: cst.BaseSlice) -> bool:
    if isinstance(part, cst.Index):
        return is_plain(part.value)
    return all(p is None or is_plain(p) for p in (part.lower, part.upper, part.step))  # type: ignore[attr-defined]  # not an Index: a Slice
