"""TNL107 exp-minus-one: `exp(x) - 1` in any spelling (`torch.exp(x) - 1.0`, `x.exp() - 1`,
`-1 + torch.exp(x)`, `x.exp().sub(1)`, `torch.exp(x) - torch.ones_like(x)`, an exp through a
local name), which cancels near x = 0; `torch.expm1` does not.

Evidence before a report: the cancellation is an absolute error of about 6e-8 (float32), which
shows only where the form divides, is divided by a value of x, or feeds a log (`_evidence`);
elsewhere (an exponential integrator's first-order update, an ELU, a loss weight: diffusers'
DPM-Solver, kornia's differentiable clipping, speechbrain's loss weights on the corpus) the
error is lost in what the form is added to or scales, and the finding is made in strict mode only.

Left alone: `math.exp`/`np.exp` (not torch's exp), integer exponents (`exp(n) - 1` of a count
has no cancellation: n is 0 or at least 1), uniform noise, and the form inside a function named
for expm1 (its own definition, which cannot call it).
"""

from __future__ import annotations

from typing import List, Optional, Union

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.elementary import exp_of, is_integer_valued, is_random_draw, minus_one
from torchnumlint.rules.bindings import read_names
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.special_functions.placing import method, placed, torch_function
from torchnumlint.rules.uses import reads_of


class ExpMinusOne(Rule):
    code = "TNL107"
    name = "exp-minus-one"
    finds = "`torch.exp(x) - 1`: cancellation near 0 (`1 / (exp(x) - 1)` is Inf at 1e-8)"
    fix_summary = "safe: `torch.expm1(x)`"
    message = (
        "`exp(x) - 1` cancels near x = 0: it is exactly 0 for |x| below 6e-8 in float32 (4.9e-4 "
        "in float16, 3.9e-3 in bfloat16){why}; use `torch.expm1(x)`{note}"
    )
    rationale = (
        "`exp(x)` is rounded to the nearest float before 1 is subtracted, so near x = 0 only the "
        "digits of x that survive next to 1 are left. Measured on torch 2.13 (CPU): "
        "`torch.exp(x) - 1` is exactly 0 at x = 1e-8 in float32 (true value 1e-8), so "
        "`1 / (torch.exp(x) - 1)` is Inf there; it is off by 1.2e-4 relative at x = 1e-4, and 0 "
        "at x = 1e-4 in float16 and at x = 1e-3 in bfloat16. Differences of it by x (the phi "
        "functions of exponential integrators, `(exp(h) - 1) / h - 1`) multiply the error. "
        "`torch.expm1(x)` computes the same function without the cancellation, exact to the last "
        "digit everywhere, so the fix is safe."
    )
    safety = Safety.SAFE
    # off by default: an independent reading of its 25 corpus findings (DPM-Solver coefficients,
    # whose step h stays above ~3e-3) found none true (docs/precision.md); select it by code
    default = False
    needles = ("exp",)
    pattern = r"\b1\b|1\.|ones_like|sub\("
    examples = (
        Example(
            bad=("import torch\n\n\ndef phi_1(h):\n    step = torch.exp(h) - 1\n    return step / h\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef phi_1(h):\n    step = torch.expm1(h)\n    return step / h\n"),
        ),
        Example(
            bad=("import torch\n\n\ndef inverse_softplus(y):\n    return (y.exp() - 1).log()\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef inverse_softplus(y):\n    return (y.expm1()).log()\n"),
        ),
    )
    good = (
        "import math\n"
        "import numpy as np\n"
        "import torch\n"
        "def f(x, t, n):\n"
        "    a = math.exp(t) - 1 + np.exp(t) - 1\n"
        "    b = torch.exp(torch.arange(n)) - 1\n"
        "    return torch.expm1(x) + torch.exp(x) - 2 + torch.exp(x - 1) + a + b\n",
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        ctx = self.ctx
        value = minus_one(ctx, node)
        if value is None:
            return
        exp = exp_of(ctx, value)
        if exp is None:
            return
        x = exp.call.input
        if is_integer_valued(ctx, x) or is_random_draw(ctx, x):
            return
        function = ctx.enclosing(cst.FunctionDef)
        if function is not None and "expm1" in function.name.value.lower():
            return  # expm1's own definition

        def build(fix) -> Optional[cst.BaseExpression]:
            if exp.call.form == "method":
                return method(x, "expm1")
            return torch_function(fix, exp.call.call, "expm1", x)

        why = self._evidence(node, x)
        if why is None:
            if not ctx.strict:
                return
            why = " (strict mode: not shown to divide or feed a log here)"
        fix, note = placed(self, node, value, exp.chain, build, [x], "`exp(x) - 1`")
        self.report(node, fix, why=why, note=note)

    def _evidence(self, node: cst.BaseExpression, x: cst.BaseExpression) -> Optional[str]:
        """Where the cancellation shows, as the message's words: the form (or a sum or product
        of it, or a local name it is assigned to) divides, is divided by a value of x
        (`(exp(h) - 1) / h`: the phi functions of exponential integrators), or feeds a log
        (`log(exp(y) - 1)`, the inverse softplus). Elsewhere its absolute error, 6e-8 in float32,
        is lost in what it is added to or scales (an update `sample - alpha * (exp(-h) - 1) * eps`,
        an ELU, a loss weight)."""
        found = _shows(self.ctx, list(self.ctx.stack), x)
        if isinstance(found, cst.Name):  # assigned to a local name: where its value is read
            for read in reads_of(self.ctx, found) or ():
                why = _shows(self.ctx, list(read), x)
                if isinstance(why, str):
                    return why
            return None
        return found


def _shows(ctx, path: List[cst.CSTNode], x: cst.BaseExpression) -> Union[str, cst.Name, None]:
    """Walk up from `path[-1]` through parentheses, sums, products and negation: the words of the
    evidence found, the Name a plain assignment binds the value to, or None."""
    child: cst.CSTNode = path[-1]
    for parent in reversed(path[:-1]):
        if isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, cst.Divide):
                if parent.right is child:
                    return ", and it divides here: Inf there"
                if read_names(parent.right) & read_names(x):
                    return ", and it is divided by a value of x here: 0 instead of the limit"
                return None
            if not isinstance(parent.operator, (cst.Add, cst.Subtract, cst.Multiply)):
                return None
        elif isinstance(parent, cst.Call):
            log = match_call(ctx.imports, parent, "log")
            if log is not None and log.input is child:
                return ", and its log is -inf there"
            func = parent.func
            if ctx.qualname(func) == "torch.reciprocal" or (isinstance(func, cst.Attribute) and func.attr.value == "reciprocal"):
                return ", and it divides here: Inf there"
            return None
        elif isinstance(parent, cst.Attribute):
            pass  # the method form's receiver: the call above decides (a method form's log reads it)
        elif isinstance(parent, cst.Assign):
            targets = parent.targets
            if len(targets) == 1 and isinstance(targets[0].target, cst.Name) and parent.value is child:
                return targets[0].target
            return None
        elif not isinstance(parent, (cst.UnaryOperation, cst.Arg)):
            return None
        if not isinstance(parent, (cst.Attribute, cst.Arg)):  # a call asks about its argument's value
            child = parent
    return None
