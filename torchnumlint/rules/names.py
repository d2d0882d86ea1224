"""Shared name resolution: imports and aliases, the method form, a name to its assignment.

LibCST's QualifiedNameProvider/ScopeProvider cost ~8x a bare parse on real code, so we resolve
with a small resolver of our own: a module's imports are few, and only the names a rule asks
about are followed, lazily, one scope at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.flow import Reaching
from torchnumlint.walk import Visitor

# ---------------------------------------------------------------------------------------------
# Imports

# `import torch`, `import torch.nn as nn`, `import os, torch`, `from torch import nn`, at any
# indentation (an import inside a function or a try block counts).
_TORCH_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+torch\b|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*torch\b)",
    re.MULTILINE,
)


def imports_torch(text: str) -> bool:
    """Whether the source imports torch at all. A file that never does is not torch code: its
    `.sum()`, `.std()` and `log` belong to numpy, Python or another framework, and no rule
    reports there (a cheap text test, run before any parse)."""
    return _TORCH_IMPORT.search(text) is not None



class ImportMap:
    """local name -> fully qualified name, from every import statement in a module."""

    def __init__(self, module: cst.Module) -> None:
        self.aliases: Dict[str, str] = {}
        self.top_level: Dict[str, str] = {}
        # Names imported from different places (`try: from torch.cuda.amp import autocast`
        # `except ImportError: from torch.amp import autocast`): which one a run sees depends
        # on the branch, so they resolve to nothing and no fix rewrites them as either.
        self.ambiguous: Set[str] = set()
        self.last_top_import: Optional[cst.SimpleStatementLine] = None
        self.header_end: Optional[cst.SimpleStatementLine] = None  # docstring / __future__
        for index, stmt in enumerate(module.body):
            if isinstance(stmt, cst.SimpleStatementLine):
                small = stmt.body
                if any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
                    self.last_top_import = stmt
                    if self._is_future(small):
                        self.header_end = stmt
                elif index == 0 and _is_docstring(stmt):
                    self.header_end = stmt
        self._collect(module.body, top=True)

    @staticmethod
    def _is_future(small: Sequence[cst.BaseSmallStatement]) -> bool:
        return any(
            isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__"
            for s in small
        )

    def _collect(self, body: Sequence[cst.CSTNode], top: bool) -> None:
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self._add(small, top)
            elif isinstance(stmt, cst.BaseCompoundStatement):
                # Imports under `if`/`try` at module level still bind module-level names;
                # imports inside functions bind locals, good enough for resolution.
                # Imports under `if TYPE_CHECKING:` are not there at run time: fixes never use them.
                is_block = isinstance(stmt, (cst.If, cst.Try, cst.With)) and not _is_type_checking(stmt)
                for child in _bodies(stmt):
                    self._collect(child, top and is_block)

    def _add(self, node, top: bool) -> None:
        found: Dict[str, str] = {}
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)
                if alias.asname is not None:
                    found[cst.ensure_type(alias.asname.name, cst.Name).value] = full
                else:
                    head = full.split(".")[0]
                    found[head] = head
        else:
            if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
                return
            base = dotted(node.module)
            for alias in node.names:
                name = dotted(alias.name)
                local = alias.asname.name.value if alias.asname is not None else name
                found[local] = f"{base}.{name}"
        for local, target in found.items():
            if self.aliases.get(local, target) != target:
                self.ambiguous.add(local)
        self.aliases.update(found)
        if top:
            self.top_level.update(found)

    def qualname(self, expr: cst.BaseExpression) -> Optional[str]:
        """`F.softmax` -> 'torch.nn.functional.softmax' when F is that module; else None."""
        parts: List[str] = []
        while isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name) or expr.value in self.ambiguous:
            return None
        head = self.aliases.get(expr.value)
        if head is None:
            if expr.value != "torch":  # `torch` used without an import we saw: still torch
                return None
            head = "torch"
        parts.append(head)
        return ".".join(reversed(parts))

    def is_module_ref(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` names an imported module or object (so `expr.log()` is no method call)."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        return isinstance(expr, cst.Name) and (expr.value in self.aliases or expr.value == "torch")

    def reference(self, qualified: str, text: str = "") -> Tuple[str, Optional[str]]:
        """Source text that names `qualified` in this module, and the import line it needs, if any.

        Reuses the file's own alias (`F.log_softmax` under `import torch.nn.functional as F`); a new
        `F` alias is introduced only when the module's `text` uses no name `F` at all.
        """
        for local, target in self.top_level.items():
            if target == qualified and local not in self.ambiguous:
                return local, None
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:cut])
            for local, target in self.top_level.items():
                if target == prefix and local not in self.ambiguous:
                    return ".".join([local] + parts[cut:]), None
        if qualified.startswith("torch.nn.functional.") and not re.search(r"\bF\b", text):
            return "F." + parts[-1], "import torch.nn.functional as F"
        return qualified, "import torch"


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    raise TypeError(type(node).__name__)


def _is_type_checking(stmt: cst.BaseCompoundStatement) -> bool:
    test = getattr(stmt, "test", None)
    name = test.value if isinstance(test, cst.Name) else test.attr.value if isinstance(test, cst.Attribute) else None
    return name == "TYPE_CHECKING"


def _is_docstring(stmt: cst.SimpleStatementLine) -> bool:
    return (
        len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _bodies(stmt: cst.BaseCompoundStatement) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists directly under a compound statement (else/except/finally too)."""
    stack: List[cst.CSTNode] = [stmt]
    while stack:
        node = stack.pop()
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock):
            yield body.body
        elif isinstance(body, cst.SimpleStatementSuite):
            yield body.body
        elif isinstance(body, (list, tuple)):
            yield body
        for attr in ("orelse", "finalbody"):
            extra = getattr(node, attr, None)
            if extra is not None:
                stack.append(extra)
        for handler in getattr(node, "handlers", ()) or ():
            stack.append(handler)


# ---------------------------------------------------------------------------------------------
# Operations: one canonical name for the function form, every alias and the method form


@dataclass(frozen=True)
class Op:
    name: str
    functions: FrozenSet[str]
    method: Optional[str]
    params: Tuple[str, ...]  # parameters after the tensor input, in order
    method_params: Optional[Tuple[str, ...]] = None  # when the method's order differs
    input_kw: str = "input"


def make_op(name, functions, method=None, params=(), method_params=None, input_kw="input") -> Op:
    return Op(name, frozenset(functions), method, tuple(params), method_params, input_kw)


_F = "torch.nn.functional."

OPS: Dict[str, Op] = {
    op.name: op
    for op in (
        make_op("softmax", {"torch.softmax", _F + "softmax", "torch.special.softmax"}, "softmax",
            ("dim", "_stacklevel", "dtype"), ("dim", "dtype")),
        make_op("log_softmax", {"torch.log_softmax", _F + "log_softmax", "torch.special.log_softmax"},
            "log_softmax", ("dim", "_stacklevel", "dtype"), ("dim", "dtype")),
        make_op("sigmoid", {"torch.sigmoid", _F + "sigmoid", "torch.special.expit"}, "sigmoid"),
        make_op("logsigmoid", {_F + "logsigmoid"}),
        make_op("log", {"torch.log"}, "log"),
        make_op("log1p", {"torch.log1p", "torch.special.log1p"}, "log1p"),
        make_op("exp", {"torch.exp", "torch.special.exp"}, "exp"),
        make_op("sqrt", {"torch.sqrt"}, "sqrt"),
        make_op("rsqrt", {"torch.rsqrt"}, "rsqrt"),
        make_op("pow", {"torch.pow"}, "pow", ("exponent",)),
        make_op("square", {"torch.square"}, "square"),
        make_op("abs", {"torch.abs"}, "abs"),
        make_op("sum", {"torch.sum"}, "sum", ("dim", "keepdim", "dtype")),
        make_op("mean", {"torch.mean"}, "mean", ("dim", "keepdim", "dtype")),
        make_op("std", {"torch.std"}, "std", ("dim", "unbiased", "keepdim")),
        make_op("var", {"torch.var"}, "var", ("dim", "unbiased", "keepdim")),
        make_op("norm", {"torch.norm"}, "norm", ("p", "dim", "keepdim", "dtype")),
        make_op("linalg_norm", {"torch.linalg.norm"}, None, ("ord", "dim", "keepdim")),
        make_op("vector_norm", {"torch.linalg.vector_norm"}, None, ("ord", "dim", "keepdim")),
        make_op("clamp", {"torch.clamp", "torch.clip"}, "clamp", ("min", "max")),
        make_op("clip", set(), "clip", ("min", "max")),
        make_op("clamp_min", {"torch.clamp_min"}, "clamp_min", ("min",)),
        make_op("clamp_", set(), "clamp_", ("min", "max")),
        make_op("clamp_min_", set(), "clamp_min_", ("min",)),
        make_op("maximum", {"torch.maximum", "torch.fmax"}, "maximum", ("other",)),
        make_op("max", {"torch.max"}, "max", ("dim", "keepdim")),
        make_op("detach", set(), "detach"),
        make_op("gather", {"torch.gather"}, "gather", ("dim", "index", "sparse_grad")),
        make_op("div", {"torch.div", "torch.divide", "torch.true_divide"}, "div", ("other", "rounding_mode")),
        make_op("divide", set(), "divide", ("other", "rounding_mode")),
        make_op("true_divide", set(), "true_divide", ("other",)),
        make_op("div_", set(), "div_", ("other", "rounding_mode")),
        make_op("count_nonzero", {"torch.count_nonzero"}, "count_nonzero", ("dim",)),
        make_op("softplus", {_F + "softplus"}, None, ("beta", "threshold")),
        make_op("normalize", {_F + "normalize"}, None, ("p", "dim", "eps")),
        make_op("kl_div", {_F + "kl_div"}, None, ("target", "size_average", "reduce", "reduction", "log_target")),
        make_op("nll_loss", {_F + "nll_loss"}, None,
            ("target", "weight", "size_average", "ignore_index", "reduce", "reduction")),
        make_op("cross_entropy", {_F + "cross_entropy"}, None,
            ("target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")),
    )
}


@dataclass
class CallMatch:
    """A call recognised as an Op: its tensor input and its other arguments by parameter name."""

    op: Op
    call: cst.Call
    input: cst.BaseExpression
    form: str  # "function" or "method"
    args: Dict[str, cst.Arg] = field(default_factory=dict)
    extra: Tuple[cst.Arg, ...] = ()  # arguments we could not place (*args, **kwargs, surplus)

    def arg(self, name: str) -> Optional[cst.BaseExpression]:
        found = self.args.get(name)
        return found.value if found is not None else None

    def given(self, name: str) -> bool:
        """Argument `name` was passed and is not `None` (`clamp(x, min=None)` sets no floor)."""
        value = self.arg(name)
        return value is not None and not is_literal(value, "None")

    @property
    def fully_known(self) -> bool:
        """No *args/**kwargs: every argument the user passed is accounted for."""
        return not self.extra


def match_call(imports: ImportMap, node: cst.CSTNode, *names: Union[str, Op]) -> Optional[CallMatch]:
    """Match `node` against the Ops `names` (keys of OPS, or Op objects) in function form (any
    alias) or method form."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    qual = imports.qualname(func)
    for name in names:
        op = name if isinstance(name, Op) else OPS[name]
        if qual is not None and qual in op.functions:
            return _bind(op, node, node.args, None, "function")
        if (
            op.method is not None
            and isinstance(func, cst.Attribute)
            and func.attr.value == op.method
            and not imports.is_module_ref(func.value)
            and not is_literal(func.value, "self")  # `self.softmax(x)`: a module's own, not Tensor.softmax
        ):
            params = op.method_params if op.method_params is not None else op.params
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if positional and op.method in _MODULE_NAMED and not _dim_like(positional[0].value):
                continue  # `rnn.softmax(x)`: a module's softmax given a tensor, not Tensor.softmax(dim)
            if len(positional) <= len(params):
                return _bind(op, node, node.args, func.value, "method")
    return None


# Tensor methods that modules also have under the same name (`self.softmax = nn.Softmax(-1)`).
_MODULE_NAMED = frozenset({"softmax", "log_softmax"})


def _dim_like(expr: cst.BaseExpression) -> bool:
    """Whether `expr` can be a dimension: an integer (`-1`), a name or attribute that says so
    (`dim`, `self.axis`, `d`), `len(...)`, `x.dim()`/`x.ndim`, or arithmetic of those. A tensor
    name (`x`, `logits`) is not: `m.softmax(x)` calls a module, whose `log_softmax` may not exist."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(_dim_like(element.value) for element in expr.elements)
    if isinstance(expr, cst.UnaryOperation):
        return _dim_like(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _dim_like(expr.left) or _dim_like(expr.right)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        ident = (expr.value if isinstance(expr, cst.Name) else expr.attr.value).lower()
        return ident in ("d", "ax", "ndim") or "dim" in ident or "axis" in ident or "axes" in ident
    if isinstance(expr, cst.Call):
        func = expr.func
        return (isinstance(func, cst.Name) and func.value == "len") or (
            isinstance(func, cst.Attribute) and func.attr.value in ("dim", "ndimension")
        )
    return False


def _bind(op: Op, call: cst.Call, args: Sequence[cst.Arg], receiver, form: str) -> Optional[CallMatch]:
    params = op.params if form == "function" or op.method_params is None else op.method_params
    bound: Dict[str, cst.Arg] = {}
    extra: List[cst.Arg] = []
    positional = [a for a in args if a.keyword is None and not a.star]
    names = list(params) if receiver is not None else [op.input_kw] + list(params)
    for arg, pname in zip(positional, names):
        bound[pname] = arg
    extra.extend(positional[len(names):])
    for arg in args:
        if arg.star:
            extra.append(arg)
        elif arg.keyword is not None:
            bound[arg.keyword.value] = arg
    if receiver is None:
        first = bound.pop(op.input_kw, None)
        if first is None:
            if op.input_kw == "input" and "x" in bound:  # some aliases spell it x
                first = bound.pop("x")
            else:
                return None
        receiver = first.value
    if any(name not in params for name in bound):
        return None  # not this op's signature: not the call we think it is
    return CallMatch(op, call, receiver, form, bound, tuple(extra))


def is_literal(expr: Optional[cst.BaseExpression], word: str) -> bool:
    """`expr` is the bare name `word`: `True`, `False`, `None`, `self`."""
    return isinstance(expr, cst.Name) and expr.value == word


# ---------------------------------------------------------------------------------------------
# A name to its single assignment


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
            Binding(node, value, self._counter, self._no_grad > 0, self._statements[-1], unpacked,
                    isinstance(node, cst.NamedExpr))
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


# ---------------------------------------------------------------------------------------------
# Steps that keep a tensor's values (or select some of them): `p[..., None]`, `p.gather(1, y)`,
# `p.view(b, -1)`, `p.float()`, `vals` of `vals, idx = p.topk(5)`. "Is this a softmax?" asks the
# same of `p` as of what these steps make of it; a float cast keeps probabilities probabilities.

_SELECT = ("gather", "index_select", "narrow", "masked_select", "take_along_dim")
_RESHAPE = tuple(sorted(vocabulary.SHAPE_ONLY | vocabulary.COPIES))
_STEP_METHODS = frozenset(_SELECT + _RESHAPE) | vocabulary.FLOAT_CASTS - {"type_as"}
_STEP_FUNCTIONS = frozenset(_SELECT + _RESHAPE)
_STEP_ATTRS = vocabulary.SHAPE_ATTRIBUTES
# `.to(torch.long)` rounds probabilities to 0: no longer the same values
_INTEGER_DTYPES = frozenset(f"torch.{t}" for t in (
    "long", "int", "int64", "int32", "int16", "int8", "uint8", "bool", "short"))
# Element 0 of their result holds values of the input, element 1 indices; max/min/median only
# with a dim (without one they return a tensor; `torch.max(a, b)` is elementwise).
_RANKINGS = frozenset({"topk", "sort", "kthvalue", "mode", "cummax", "cummin"})
_RANKINGS_WITH_DIM = frozenset({"max", "min", "median", "nanmedian"})
# Every element of their result is a part of the input.
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit"})


def _tensor_call(
    imports: ImportMap, expr: cst.BaseExpression, methods: FrozenSet[str], functions: Optional[FrozenSet[str]] = None
) -> Optional[Tuple[str, cst.BaseExpression, Sequence[cst.Arg]]]:
    """`p.name(args)` for one of `methods`, or `torch.name(p, args)` for one of `functions`
    (default: the same names): the name, `p` and the other arguments."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in methods and not imports.is_module_ref(func.value):
        return func.attr.value, func.value, expr.args
    qual = imports.qualname(func)
    short = qual[len("torch."):] if qual is not None and qual.startswith("torch.") else None
    if short in (methods if functions is None else functions) and expr.args:
        first = expr.args[0]
        if first.keyword is None and not first.star:
            return short, first.value, expr.args[1:]
    return None


def _gives_pair(name: str, args: Sequence[cst.Arg]) -> bool:
    """Whether the ranking `name` called with `args` (after its input) returns (values, indices)."""
    if name in _RANKINGS:
        return True
    if any(a.keyword is not None and a.keyword.value == "dim" for a in args):
        return True
    first = args[0].value if args and args[0].keyword is None and not args[0].star else None
    if isinstance(first, cst.UnaryOperation):
        first = first.expression
    return isinstance(first, cst.Integer)


def selection_of_element(imports: ImportMap, value: cst.BaseExpression, position: int) -> Optional[cst.BaseExpression]:
    """What element `position` of `value` is a selection of, where that is known: the input of
    a ranking for its values (`vals, idx = p.topk(5)`: `p`; `idx` holds indices: None), the
    input of a split for any part, the element of a tuple written out; else None."""
    if isinstance(value, (cst.Tuple, cst.List)):
        elements = value.elements
        if position < len(elements) and not any(isinstance(e, cst.StarredElement) for e in elements):
            return elements[position].value
        return None
    split = _tensor_call(imports, value, _SPLITS)
    if split is not None:
        return split[1]
    ranking = _tensor_call(imports, value, _RANKINGS | _RANKINGS_WITH_DIM)
    if ranking is not None and _gives_pair(ranking[0], ranking[2]) and position == 0:
        return ranking[1]
    return None


def _element_read(imports: ImportMap, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`p.max(-1)[0]`, `p.topk(5).values`, `p.chunk(2)[1]`: what the element read is a
    selection of (None: indices, or not such a read)."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "indices"):
        return selection_of_element(imports, expr.value, 0 if expr.attr.value == "values" else 1)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        index = expr.slice[0].slice.value
        if isinstance(index, cst.Integer) and not isinstance(expr.value, (cst.Tuple, cst.List)):
            return selection_of_element(imports, expr.value, int(index.value))
    return None


def selection_of(imports: ImportMap, expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` without the steps that keep its values or select some of them (indexing, `gather`,
    `index_select`, `narrow`, `masked_select`, reshapes, `.T`, `contiguous`, float casts and
    `.to(...)` to anything but an integer dtype, the values of a ranking or a part of a split):
    the tensor they start from. Names are not followed (`FileContext.origins` does both)."""
    for _ in range(16):
        element = _element_read(imports, expr)
        if element is not None:
            expr = element
        elif isinstance(expr, cst.Subscript):
            expr = expr.value  # `p.topk(5)[1]` stops at the ranking: not a selection of `p`
        elif isinstance(expr, cst.Attribute) and expr.attr.value in _STEP_ATTRS:
            expr = expr.value
        else:
            step = _tensor_call(imports, expr, _STEP_METHODS, _STEP_FUNCTIONS)
            if step is None or (step[0] == "to" and any(imports.qualname(a.value) in _INTEGER_DTYPES for a in step[2])):
                return expr
            expr = step[1]
    return expr


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
