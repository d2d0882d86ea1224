"""Whether a gradient flows at a value or at the node being visited: detached values
(`is_detached`, also what a project function or module `forward` running under `no_grad`
returns: `made_without_grad`), gradient-free code (`gradient_free`), the note a claim about a
gradient carries (`gradient_note`), the evidence that a value carries one (`gradient_shown`: the
module's own weights, a model's output, a caller in the project passing one), and reference
implementations kept beside a model.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, Optional, Set

import libcst as cst

from torchnumlint.rules.bindings import all_params
from torchnumlint.rules.callers import callers
from torchnumlint.rules.calls import is_literal, match_call
from torchnumlint.rules.evidence import is_data, may_carry_grad
from torchnumlint.rules.gradients import runs_with_grad, runs_without_grad
from torchnumlint.rules.number_kinds import is_python_number
from torchnumlint.rules.producers import _callee as producer_callee, _summaries as producers_summaries
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.ways import every_way, ways

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


# Tensors made from data: no gradient unless asked for with requires_grad=True.
_DATA = {
    "torch.tensor",
    "torch.Tensor",
    "torch.as_tensor",
    "torch.from_numpy",
    "torch.FloatTensor",
    "torch.LongTensor",
    "torch.zeros",
    "torch.ones",
    "torch.full",
    "torch.empty",
    "torch.eye",
    "torch.arange",
    "torch.linspace",
}


def is_detached(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """No gradient flows back through `expr`: it is `.detach()`ed, or was computed under
    `torch.no_grad()` in this function; for a call, so is its tensor input. A name is detached
    only when every assignment that reaches it is (a target detached on one branch still
    carries the other's gradient)."""
    return every_way(ctx, expr, "detached", lambda value: _detached(ctx, value), lambda binding: binding.no_grad)


def _detached(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    for _ in range(8):
        if not isinstance(expr, cst.BaseExpression):
            return False  # a parameter, a loop target: may carry a gradient
        if ways(ctx, expr) is not None:
            return is_detached(ctx, expr)
        if match_call(ctx.imports, expr, "detach") is not None:
            return True
        if isinstance(expr, cst.Call) and made_without_grad(ctx, expr) is not None:
            return True
        if isinstance(expr, cst.Call) and ctx.qualname(expr.func) in _DATA:
            return not any(a.keyword is not None and a.keyword.value == "requires_grad" for a in expr.args)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ("detach", "detach_", "data"):
                return True
            if ctx.imports.is_module_ref(expr.func.value):
                # function form: look at the tensor input (first argument)
                if not expr.args:
                    return False
                expr = expr.args[0].value
            else:
                expr = cst.ensure_type(expr.func, cst.Attribute).value  # method form: the receiver
            continue
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return True
        if isinstance(expr, cst.UnaryOperation):
            expr = expr.expression
            continue
        if isinstance(expr, cst.BinaryOperation):
            # `t / T`, `t.detach() * self.scale`: detached when one side is and the other is a
            # number or a plain name (a temperature), not a computation that may carry a gradient
            sides = [s for s in (expr.left, expr.right) if not is_python_number(ctx, s)]
            detached = [s for s in sides if is_detached(ctx, s)]
            return bool(detached) and all(s in detached or isinstance(strip_parens(s), (cst.Name, cst.Attribute)) for s in sides)
        return False
    return False


def made_without_grad(ctx: "FileContext", call: cst.Call) -> Optional[str]:
    """The callee, as written, where `call` runs a project function or method that runs without
    autograd (decorated `@torch.no_grad()` / `@torch.inference_mode()`, or its whole body under
    one): a label propagation's `forward`, a helper that post-processes. What it returns carries
    no gradient. None where it is not known to (`Summaries.callee_no_grad`)."""
    summaries, own = producers_summaries(ctx)
    if own is None:
        return None
    found = producer_callee(ctx, own, call.func)
    if found is None or not summaries.callee_no_grad(ctx.path, found[1], found[0]):
        return None
    return ctx.module.code_for_node(call.func)


def gradient_shown(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[str]:
    """Evidence that `expr`, at the node being visited, carries a gradient, for a claim about the
    gradient alone (a mended forward): "" where it is computed here from what may carry one (a
    module's own weights, a model's or a helper's output); a phrase naming the call where it
    comes from a parameter that a caller in the project passes a value with a gradient in code
    that differentiates; None otherwise. A parameter is no evidence by itself: post-processing is
    handed finished predictions (`CorrectAndSmooth.correct(y_soft, ...)` under `no_grad`)."""
    if is_detached(ctx, expr) or not may_carry_grad(ctx, expr):
        return None
    leaves = _Leaves(ctx)
    leaves.walk(expr, 0)
    if leaves.shown:
        return ""
    for param in leaves.params:
        why = _passed_with_grad(ctx, param)
        if why is not None:
            return why
    return None


class _Leaves:
    """What may carry a gradient into an expression: `shown` where something other than a
    parameter of the function may (see `gradient_shown`), else the parameters it reads."""

    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx
        self.shown = False
        self.params: List[cst.Param] = []
        self._seen: Set[int] = set()

    def walk(self, node: cst.BaseExpression, depth: int) -> None:
        ctx = self.ctx
        node = strip_parens(node)
        if self.shown or id(node) in self._seen or depth > 12 or not may_carry_grad(ctx, node):
            return
        self._seen.add(id(node))
        if isinstance(node, cst.Name):
            for way in ways(ctx, node) or ():
                value = way.value
                if way.binding is not None and way.binding.no_grad:
                    continue
                if isinstance(value, cst.Param):
                    self.params.append(value)
                elif isinstance(value, cst.Assign):
                    self.walk(value.value, depth + 1)  # unpacked
                elif (
                    isinstance(value, cst.BaseExpression)
                    and isinstance(strip_parens(value), (cst.Call, cst.Attribute))
                    and _builds_module(ctx, value)
                ):
                    self.shown = True  # `net = Net(...)`: called, it runs its parameters
                elif isinstance(value, cst.BaseExpression):
                    self.walk(value, depth + 1)
            return
        if isinstance(node, cst.Call):
            if made_without_grad(ctx, node) is not None:
                return
            func = node.func
            if isinstance(func, cst.Attribute) and is_literal(func.value, "self"):
                self.shown = True  # a submodule or a method: the module's own parameters
                return
            if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
                self.walk(func.value, depth + 1)  # a method of a value: what it is called on
            elif isinstance(func, cst.Name) and ways(ctx, func) is not None:
                self.walk(func, depth + 1)  # a local callable: a model built here, or one given
            elif (ctx.qualname(func) or "").rpartition(".")[2][:1].isupper():
                self.shown = True  # an instance made and called at once: its parameters
                return
            for arg in node.args:  # a function (torch's, a helper): from its arguments
                self.walk(arg.value, depth + 1)
            return
        if isinstance(node, cst.Attribute) and is_literal(node.value, "self"):
            self.shown = True  # a parameter of the module
            return
        for child in node.children:
            if isinstance(child, cst.BaseExpression):
                self.walk(child, depth + 1)
            elif isinstance(child, (cst.SubscriptElement, cst.Element, cst.Arg)):
                for part in child.children:
                    if isinstance(part, cst.BaseExpression):
                        self.walk(part, depth + 1)


def _builds_module(ctx: "FileContext", value: cst.BaseExpression) -> bool:
    """`Net(...)`, `models.Net(...).to(device)`: an instance of a class named in CapWords."""
    value = strip_parens(value)
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
        value = value.func.value  # `.to(device)`, `.cuda()`
    if not isinstance(value, cst.Call):
        return False
    name = value.func.attr.value if isinstance(value.func, cst.Attribute) else value.func.value if isinstance(value.func, cst.Name) else ""
    return name[:1].isupper()


def _passed_with_grad(ctx: "FileContext", param: cst.Param) -> Optional[str]:
    """A caller in the project that passes `param` (of the function being visited) a value that
    may carry a gradient, computed in code that differentiates (a training step, a loss, a
    `forward`): named. A caller's own parameter is not followed (depth 1), nor is data (a batch
    from a loader: `evidence.is_data`)."""
    function = ctx.enclosing(cst.FunctionDef)
    if function is None or not any(p is param for p in all_params(function.params)):
        return None
    for caller in callers(ctx):
        arg = caller.argument(function, param)
        if arg is None:
            continue
        other = caller.ctx
        with other.visiting(caller.path + (arg, arg.value)):
            if gradient_free(other) or not runs_with_grad(other):
                continue
            value = arg.value
            if is_data(other, value) or is_detached(other, value) or not may_carry_grad(other, value):
                continue  # the caller's own parameter (not followed), a batch, a detached value
        return f"`{param.name.value}` is given a value with a gradient by the call ({caller.where})"
    return None


# What a gradient claim made without code that shows a gradient says, in strict mode.
STRICT_GRADIENT = " (strict mode: no code here is shown to differentiate it)"


def gradient_note(ctx: "FileContext") -> Optional[str]:
    """For a claim about a gradient at the node being visited: "" where the code shows that a
    gradient flows (`runs_with_grad`, and the value is not only read as a number); in strict
    mode `STRICT_GRADIENT` where it merely is not gradient-free; None where the claim is not
    to be made."""
    if gradient_free(ctx):
        return None
    if runs_with_grad(ctx):
        return ""
    return STRICT_GRADIENT if ctx.strict else None


_TO_PYTHON = {"float", "int", "bool"}


_DETACHING = {"item", "tolist", "detach", "numpy"}


def gradient_free(ctx: "FileContext") -> bool:
    """No gradient flows back through the node being visited: it runs without autograd
    (`gradients.runs_without_grad`: no_grad, evaluation, generation, data code), or its value is
    only read as a Python number (`float(...)`, `.item()`, `.numpy()`) or detached."""
    if runs_without_grad(ctx):
        return True
    for node in reversed(ctx.stack[:-1]):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
        if isinstance(node, cst.Attribute) and node.attr.value in _DETACHING:
            return True
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value in _TO_PYTHON
            and ctx.qualname(node.func) is None
        ):
            return True
    return False


_REFERENCE = re.compile(r"^(ref|reference|np_ref|numpy_ref)(_|$)|_(ref|reference)$")


def in_reference_implementation(ctx: "FileContext") -> bool:
    """Whether the node being visited is in a test's reference implementation of an op: a lambda
    passed as `reference_fn=` / `ref=` (torch's module-test tables), or a function named for one
    (`reference_softmax`, `ref_logsumexp`, `softmax_ref`). A reference is written the naive way
    on purpose, to check the real op against, on inputs the test bounds: a by-hand rule has
    nothing to tell its author."""
    stack = ctx.stack
    for i in range(len(stack) - 1, 0, -1):
        node = stack[i]
        if isinstance(node, cst.Lambda):
            parent = stack[i - 1]
            if isinstance(parent, cst.Arg) and parent.keyword is not None and _REFERENCE.search(parent.keyword.value):
                return True
        elif isinstance(node, cst.FunctionDef) and _REFERENCE.search(node.name.value):
            return True
    return False
