"""How large a value can get, by evidence: where it comes from, a learned map or the data.

Some hazards need a magnitude, not an edge value: a softmax's probability is exactly 0 only past a
spread of ~104 in float32 (TNL103), a hand-written sigmoid's exp overflows only past |x| of
88.7 (TNL111), a rotation's `(trace(R) - 1) / 2` passes 1 only by the rounding of a computed
matrix (TNL208). Training code reaches such magnitudes in the outputs of learned maps (a
submodule's output, a linear layer, a matrix product: logits whose spread training drives
apart), not in data it reads (a BLEU score of the batch, an image in [0, 1]) nor in a bounded
value scaled by a constant.

`magnitude(ctx, expr)` follows `expr` to the values it is computed from (through names, every
way they may come; arithmetic; `torch.*` functions, value-keeping and reducing methods) and sorts
each leaf:

- learned: a matrix product (`@`, `matmul`, `bmm`, `einsum`), `F.linear` / a convolution, the
  call of a module (`self.head(h)`, a torch layer, a project module: `amp.submodule_output`;
  `self.<attr>(...)` in an `nn.Module` that defines no such method), an element of the tuple
  a module instance returns (`logits, z, gate = student(x)`: `student` bound to a project
  module or a learned torch layer, through `.to(device)` and tuple assignments), a model
  output's `.logits`; the reason names it;
- data: a field of a batch handed to the code (`sample["target"]`, `batch.scores`: a
  string-keyed item or attribute of a value `evidence.is_data` calls data);
- scale: numbers, strings, `torch.finfo(...).eps`, `self.<attr>` read as a value (a
  temperature, a gain);
- anything else: unknown.

A parameter of the enclosing function is judged by what its callers in the project pass
(`callers.callers`, one level): one caller that passes a learned value is evidence and is
named; it is data when every caller seen passes data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.amp import submodule_output
from torchnumlint.rules.bindings import all_params
from torchnumlint.rules.callers import callers
from torchnumlint.rules.evidence import is_data
from torchnumlint.rules.fp16_code import product_of
from torchnumlint.rules.gradients import is_module_class
from torchnumlint.rules.module_outputs import layer_output
from torchnumlint.rules.number_kinds import is_python_number
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.value_steps import selection_of_element
from torchnumlint.rules.ways import ways

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# Learned maps written as functions: their outputs are logits, not data.
_LEARNED_FUNCTIONS = frozenset(
    {
        "torch.nn.functional.linear",
        "torch.nn.functional.bilinear",
        "torch.nn.functional.conv1d",
        "torch.nn.functional.conv2d",
        "torch.nn.functional.conv3d",
        "torch.addmm",
        "torch.baddbmm",
        "torch.mm",
    }
)
# Methods whose result is computed from their receiver's values alone (a step of shape, a cast,
# a reduction): data stays data, logits stay logits.
_KEEPING_METHODS = (
    vocabulary.SAME_VALUES
    | vocabulary.SELECTIONS
    | vocabulary.REPEATS
    | frozenset({"min", "max", "amin", "amax", "mean", "sum", "std", "var", "abs", "neg", "squeeze", "unsqueeze"})
)
_DTYPE_FACTS = frozenset({"torch.finfo", "torch.iinfo"})
_DEPTH = 10
_MAX_LEAVES = 24


@dataclass(frozen=True)
class Magnitude:
    """What a value is computed from: `learned` names a learned map it comes from (None: none
    seen); `data` is True when every leaf is data of the batch or a scale, one of them data."""

    learned: Optional[str]
    data: bool


class _Walk:
    """The leaves of one value, sorted; a parameter's callers are asked once (`follow`)."""

    def __init__(self, ctx: "FileContext", follow: bool) -> None:
        self.ctx = ctx
        self.follow = follow
        self.learned: Optional[str] = None
        self.kinds: List[str] = []
        self.asked: Dict[int, Tuple[str, Optional[str]]] = {}  # a parameter's answer, asked once

    def leaf(self, kind: str, why: Optional[str] = None) -> None:
        self.kinds.append(kind)
        if kind == "learned" and self.learned is None:
            self.learned = why

    def visit(self, expr: cst.CSTNode, depth: int) -> None:
        ctx = self.ctx
        if len(self.kinds) > _MAX_LEAVES or depth > _DEPTH:
            self.leaf("unknown")
            return
        node = strip_parens(expr) if isinstance(expr, cst.BaseExpression) else expr
        if isinstance(node, cst.Param):
            self.param(node, depth)
        elif not isinstance(node, cst.BaseExpression):
            self.leaf("unknown")  # a loop target, an unpacking, an in-place change
        elif isinstance(node, cst.SimpleString) or is_python_number(ctx, node):
            self.leaf("scale")
        elif product_of(ctx, node) is not None:
            self.leaf("learned", "a matrix product")
        elif isinstance(node, (cst.BinaryOperation, cst.UnaryOperation, cst.IfExp)):
            parts = {
                cst.BinaryOperation: lambda n: (n.left, n.right),
                cst.UnaryOperation: lambda n: (n.expression,),
                cst.IfExp: lambda n: (n.body, n.orelse),
            }[type(node)](node)
            for part in parts:
                self.visit(part, depth + 1)
        elif isinstance(node, cst.Subscript):
            self.subscript(node, depth)
        elif isinstance(node, cst.Attribute):
            self.attribute(node, depth)
        elif isinstance(node, cst.Name):
            self.name(node, depth)
        elif isinstance(node, cst.Call):
            self.call(node, depth)
        else:
            self.leaf("unknown")

    def subscript(self, node: cst.Subscript, depth: int) -> None:
        keyed = any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.SimpleString) for e in node.slice)
        if keyed:
            self.leaf("data" if is_data(self.ctx, node) else "unknown")
        else:
            self.visit(node.value, depth + 1)

    def attribute(self, node: cst.Attribute, depth: int) -> None:
        attr = node.attr.value
        if attr == "logits":
            self.leaf("learned", "a model output's `.logits`")
        elif isinstance(node.value, cst.Name) and node.value.value == "self":
            self.leaf("scale")  # a temperature, a gain, a buffer: not where a spread comes from
        elif isinstance(node.value, cst.Call) and self.ctx.qualname(node.value.func) in _DTYPE_FACTS:
            self.leaf("scale")  # `torch.finfo(dtype).eps`
        elif attr in ("values",) or attr in vocabulary.SHAPE_ATTRIBUTES:
            self.visit(node.value, depth + 1)  # `torch.min(x, 1).values`, `x.T`
        else:
            self.leaf("data" if is_data(self.ctx, node) else "unknown")

    def name(self, node: cst.Name, depth: int) -> None:
        found = ways(self.ctx, node)
        if found is None:
            self.leaf("unknown")
            return
        for way in found:
            unpacked = way.binding.unpacked if way.binding is not None else None
            if unpacked is None:
                self.visit(way.value, depth + 1)
                continue
            packed = strip_parens(unpacked[0])
            element = selection_of_element(self.ctx.imports, packed, unpacked[1])
            if element is not None:
                self.visit(element, depth + 1)
            elif isinstance(packed, cst.Call) and _module_instance(self.ctx, packed.func, 0):
                self.leaf("learned", f"element {unpacked[1]} of the output of `{self.ctx.module.code_for_node(packed.func)}`")
            else:
                self.leaf("unknown")

    def call(self, node: cst.Call, depth: int) -> None:
        ctx = self.ctx
        qual = ctx.qualname(node.func)
        if qual in _LEARNED_FUNCTIONS:
            self.leaf("learned", f"`{qual.rsplit('.', 1)[-1]}`")
            return
        if submodule_output(ctx, node) is not None or _submodule_call(ctx, node):
            self.leaf("learned", f"the output of `{ctx.module.code_for_node(node.func)}`")
            return
        if qual is not None:
            tensors = [a.value for a in node.args if a.keyword is None and not a.star]
            if not qual.startswith("torch.") or not tensors:
                self.leaf("unknown")
            for value in tensors:
                self.visit(value, depth + 1)
            return
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in _KEEPING_METHODS
            and not (isinstance(func.value, cst.Name) and func.value.value == "self")
            and not ctx.imports.is_module_ref(func.value)
        ):
            self.visit(func.value, depth + 1)
            return
        self.leaf("unknown")

    def param(self, param: cst.Param, depth: int) -> None:
        """A parameter of the enclosing function: what its callers pass (one level)."""
        if id(param) not in self.asked:
            self.asked[id(param)] = self.from_callers(param, depth)
        self.leaf(*self.asked[id(param)])

    def from_callers(self, param: cst.Param, depth: int) -> Tuple[str, Optional[str]]:
        ctx = self.ctx
        function = ctx.enclosing(cst.FunctionDef)
        if not self.follow or function is None or not any(p is param for p in all_params(function.params)):
            return "unknown", None
        kinds: List[str] = []
        for caller in callers(ctx):
            arg = caller.argument(function, param)
            if arg is None:
                continue
            with caller.ctx.visiting(caller.path + (arg, arg.value)):
                there = _Walk(caller.ctx, follow=False)
                there.visit(arg.value, depth + 1)
            if there.learned is not None:
                return "learned", f"{there.learned}, passed as `{param.name.value}` by the call at {caller.where}"
            kinds.extend(there.kinds)
        if not kinds or any(k not in ("data", "scale") for k in kinds):
            return "unknown", None
        return ("data" if "data" in kinds else "scale"), None

    @property
    def data(self) -> bool:
        return "data" in self.kinds and all(k in ("data", "scale") for k in self.kinds)


def _submodule_call(ctx: "FileContext", call: cst.Call) -> bool:
    """`self.<attr>(...)` in an `nn.Module` whose class defines no method `<attr>`: a submodule
    set outside `__init__` (by a builder, `add_module`, a base class's constructor)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return False
    cls = ctx.enclosing(cst.ClassDef)
    if cls is None or not is_module_class(cls):
        return False
    defined = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    return func.attr.value not in defined


def _module_instance(ctx: "FileContext", expr: cst.BaseExpression, depth: int) -> bool:
    """Whether `expr` holds an instance of a project `nn.Module` or of a learned torch layer
    (one that runs in float16 under autocast: linear, conv, recurrent), read through names,
    tuple assignments and the module methods that return the module (`.to(device)`, `.eval()`)."""
    expr = strip_parens(expr)
    if depth > _DEPTH:
        return False
    if isinstance(expr, cst.Name):
        found = ways(ctx, expr) or []
        for way in found:
            unpacked = way.binding.unpacked if way.binding is not None else None
            value = selection_of_element(ctx.imports, strip_parens(unpacked[0]), unpacked[1]) if unpacked is not None else way.value
            if isinstance(value, cst.BaseExpression) and _module_instance(ctx, value, depth + 1):
                return True
        return False
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in vocabulary.MODULE_METHODS:
        return _module_instance(ctx, func.value, depth + 1)
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return False
    qual = ctx.qualname(func)
    if layer_output(qual) == "fp16":
        return True
    if ctx.index is None:
        return False
    info = ctx.index.lookup(func.value if isinstance(func, cst.Name) else func.attr.value, qual, ctx.path)
    return info is not None and info.kind == "module"


def magnitude(ctx: "FileContext", expr: cst.BaseExpression) -> Magnitude:
    """Where `expr`'s values come from: a learned map (named) or only the data of the batch."""
    walk = _Walk(ctx, follow=True)
    walk.visit(expr, 0)
    return Magnitude(walk.learned, walk.data)
