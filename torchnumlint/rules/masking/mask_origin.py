"""Where a mask comes from, and whether that is evidence that it can cover a whole row.

A `-inf` fill is a hazard only for a row whose every entry it masks. Padding, length and
attention masks do that for an empty sequence (a batch of one padded sample, a graph node with no
edges), and they come from the data the code is given. A mask the code builds itself from
constants and shapes (a triangle, `arange(n).ge(step)`, a local-window map computed in
`__init__` and stored) is what its author chose: it covers a row only if the construction says
so, which `fills.masks_first_row` reads for the one construction that plainly does.

`origin(ctx, mask)` follows the mask back through names (every assignment that reaches it),
`self.x` (every assignment in its class, read in the method that makes it), comparisons, logical
operators, casts, reshapes, indexing, helpers' arguments and loops, and says:

- `why`: evidence, as a phrase for the message. A value handed to the code (a parameter of the
  function, not `self`, not an `__init__` option: those configure a module), a batch field or an
  attribute of such a value, or a name that says it is a mask (`guards.says_mask`) whose
  construction is not visible here. One way with evidence is enough: a length that is 0 on one
  path masks that row there.
- `constant`: built only from constants and shapes (`torch.ones`, `arange`, `.size()`, `len`,
  `.shape`, numbers, a module's options).
- neither: unknown (a helper with no arguments, a random draw).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, List, Optional, Sequence, Set

import libcst as cst

from torchnumlint.rules.guards import says_mask, strip_parens, ways
from torchnumlint.rules.names import all_params, is_literal
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


@dataclass(frozen=True)
class Origin:
    """What a mask is made from: `why` it can cover a row (None: no evidence), or whether it is
    `constant` (constants and shapes only)."""

    why: Optional[str] = None
    constant: bool = False


CONSTANT = Origin(constant=True)
UNKNOWN = Origin()

# Calls whose value depends only on their sizes (a shape in, a fixed pattern out).
_CONSTRUCTORS = frozenset(
    {"torch.ones", "torch.zeros", "torch.empty", "torch.full", "torch.arange", "torch.eye", "torch.linspace",
     "torch.ones_like", "torch.zeros_like", "torch.empty_like", "torch.full_like",
     "numpy.ones", "numpy.zeros", "numpy.full", "numpy.eye", "numpy.arange", "numpy.tri"}
)
_NEW_TENSOR = frozenset({"new_ones", "new_zeros", "new_full", "new_empty"})
# What only reads a size: constant whatever tensor it is asked of.
_SIZE_METHODS = frozenset({"size", "dim", "numel", "nelement"})
_SIZE_ATTRIBUTES = frozenset({"shape", "ndim", "device", "dtype", "is_cuda"})
# Steps that keep the entries of their receiver (casts, reshapes, copies): only it matters.
_KEEPS_RECEIVER = frozenset(
    {"bool", "byte", "long", "int", "float", "half", "double", "to", "type", "type_as", "clone", "contiguous",
     "detach", "view", "view_as", "reshape", "reshape_as", "unsqueeze", "squeeze", "expand", "expand_as",
     "permute", "transpose", "flatten", "repeat", "repeat_interleave", "t", "cuda", "cpu", "flip"}
)
# Element-wise logic: constant operands give a constant mask.
_ELEMENTWISE_METHODS = frozenset(
    {"eq", "ne", "ge", "gt", "le", "lt", "logical_and", "logical_or", "logical_not", "logical_xor",
     "bitwise_and", "bitwise_or", "bitwise_not", "tril", "triu", "tril_", "triu_"}
)
_ELEMENTWISE_FUNCTIONS = frozenset(
    {"torch.eq", "torch.ne", "torch.ge", "torch.gt", "torch.le", "torch.lt", "torch.logical_and",
     "torch.logical_or", "torch.logical_not", "torch.logical_xor", "torch.tril", "torch.triu", "torch.where",
     "torch.from_numpy", "torch.as_tensor", "torch.tensor", "torch.nn.Parameter", "torch.cat", "torch.stack"}
)
_BUILTINS = frozenset({"range", "min", "max", "int", "float", "abs", "enumerate", "zip", "round"})
_DEPTH = 12


def origin(ctx: "FileContext", mask: cst.BaseExpression) -> Origin:
    """Where `mask` comes from (see the module)."""
    return _Search(ctx).of(mask, 0)


def _combine(origins: Iterable[Origin]) -> Origin:
    """The first evidence among `origins`; constant when all are."""
    found = list(origins)
    for one in found:
        if one.why is not None:
            return one
    return CONSTANT if all(one.constant for one in found) else UNKNOWN


def _named(ident: str, known: Origin) -> Origin:
    """A name that says it is a mask is evidence unless its construction is seen to be constant."""
    if known.why is None and not known.constant and says_mask(ident):
        return Origin(why=f"`{ident}` is a mask by its name")
    return known


class _Search:
    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx
        self.seen: Set[int] = set()

    def of(self, expr: cst.BaseExpression, depth: int) -> Origin:
        if depth > _DEPTH or id(expr) in self.seen:
            return UNKNOWN
        self.seen.add(id(expr))
        expr = strip_parens(expr)
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.Ellipsis)) or any(
            is_literal(expr, word) for word in ("True", "False", "None")
        ):
            return CONSTANT
        if isinstance(expr, cst.Name):
            return self.name(expr, depth)
        if isinstance(expr, cst.Attribute):
            return self.attribute(expr, depth)
        if isinstance(expr, cst.Subscript):
            return self.subscript(expr, depth)
        if isinstance(expr, cst.Call):
            return self.call(expr, depth)
        return self.all_of(_operands(expr), depth)

    def all_of(self, parts: Sequence[cst.BaseExpression], depth: int) -> Origin:
        return _combine(self.of(part, depth + 1) for part in parts) if parts else UNKNOWN

    def name(self, expr: cst.Name, depth: int) -> Origin:
        if expr.value in ("self", "cls"):
            return UNKNOWN
        found = ways(self.ctx, expr)
        if found is None:
            return _named(expr.value, UNKNOWN)
        return _named(expr.value, _combine(self.way(way.value, way.binding, depth) for way in found))

    def way(self, value: cst.CSTNode, binding, depth: int) -> Origin:
        if isinstance(value, cst.Param):
            return self.param(value)
        if isinstance(value, cst.BaseExpression):
            return self.of(value, depth + 1)
        if binding is not None and binding.unpacked is not None:  # `mask, lengths = batch`
            return self.of(binding.unpacked[0], depth + 1)
        if isinstance(value, cst.For):  # `for i, n in enumerate(lengths)`
            return self.of(value.iter, depth + 1)
        if isinstance(value, cst.Assign) and isinstance(value.targets[0].target, cst.Subscript):
            # `mask[i, n:] = True`: where it is changed and to what (the rest is the earlier way)
            target = value.targets[0].target
            return self.all_of(list(_slice_parts(target)) + [value.value], depth)
        return UNKNOWN

    def param(self, param: cst.Param) -> Origin:
        func = next(
            (node for node in reversed(self.ctx.stack)
             if isinstance(node, cst.FunctionDef) and any(p is param for p in all_params(node.params))),
            None,
        )
        name = param.name.value
        if func is None or name in ("self", "cls"):
            return UNKNOWN
        if func.name.value == "__init__" and not says_mask(name):  # a module's options: sizes, flags, ranges
            return CONSTANT
        return Origin(why=f"the mask comes from `{name}`, given to `{func.name.value}`")

    def attribute(self, expr: cst.Attribute, depth: int) -> Origin:
        if expr.attr.value in _SIZE_ATTRIBUTES:
            return CONSTANT
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            assigned = self.assignments(expr.attr.value)
            known = UNKNOWN
            if assigned:
                known = _combine(self.elsewhere(path, depth) for path in assigned)
            return _named(expr.attr.value, known)
        return _named(expr.attr.value, self.of(expr.value, depth + 1))

    def subscript(self, expr: cst.Subscript, depth: int) -> Origin:
        known = self.of(expr.value, depth + 1)
        key = expr.slice[0].slice if len(expr.slice) == 1 else None
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):  # `batch["pad_mask"]`
            text = key.value.evaluated_value
            if isinstance(text, str):
                return _named(text, known)
        return known

    def call(self, expr: cst.Call, depth: int) -> Origin:
        ctx = self.ctx
        args = [arg.value for arg in expr.args]
        qual = ctx.qualname(expr.func)
        if qual in _CONSTRUCTORS:
            return CONSTANT
        if qual in _ELEMENTWISE_FUNCTIONS:
            return self.all_of(args, depth)
        if isinstance(expr.func, cst.Name) and qual is None:
            if expr.func.value == "len":
                return CONSTANT
            if expr.func.value in _BUILTINS:
                return self.all_of(args, depth)
        func = expr.func
        if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
            method = func.attr.value
            if method in _SIZE_METHODS:
                return CONSTANT
            if method in _NEW_TENSOR:
                return CONSTANT
            if method in _KEEPS_RECEIVER:
                return self.of(func.value, depth + 1)
            if method in _ELEMENTWISE_METHODS:
                return self.all_of([func.value] + args, depth)
            parts = args if isinstance(func.value, cst.Name) and func.value.value == "self" else [func.value] + args
            return _helper(self.all_of(parts, depth))
        return _helper(self.all_of(args, depth))

    def assignments(self, attr: str) -> List[List[cst.CSTNode]]:
        """The paths (ancestors, value last) of every value `self.<attr>` is given in the class
        around the node being visited: `self.attr = v` and `self.register_buffer("attr", v)`."""
        ctx = self.ctx
        cls = ctx.enclosing(cst.ClassDef)
        if cls is None:
            return []
        table = ctx.per_file(f"masking-self-assignments-{id(cls)}", lambda _: _self_assignments(cls))
        outer = ctx.stack[: next(i for i, node in enumerate(ctx.stack) if node is cls) + 1]
        return [outer + [method, value] for method, value in table.get(attr, ())]

    def elsewhere(self, path: List[cst.CSTNode], depth: int) -> Origin:
        with self.ctx.visiting(path):
            return self.of(path[-1], depth + 1)  # type: ignore[arg-type]


def _helper(known: Origin) -> Origin:
    """A call of something unknown (a helper, a submodule): evidence from its arguments, but a
    constant argument says nothing of what the helper makes of it."""
    return known if known.why is not None else UNKNOWN


def _operands(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.BooleanOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.UnaryOperation):
        return [expr.expression]
    if isinstance(expr, cst.Comparison):
        return [expr.left] + [target.comparator for target in expr.comparisons]
    if isinstance(expr, cst.IfExp):
        return [expr.body, expr.orelse]
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [element.value for element in expr.elements]
    return []


def _slice_parts(target: cst.Subscript) -> Iterable[cst.BaseExpression]:
    for element in target.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            yield part.value
        elif isinstance(part, cst.Slice):
            yield from (bound for bound in (part.lower, part.upper, part.step) if bound is not None)


def _self_assignments(cls: cst.ClassDef) -> dict:
    """attr -> [(method, value)] for the methods defined in `cls`'s body."""
    found: dict = {}
    for method in cls.body.body:
        if isinstance(method, cst.FunctionDef):
            _Assignments(method, found).walk(method)
    return found


class _Assignments(Visitor):
    def __init__(self, method: cst.FunctionDef, found: dict) -> None:
        self.method, self.found = method, found

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is not self.method and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self.add(target.target, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.add(node.target, node.value)
        elif isinstance(node, cst.Call):
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "register_buffer"
                and is_literal(func.value, "self")
                and len(node.args) >= 2
                and isinstance(node.args[0].value, cst.SimpleString)
            ):
                name = node.args[0].value.evaluated_value
                if isinstance(name, str):
                    self.found.setdefault(name, []).append((self.method, node.args[1].value))
        return True

    def add(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute) and is_literal(target.value, "self"):
            self.found.setdefault(target.attr.value, []).append((self.method, value))
