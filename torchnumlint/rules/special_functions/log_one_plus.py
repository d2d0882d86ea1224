"""TNL106 log-one-plus: `log(1 + x)` and `log(1 - x)` in any spelling (`torch.log(x + 1)`,
`(1 + x).log()`, `torch.ones_like(x) + x`, `x.add(1).log()`, through a local name), which round
`1 + x` before the log and lose x when it is small; `torch.log1p` does not.

Left to others: `log(1 + exp(x))` with an exp that can overflow (TNL108 softplus-manual owns it:
softplus also removes the overflow) and `log(1 - sigmoid(x))` (TNL104 log-of-sigmoid owns it).
Left alone (read on the corpus, see the tests): `math.log`/`np.log` (not torch's log), a Python
or numpy `x`; counts (`log(1 + n)` of an integer-valued `n`: `1 + n` is exact, nothing to lose:
`elementary.is_integer_valued`); an `x` kept away from 0 (`0.99 * m + 0.005`: `guarding.is_guarded`);
noise (`log(1 - u)` of a uniform draw `u`: `elementary.is_random_draw`); an `x` cast to float at the
log (`log(target.float() + 1)`: an integer tensor converted there); `log(1 - p)` beside
`log(p)` in one statement (a binary cross-entropy, an entropy, a logit: the pair's value is
dominated by `log(p)` where `1 - p` rounds); and a name assigned
`1 - x` that is read elsewhere too (`beta_t = 1 - alpha_t / alpha_prev` in a scheduler): a
quantity of its own, whose rounding happens where it is made (where `x` is near 1, as there,
`1 - x` is exact and `log1p` gains nothing). A compressed magnitude (`log(1 + |x|)`, of relu or
`clamp(min=0)` outputs: features, not probabilities) loses digits only below the rounding of the
values around it: reported only under `--strict`.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.elementary import is_integer_valued, is_random_draw, one_plus, overflowing_exp
from torchnumlint.rules.evidence import is_not_torch
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.made_by import sigmoid_call
from torchnumlint.rules.syntax import same_code, strip_parens
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.rewrite import negated
from torchnumlint.rules.special_functions.placing import method, placed, read_only_at, torch_function
from torchnumlint.walk import Visitor

_CHAIN = 4


class LogOnePlus(Rule):
    code = "TNL106"
    name = "log-one-plus"
    finds = (
        "`torch.log(1 + x)`, `log(1 - x)` in any spelling (`x + 1`, `ones_like(x) + x`, method "
        "forms): `1 + x` rounds away x below 6e-8 in fp32"
    )
    fix_summary = "safe: `torch.log1p(x)` / `log1p(-x)`"
    message = (
        "`log({form})` rounds `{form}` before the log: for |x| below 6e-8 in float32 (4.9e-4 in "
        "float16, 3.9e-3 in bfloat16) it is exactly 0, and far less accurate than it should be near "
        "x = 0; use `{use}`{note}"
    )
    rationale = (
        "`1 + x` is rounded to the nearest float before the log sees it, so `log(1 + x)` keeps "
        "only the digits of x that survive next to 1. Measured on torch 2.13 (CPU): "
        "`torch.log(1 + x)` is exactly 0 for x = 1e-8 in float32 (true value 1e-8), off by "
        "1.2e-4 relative at x = 1e-4; in float16 it is 0 at x = 1e-4 and in bfloat16 at "
        "x = 1e-3. A quotient by it is then Inf. `torch.log1p(x)` computes the same function "
        "without the rounding, exact to the last digit everywhere, so the fix is safe. "
        "`log(1 - x)` is `torch.log1p(-x)`. A count (`log(1 + n)` of an integer `n`) loses "
        "nothing and is left alone."
    )
    safety = Safety.SAFE
    needles = ("log",)
    # a log by name (not `logger`, `logits`) and a one
    pattern = r"\A(?=[\s\S]*?\blog\b)(?=[\s\S]*?(?:\b1\b|1\.|ones_like))"
    ast_calls = ("log",)
    examples = (
        Example(
            bad=("import torch\n\n\ndef log_growth(rate):\n    return torch.log(1 + rate)\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef log_growth(rate):\n    return torch.log1p(rate)\n"),
        ),
        Example(
            bad=(
                "import torch\n\n\ndef survival(hazard, dropout):\n    keep = (1 - dropout).log()\n    return (hazard + 1).log() + keep\n"
            ),
            lines=(5, 6),
            fixed=(
                "import torch\n\n\ndef survival(hazard, dropout):\n    keep = torch.log1p(-dropout)\n    return hazard.log1p() + keep\n"
            ),
        ),
    )
    good = (
        "import math\n"
        "import numpy as np\n"
        "import torch\n"
        "def f(x, p, counts):\n"
        "    a = math.log(1 + p) + np.log(1 + x)\n"
        "    b = torch.log(1 + counts.sum(-1).long())\n"
        "    return torch.log1p(x) + torch.log(1 + x + 1e-6) + a + b\n",
        "import torch\n"
        "def f(x, lengths):\n"
        "    n = torch.arange(1, x.shape[-1] + 1)\n"
        "    return torch.log(2 + x) + torch.log(1 + n.float()) + torch.log(lengths.float() + 1)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        match = match_call(ctx.imports, node, "log")
        if match is None or not match.fully_known:
            return
        chain = ctx.chain(match.input, _CHAIN, names_only=True)
        if chain and not read_only_at(ctx, chain[0], node):
            return  # `beta_t = 1 - r` read elsewhere too: a quantity of its own, rounded where it is made
        found = one_plus(ctx, chain[-1].value if chain else match.input)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
        if found is None:
            return
        term = found.term
        if is_not_torch(ctx, term) or is_integer_valued(ctx, term) or _cast_to_float(term):
            return
        if is_guarded(ctx, term) or is_random_draw(ctx, term):
            return  # kept away from 0 (`0.99 * m + 0.005`); noise (`1 - u` of a uniform `u`)
        if not found.negative and overflowing_exp(ctx, term) and owned_elsewhere(ctx, self.code, "log-one-plus-exp"):
            return
        if found.negative and sigmoid_call(ctx, term) and owned_elsewhere(ctx, self.code, "log-one-minus-sigmoid"):
            return
        if found.negative and self._paired(term):
            return
        if not found.negative and not ctx.strict and any(_magnitude(ctx, value) for value in _values(ctx, term)):
            return  # `log(1 + |x|)`: compressing a magnitude, whose absolute error (< 6e-8) is below its neighbours'

        def build(fix) -> Optional[cst.BaseExpression]:
            if match.form == "method" and not found.negative:
                return method(term, "log1p")
            return torch_function(fix, node, "log1p", negated(term) if found.negative else term)

        fix, note = placed(self, node, match.input, chain, build, [term], "`log(1 + x)`")
        form = "1 - x" if found.negative else "1 + x"
        use = "torch.log1p(-x)" if found.negative else "torch.log1p(x)"
        self.report(node, fix, form=form, use=use, note=note)

    def _paired(self, p: cst.BaseExpression) -> bool:
        """Whether the statement also takes `log(p)`: a binary cross-entropy, entropy or logit
        (`t * log(p) + (1 - t) * log(1 - p)`, `log(u) - log(1 - u)`). Near p = 0 the pair is
        dominated by `log(p)`, whose size dwarfs the 6e-8 that `1 - p` loses; near p = 1,
        `1 - p` is exact. log1p changes nothing the pair's value shows."""
        ctx = self.ctx
        statement = ctx.enclosing(cst.SimpleStatementLine, cst.Lambda)
        if statement is None:
            return False
        logs = [n for n in _calls(statement) if (m := match_call(ctx.imports, n, "log")) is not None and same_code(ctx, m.input, p)]
        return bool(logs)


def _values(ctx, term: cst.BaseExpression) -> List[cst.BaseExpression]:
    """`term` and the value its name holds where it is read (`x = x.abs(); x = x + 1`)."""
    binding = ctx.binding(term) if isinstance(term, cst.Name) else None
    return [term] + ([binding.value] if binding is not None and binding.value is not None else [])


def _magnitude(ctx, term: cst.BaseExpression) -> bool:
    """`|x|`, `relu(x)`, `x.clamp(min=0)`: a log-compressed magnitude (`sign(x) * log(1 + |x|)`,
    `log(1 + relu(h))` of features), whose lost digits are below the rounding of the values
    around it; read on the corpus as no hazard by a reviewer (feature extractors)."""
    term = strip_parens(term)
    if match_call(ctx.imports, term, "abs") is not None:
        return True
    if isinstance(term, cst.Call):
        qual = ctx.qualname(term.func)
        if qual in ("torch.relu", "torch.nn.functional.relu") or (
            isinstance(term.func, cst.Attribute) and term.func.attr.value == "relu" and qual is None
        ):
            return True
    clamp = match_call(ctx.imports, term, "clamp", "clip", "clamp_min")
    return clamp is not None and clamp.given("min") and not clamp.given("max")


def _calls(node: cst.CSTNode) -> List[cst.Call]:
    found: List[cst.Call] = []

    class _Calls(Visitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    _Calls().walk(node)
    return found


def _cast_to_float(term: cst.BaseExpression) -> bool:
    """`log(1 + x.float())`: `x` is converted right at the log, as integer tensors are (durations,
    counts, lengths: `1 + n` is exact); a float tensor needs no cast there."""
    term = strip_parens(term)
    return (
        isinstance(term, cst.Call)
        and isinstance(term.func, cst.Attribute)
        and term.func.attr.value in ("float", "double")
        and not term.args
    )
