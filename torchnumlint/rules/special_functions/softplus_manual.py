"""TNL108 softplus-manual: `log(1 + exp(x))` in any spelling (`torch.log(torch.exp(x) + 1)`,
`torch.log1p(torch.exp(x))`, `x.exp().add(1).log()`, `(1 + x.exp()).log()`, through local names),
whose exp overflows long before softplus does; `F.softplus(x)` never overflows.

Left alone: an exp that cannot overflow (`log(1 + exp(-x.abs()))`, the stable softplus, an exp of
a clamped or max-subtracted value, `min_ - max_` in a logaddexp: `elementary.overflowing_exp`);
TNL106 log-one-plus then reports the rounding of `1 + exp(...)` if it applies. Also left alone:
the form inside a function named for softplus (its own definition, or a test's reference for it,
as in torch's `_refs` and `common_modules`), which cannot call softplus. This rule owns `log(1 + exp(x))` over TNL106
(`ownership.OWNERS["log-one-plus-exp"]`): softplus removes the overflow and the rounding both.
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.elementary import Exp, one_plus, overflowing_exp
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.special_functions.placing import placed

_CHAIN = 4


class SoftplusManual(Rule):
    code = "TNL108"
    name = "softplus-manual"
    finds = "`torch.log(1 + torch.exp(x))`, `log1p(exp(x))`: exp overflows at 88.72 fp32, 11.09 fp16"
    fix_summary = "safe: `F.softplus(x)`"
    message = (
        "`{form}` overflows: exp(x) is Inf from x = 88.72 in float32 and bfloat16 (11.09 in "
        "float16), and then so is the result, with a NaN gradient; use `F.softplus(x)`{note}"
    )
    rationale = (
        "`exp(x)` overflows to Inf from x = 88.72 in float32 and bfloat16 (11.09 in float16), so "
        "`log(1 + exp(x))` and `log1p(exp(x))` are Inf there although the true value is about x. "
        "Measured on torch 2.13 (CPU): at x = 88.8 in float32 the forward is Inf and the gradient "
        "NaN; in float16 already at x = 11.1. `F.softplus(x)` (beta 1, threshold 20) returns x "
        "itself above 20 and `log1p(exp(x))` below, equal to the hand-written form wherever that "
        "is finite, with gradient `sigmoid(x)`, so the fix is safe."
    )
    safety = Safety.SAFE
    needles = ("exp",)
    # an exp and a log or log1p, each by name (not `expand`, `logger`)
    pattern = r"\A(?=[\s\S]*?\bexp\b)(?=[\s\S]*?\blog(?:1p)?\b)"
    examples = (
        Example(
            bad=("import torch\nimport torch.nn.functional as F\n\n\ndef positive_scale(rho):\n    return torch.log(1 + torch.exp(rho))\n"),
            lines=(6,),
            fixed=("import torch\nimport torch.nn.functional as F\n\n\ndef positive_scale(rho):\n    return F.softplus(rho)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def margin_loss(pos, neg):\n"
                "    return torch.log1p(torch.exp(neg - pos)).mean() + (-pos).exp().add(1).log().mean()\n"
            ),
            lines=(6, 6),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def margin_loss(pos, neg):\n"
                "    return F.softplus(neg - pos).mean() + F.softplus(-pos).mean()\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def f(x):\n"
        "    a = F.softplus(x) + torch.log1p(torch.exp(-x.abs())) + x.clamp(min=0)\n"
        "    b = torch.log(1 + torch.exp(x.clamp(max=20)))\n"
        "    return a + b + torch.log(torch.exp(x) - 1) + torch.log(2 + torch.exp(x))\n",
        "import math\nimport numpy as np\nimport torch\ndef f(x, t):\n    return math.log(1 + math.exp(t)) + np.log1p(np.exp(x))\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        function = self.ctx.enclosing(cst.FunctionDef)
        if function is not None and "softplus" in function.name.value.lower():
            return  # softplus's own definition, or a reference it is tested against
        found = self._site(node)
        if found is None:
            return
        core, chain, exp, form = found
        x = exp.call.input

        def build(fix) -> Optional[cst.BaseExpression]:
            return cst.Call(func=fix.ref("torch.nn.functional.softplus"), args=[cst.Arg(value=strip_parens(x))])

        fix, note = placed(self, node, core, chain, build, [x], "`softplus(x)`")
        self.report(node, fix, form=form, note=note)

    def _site(self, node: cst.Call) -> Optional[Tuple[cst.BaseExpression, Tuple[Binding, ...], Exp, str]]:
        """What the log reads, the names followed from it to the exp, the exp, and the form's words."""
        ctx = self.ctx
        log1p = match_call(ctx.imports, node, "log1p")
        if log1p is not None and log1p.fully_known:
            exp = overflowing_exp(ctx, log1p.input)
            if exp is None:
                return None
            return log1p.input, exp.chain, exp, "log1p(exp(x))"
        log = match_call(ctx.imports, node, "log")
        if log is None or not log.fully_known:
            return None
        # Names are followed whoever else reads them: the exp overflows where it is computed, and
        # the log of it is Inf all the same (the fix recomputes at the log when it can).
        chain = tuple(ctx.chain(log.input, _CHAIN, names_only=True))
        sum_ = one_plus(ctx, chain[-1].value if chain else log.input)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
        if sum_ is None or sum_.negative:
            return None
        exp = overflowing_exp(ctx, sum_.term)
        if exp is None:
            return None
        return log.input, chain + exp.chain, exp, "log(1 + exp(x))"
