"""Whether a gradient flows at a value or at the node being visited: detached values
(`is_detached`), gradient-free code (`gradient_free`), the note a claim about a gradient carries
(`gradient_note`), and reference implementations kept beside a model.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.calls import match_call
from torchnumlint.rules.gradients import runs_with_grad, runs_without_grad
from torchnumlint.rules.number_kinds import is_python_number
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
