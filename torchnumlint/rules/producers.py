"""What a call produces when the producer is written elsewhere: a helper's return, a module.

`torch.log(F.softmax(z, -1))` shows its softmax; `torch.log(self.probs(z))`, `torch.log(act(z))`
with `act = nn.Softmax(dim=-1)`, or `torch.log(model(x))` whose `forward` ends in `nn.Sigmoid()`
hide theirs. The shared matchers (`made_by.softmax_call`, `made_by.sigmoid_call`) ask this module
as their last step, after the call itself and the names behind it did not match.

The one question a rule (or a matcher) may ask:

    call_kind(ctx, expr) -> Optional[Produced]

`expr` is an expression at the node being visited (a name is followed to the call assigned to
it, like `ctx.resolve`). The answer says what kind of value the call returns: `Produced.kind` is
"softmax", "log_softmax", "sigmoid", "logsigmoid" or "norm", `Produced.dim` the softmax dimension
where it is an integer literal (else None), `Produced.callee` the callee as written at the use
site (`self.probs`, `heads.probs`), for a message. "log_softmax" and "logsigmoid" are the good
forms (`nn.LogSoftmax`, `nn.LogSigmoid`): a rule treats them as already in log space.

The roads to an answer:

- a function of the file called by name, whose every `return` gives one kind (through local
  names: `p = F.softmax(z, -1); return p`, and through other helpers);
- `self.probs(x)`: a method of the enclosing class or one of its project bases;
- a module instance: `self.softmax = nn.Softmax(dim=-1)` assigned once at the top of `__init__`,
  a local or module-level `act = nn.Sigmoid()`, `nn.Softmax(-1)(x)` called at once, or an
  `nn.Sequential` whose last layer is literally one of them;
- an instance of a project class (`model = Net()`, `self.head = Head()`), whose `forward` gives
  one kind, or one of its methods called on it (`head.probs(x)`, `self.head.both(x)[1]`);
- any of these in another module of the project (`from .heads import probs`, `heads.probs(x)`),
  through the project index's summaries (`torchnumlint.summaries`).

None means "not known to produce one of these": a callee that is a parameter or a local bound to
something else, returns of different kinds (or a path that returns nothing), a conditional
activation, an attribute assigned anywhere else (or a subclass that redefines it), a `Sequential`
not ending in the activation, a same-named function of another package, or code that cannot be
seen. A rule never reports on None.

Facts of the file being linted come from its own text, always; facts of other files only from
`ctx.index`, which the runner builds for rules that declare `needs_index`. Without the index a
helper imported from another module gives None, never a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchnumlint.rules.bindings import all_params, ScopeTable
from torchnumlint.rules.calls import is_literal
from torchnumlint.rules.imports import dotted
from torchnumlint.summaries import FileSummary, Instance, Summaries, instance_callee, summarize

if TYPE_CHECKING:
    from torchnumlint.context import FileContext


@dataclass(frozen=True)
class Produced:
    kind: str  # "softmax", "log_softmax", "sigmoid", "logsigmoid", "norm"
    dim: Optional[int]  # the softmax dim, where it is an integer literal
    callee: str  # the callee as written at the use site, for a message
    call: cst.Call  # the call that produces it (for an element of a tuple, the call unpacked)


def call_kind(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Produced]:
    """What the call `expr` (or the call assigned to the name `expr`) returns, where a helper,
    a method or a module instance produces it, or what one element of the tuple it returns is
    (`recon, mu, logvar = model(x)`: `mu`); None when that is not known."""
    call, element = ctx.resolve(expr), None
    binding = ctx.binding(call) if isinstance(call, cst.Name) else None
    if binding is not None and binding.unpacked is not None:
        call, element = binding.unpacked
    if not isinstance(call, cst.Call):
        return None
    summaries, own = _summaries(ctx)
    if own is None:
        return None
    found = _callee(ctx, own, call.func)
    if found is None:
        return None
    callee, instance = found
    kind = summaries.callee_kind(ctx.path, instance, callee, element=element)
    if kind is None:
        return None
    return Produced(kind[0], kind[1], ctx.module.code_for_node(call.func), call)


def _summaries(ctx: "FileContext") -> Tuple[Summaries, Optional[FileSummary]]:
    """The project's summaries with this file's own, read from the text being linted (the index
    may be empty, or hold the text as it was before a fix)."""

    def build(ctx: "FileContext") -> Tuple[Summaries, Optional[FileSummary]]:
        try:
            own: Optional[FileSummary] = summarize(ctx.path, ast.parse(ctx.text), calls=False)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            own = None
        return ctx.index.summaries.with_file(ctx.path, own), own

    return ctx.per_file("producers.summaries", build)


def _callee(ctx: "FileContext", own: FileSummary, func: cst.BaseExpression) -> Optional[Tuple[Optional[tuple], Optional[Instance]]]:
    """The callee fact (`torchnumlint.summaries`) of `func` at the node being visited, and the
    class of `self` where it is `self.name`."""
    if isinstance(func, cst.Call):  # nn.Softmax(dim=-1)(x)
        return _instance(ctx, own, func), None
    if isinstance(func, cst.Attribute) and func.attr.value == "forward" and not is_literal(func.value, "self"):
        return _callee(ctx, own, func.value)  # `model.forward(x)` is `model(x)`; `self.forward` a method
    if isinstance(func, cst.Attribute) and is_literal(func.value, "self"):
        cls = _method_class(ctx)
        return (("self", func.attr.value), (ctx.path, cls)) if cls is not None else None
    if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Attribute)):
        held = _held_instance(ctx, own, func.value)  # `head.probs(x)`, `self.head.both(x)`
        if held is not None:
            return ("self", func.attr.value), held
    try:
        name = dotted(func)
    except TypeError:
        return None  # a subscript, a call's attribute: nothing a summary names
    head = name.partition(".")[0]
    if not _is_local(ctx, head):
        return ("name", name), None  # a function, instance or import of the module
    if head != name:
        return None
    binding = ctx.binding(func)
    if binding is None or binding.value is None:
        return None  # a parameter, or a name bound more than one way
    return _instance(ctx, own, binding.value), None


def _held_instance(ctx: "FileContext", own: FileSummary, obj: cst.BaseExpression) -> Optional[Instance]:
    """The project class of `obj`: a local name bound once to an instance (`head = Head(d)`), or
    `self.head` that `__init__` assigns one; a method called on it is read in that class."""
    summaries = _summaries(ctx)[0]
    if isinstance(obj, cst.Attribute) and is_literal(obj.value, "self"):
        cls = _method_class(ctx)
        return summaries.instance_class(ctx.path, (ctx.path, cls), ("self", obj.attr.value)) if cls is not None else None
    if not isinstance(obj, cst.Name) or obj.value in ("self", "cls"):
        return None
    if not _is_local(ctx, obj.value):
        return summaries.instance_class(ctx.path, None, own.values.get(obj.value))  # a module-level instance
    binding = ctx.binding(obj)
    if binding is None or binding.value is None:
        return None
    return summaries.instance_class(ctx.path, None, _instance(ctx, own, binding.value))


def _instance(ctx: "FileContext", own: FileSummary, value: cst.BaseExpression) -> Optional[tuple]:
    """What calling the object `value` gives, read by the same code as the summaries read."""
    try:
        tree = ast.parse(f"({ctx.module.code_for_node(value)})", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return instance_callee(own, tree.body)


def _method_class(ctx: "FileContext") -> Optional[str]:
    """The module-level class whose method (taking `self` first) holds the node being visited;
    None in a nested function, a static method or a nested class."""
    for i in range(len(ctx.stack) - 2, 1, -1):
        node = ctx.stack[i]
        if isinstance(node, cst.Lambda):
            return None
        if isinstance(node, cst.FunctionDef):
            cls = ctx.stack[i - 2]
            params = node.params.posonly_params or node.params.params
            if isinstance(cls, cst.ClassDef) and cls in ctx.module.body and params and params[0].name.value == "self":
                return cls.name.value
            return None
    return None


def _is_local(ctx: "FileContext", name: str) -> bool:
    """Whether a function or lambda around the node being visited binds `name` (a parameter, an
    assignment, a nested def, an import): then it is not the module's."""
    bound: Dict[int, FrozenSet[str]] = ctx.per_file("producers.locals", lambda ctx: {})
    for node in ctx.stack[:-1]:
        if isinstance(node, cst.Lambda):
            if any(p.name.value == name for p in all_params(node.params)):
                return True
        elif isinstance(node, cst.FunctionDef):
            names = bound.get(id(node))
            if names is None:
                names = bound[id(node)] = frozenset(ScopeTable(ctx.imports, node).bindings) | _imported(node)
            if name in names:
                return True
    return False


def _imported(func: cst.FunctionDef) -> FrozenSet[str]:
    """Names a function's own `import` statements bind (ScopeTable leaves imports to ImportMap)."""
    found: Set[str] = set()
    stack: List[cst.CSTNode] = [func.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Import):
            found.update(cst.ensure_type(a.asname.name, cst.Name).value if a.asname else dotted(a.name).split(".")[0] for a in node.names)
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            found.update(cst.ensure_type(a.asname.name, cst.Name).value if a.asname else dotted(a.name) for a in node.names)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(n for n in node.children if isinstance(n, cst.CSTNode))
    return frozenset(found)
