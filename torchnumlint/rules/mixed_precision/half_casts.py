"""What TNL304 reads in one scope: modules cast to float16, the optimizers and weight averages
over them, and what keeps a float32 master copy beside them.

Kept apart from the rule because the facts are several and each is a small question of its own:
- a cast of a name to float16 (`.half()`, `.to(torch.float16)`, `.to(dtype=torch.half)`, in place or
  assigned, through call chains) or to another dtype (a cast back undoes it);
- a copy of a model, averaged when a loop over its weights updates them (`copy.deepcopy(model)`, `AveragedModel(model)`);
- an optimizer over a name's `.parameters()` and the name it is bound to;
- a step of an optimizer (`opt.step()`, `scaler.step(opt)`) and whether a loop repeats it;
- a wrapper that keeps float32 master weights for a float16 model (fairseq's `FP16Optimizer` and
  `MemoryEfficientFP16Optimizer`, apex's `FP16_Optimizer` and `amp.initialize`,
  `deepspeed.initialize`): the names it is given are trained in float32, whatever their dtype;
- a decay close to 1 written where a weight average is kept (its threshold is measured in the
  rule's docstring).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Set, Tuple

import libcst as cst

from torchnumlint.rules import syntax
from torchnumlint.rules.imports import dotted
from torchnumlint.walk import Visitor

_FLOAT16 = frozenset({"torch.float16", "torch.half"})
_OTHER_CASTS = frozenset({"float", "bfloat16", "double"})
# wrappers that hold float32 master weights and step them (read by their last name: fairseq's are
# reached as `optim.FP16Optimizer.build_optimizer`, apex's through `apex.fp16_utils`)
_MASTER_WRAPPERS = frozenset({"FP16Optimizer", "MemoryEfficientFP16Optimizer", "FP16_Optimizer"})
_MASTER_CALLS = frozenset({"apex.amp.initialize", "deepspeed.initialize"})
_COPIES = ("deepcopy", "AveragedModel")
# where a decay is written: parameters, names and keywords that say so, and the ops of an update
_DECAY_WORDS = ("decay", "ema", "momentum", "average", "avg")
_UPDATE_OPS = frozenset({"mul_", "lerp_", "lerp", "_foreach_mul_", "_foreach_lerp_", "get_ema_multi_avg_fn"})
_WEIGHT_READS = frozenset({"parameters", "named_parameters", "state_dict", "buffers"})
# measured (the rule's docstring): a float16 average with decay 0.999 barely moves, with 0.9999
# not at all
DECAY_LIMIT = 0.999


class Event(NamedTuple):
    kind: str  # "cast", "uncast", "copy", "optimizer", "master", "step"
    name: str  # the model, the copy, the optimizer stepped, or a name given to a master wrapper
    node: cst.CSTNode
    text: str  # the cast or the optimizer as written; for an optimizer, the name it is bound to
    in_loop: bool = False


class Events(Visitor):
    """The events of one scope in source order (not its nested functions or classes)."""

    def __init__(self, ctx, scope: cst.CSTNode) -> None:
        super().__init__()
        self.ctx, self.scope = ctx, scope
        self.found: List[Event] = []
        self._loops = 0
        self._bound: Set[int] = set()  # optimizer calls recorded with the name they are bound to
        self.walk(scope)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is not self.scope and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, (cst.For, cst.While)):
            self._loops += 1
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = name_of(node.targets[0].target)
            if target is not None:
                self._copy_of(node.value, target, node)
                self._cast_of(node.value, target, node)
                if isinstance(node.value, cst.Call):
                    self._bound.add(id(node.value))
                    self._optimizer(node.value, target)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            receiver = _receiver(node.value)
            if receiver is not None:
                self._cast_of(node.value, receiver, node)
        if isinstance(node, cst.Call):
            if id(node) not in self._bound:
                self._optimizer(node, "")
            self._master(node)
            self._step(node)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.For, cst.While)):
            self._loops -= 1

    def _cast_of(self, value: cst.BaseExpression, name: str, at: cst.CSTNode) -> None:
        dtype = self._last_cast(value)
        if dtype is not None:
            text = self.ctx.module.code_for_node(value)
            self.found.append(Event("cast" if dtype == "float16" else "uncast", name, at, text))

    def _last_cast(self, value: cst.BaseExpression) -> Optional[str]:
        """The dtype the outermost cast of a call chain gives: `.half()` float16, `.float()`,
        `.bfloat16()`, `.double()` another; `.to(...)` by its dtype argument; None for no cast."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            if method == "half":
                return "float16"
            if method in _OTHER_CASTS:
                return "other"
            if method == "to":
                dtypes = [self.ctx.qualname(arg.value) for arg in value.args if arg.keyword is None or arg.keyword.value == "dtype"]
                if any(d in _FLOAT16 for d in dtypes):
                    return "float16"
                if any(d is not None and d.startswith("torch.") and d not in _FLOAT16 for d in dtypes):
                    return "other"
            value = value.func.value
        return None

    def _copy_of(self, value: cst.BaseExpression, name: str, at: cst.CSTNode) -> None:
        """`name = deepcopy(model)...` or `AveragedModel(model)...`, through a call chain."""
        while isinstance(value, cst.Call):
            if _last_name(value.func) in _COPIES:
                self.found.append(Event("copy", name, at, self.ctx.module.code_for_node(value)))
                return
            if not isinstance(value.func, cst.Attribute):
                return
            value = value.func.value

    def _optimizer(self, call: cst.Call, bound_to: str) -> None:
        qual = self.ctx.qualname(call.func)
        if qual is None or not qual.startswith("torch.optim.") or not call.args:
            return
        first = call.args[0].value
        if isinstance(first, cst.Call) and isinstance(first.func, cst.Name) and first.func.value == "list" and first.args:
            first = first.args[0].value
        if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) and first.func.attr.value == "parameters":
            owner = name_of(first.func.value)
            if owner is not None:
                self.found.append(Event("optimizer", owner, call, bound_to))

    def _master(self, call: cst.Call) -> None:
        if _last_name(call.func) in _MASTER_WRAPPERS or self.ctx.qualname(call.func) in _MASTER_CALLS:
            for arg in call.args:
                for given in _names_in(arg.value):
                    self.found.append(Event("master", given, call, ""))

    def _step(self, call: cst.Call) -> None:
        """`opt.step()` (the optimizer is the receiver) or `scaler.step(opt)` (the argument)."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step"):
            return
        stepped = name_of(call.args[0].value) if call.args else name_of(func.value)
        if stepped is not None:
            self.found.append(Event("step", stepped, call, "", self._loops > 0))


def steps_in_class(cls: cst.ClassDef, name: str) -> List[cst.Call]:
    """The steps of `self.<...>` optimizer `name` anywhere in the class's methods: a method that
    steps it is the training step, which the training loop calls once per batch."""
    found: List[cst.Call] = []

    class _Steps(Visitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "step":
                stepped = name_of(node.args[0].value) if node.args else name_of(func.value)
                if stepped == name:
                    found.append(node)

    _Steps().walk(cls)
    return found


def updates_weights(scope: cst.CSTNode, name: str) -> bool:
    """Whether `scope` updates `name`'s weights as an average is updated: a loop over its
    `.parameters()` / `.state_dict()` (`for e, p in zip(ema.parameters(), model.parameters())`),
    a `torch._foreach_*` op given them, or `name.update_parameters(model)`. A read that is not
    an update (`torch.save(copy.state_dict())`) is none."""
    hit: List[cst.CSTNode] = []

    def weights_of(node: cst.CSTNode) -> bool:
        found: List[cst.Call] = []

        class _Reads(Visitor):
            def visit_Call(self, call: cst.Call) -> None:
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in _WEIGHT_READS and name_of(func.value) == name:
                    found.append(call)

        _Reads().walk(node)
        return bool(found)

    class _Updates(Visitor):
        def visit_For(self, node: cst.For) -> None:
            if weights_of(node.iter):
                hit.append(node)

        def visit_Call(self, node: cst.Call) -> None:
            last = _last_name(node.func) or ""
            if last == "update_parameters" and isinstance(node.func, cst.Attribute) and name_of(node.func.value) == name:
                hit.append(node)
            elif last.startswith("_foreach_") and any(weights_of(arg.value) for arg in node.args):
                hit.append(node)

    _Updates().walk(scope)
    return bool(hit)


def decay_near_one(scope: cst.CSTNode) -> Optional[Tuple[str, cst.CSTNode]]:
    """A literal decay in [DECAY_LIMIT, 1) written where `scope` keeps an average: the default of a
    parameter, a name or a keyword that says decay/ema/momentum/average, or an argument of an
    update op (`mul_`, `lerp_`, `get_ema_multi_avg_fn`). Adam's `betas=(0.9, 0.999)` is none."""
    found: List[Tuple[str, cst.CSTNode]] = []

    def take(value: Optional[cst.BaseExpression], named: str) -> None:
        if value is None or not any(word in named.lower() for word in _DECAY_WORDS):
            return
        number = syntax.number_value(value)
        if number is not None and DECAY_LIMIT <= number < 1:
            found.append((_code(value), value))

    class _Decays(Visitor):
        def visit_Param(self, node: cst.Param) -> None:
            take(node.default, node.name.value)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                take(node.value, _code(target.target))

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None:
                take(node.value, node.keyword.value)

        def visit_Call(self, node: cst.Call) -> None:
            if _last_name(node.func) in _UPDATE_OPS:
                for arg in node.args:
                    take(arg.value, "decay")

    _Decays().walk(scope)
    return found[0] if found else None


def name_of(expr: cst.BaseExpression) -> Optional[str]:
    """`model` or `self.model` as written; None for anything else."""
    try:
        text = dotted(expr)
    except TypeError:
        return None
    return text if text.count(".") <= 1 else None


def _receiver(call: cst.Call) -> Optional[str]:
    """The name a bare cast statement changes in place (`model.half()`)."""
    func = call.func
    while isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        func = func.value.func
    return name_of(func.value) if isinstance(func, cst.Attribute) else None


def _last_name(func: cst.BaseExpression) -> Optional[str]:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _names_in(expr: cst.BaseExpression) -> Set[str]:
    """The names an argument gives: `opt`, `self.model`, `model.parameters()`'s `model`, the
    elements of a list or tuple."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return {n for el in expr.elements for n in _names_in(el.value)}
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return _names_in(expr.func.value)
    name = name_of(expr)
    return {name} if name is not None else set()


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)
