"""TNL112 logit-manual: the log-odds of a probability that can be exactly 0 or 1,
`torch.log(p / (1 - p))`, `log(p) - log(1 - p)` (or `- log1p(-p)`), or `torch.logit(p)` without
`eps`: +-Inf there, and a NaN or Inf gradient.

Reported by default only where the code shows that `p` reaches 0 or 1 (read on the corpus: the
log-odds of a value known to lie inside (0, 1), an anchor grid with a validity mask, a prior
probability, is what the author meant):
- a sigmoid (`made_by.sigmoid_call`: inline, through names, helpers, `nn.Sigmoid` modules), which
  rounds to 1 from x = 16.64 and to 0 below x = -88.72 in float32; the logit of a sigmoid is its
  input itself, which the message says;
- a softmax (`made_by.softmax_call`), whose entries underflow to 0;
- a value clamped to [0, 1], which keeps both ends;
- a uniform draw (`torch.rand`, `rand_like`, `uniform_`), exactly 0 once in 2**24 draws.
Anything else is reported only in strict mode, and a guarded `p` (`p.clamp(eps, 1 - eps)`,
`p + eps`) never. The log-difference of a sigmoid is TNL104's (`F.logsigmoid(x) - F.logsigmoid(-x)`
is exact), while TNL104 is enabled.

The fix is `torch.logit(p, eps=1e-6)`: it clamps `p` to [1e-6, 1 - 1e-6] (logits within
+-13.8) and its gradient is 0 outside; results change only there, but they change: UNSAFE.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.divisors import division_operands
from torchnumlint.rules.elementary import is_random_draw, one_plus
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.made_by import sigmoid_call, softmax_call
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import make_op, match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.rewrite import keyword_arg, with_keyword
from torchnumlint.rules.special_functions.placing import placed

_LOGIT = make_op("logit", {"torch.logit", "torch.special.logit"}, "logit", ("eps",))
_CHAIN = 4
EPS = "1e-6"


def _resolved(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    return strip_parens(ctx.resolve(expr, _CHAIN, names_only=True))


def _complement_of(ctx, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`p` for `expr` = `1 - p` in any spelling (`elementary.one_plus`), through local names."""
    found = one_plus(ctx, _resolved(ctx, expr))
    return found.term if found is not None and found.negative else None


def _odds(ctx, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`p` for `expr` = `p / (1 - p)` (any division form, through local names), else None."""
    value = _resolved(ctx, expr)
    operands = division_operands(ctx, value)
    if operands is None:
        return None
    p, bottom = operands
    q = _complement_of(ctx, bottom)
    return strip_parens(p) if q is not None and same_code(ctx, p, q) else None


def _log_of(ctx, expr: cst.BaseExpression):
    match = match_call(ctx.imports, strip_parens(expr), "log", "log1p")
    return match if match is not None and match.fully_known else None


def _log_difference(ctx, node: cst.BinaryOperation) -> Optional[cst.BaseExpression]:
    """`p` for `log(p) - log(1 - p)` or `log(p) - log1p(-p)`, else None."""
    left, right = _log_of(ctx, node.left), _log_of(ctx, node.right)
    if left is None or right is None or left.op.name != "log":
        return None
    p = left.input
    if right.op.name == "log":
        q = _complement_of(ctx, right.input)
    else:
        neg = _resolved(ctx, right.input)
        q = neg.expression if isinstance(neg, cst.UnaryOperation) and isinstance(neg.operator, cst.Minus) else None
    return strip_parens(p) if q is not None and same_code(ctx, p, q) else None


def _clamped_to_unit(ctx, expr: cst.BaseExpression) -> bool:
    """`p.clamp(0, 1)` / `torch.clamp(p, min=0.0, max=1.0)`: both ends kept."""
    clamp = match_call(ctx.imports, _resolved(ctx, expr), "clamp", "clip")
    if clamp is None:
        return False
    low, high = clamp.arg("min"), clamp.arg("max")
    return low is not None and high is not None and number_value(strip_parens(low)) == 0.0 and number_value(strip_parens(high)) == 1.0


def _unit_draw(ctx, expr: cst.BaseExpression) -> bool:
    """A uniform draw on [0, 1) itself (`torch.rand`, `rand_like`, `.uniform_()`), not one with
    bounds inside it (`.uniform_(1e-6, 1 - 1e-6)`, read on the corpus) nor an affine map of one."""
    value = _resolved(ctx, expr)
    if not isinstance(value, cst.Call) or not is_random_draw(ctx, value):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("uniform_", "uniform"):
        low = value.args[0].value if value.args else None
        return low is None or number_value(strip_parens(low)) == 0.0
    return ctx.qualname(func) in ("torch.rand", "torch.rand_like")


class LogitManual(Rule):
    code = "TNL112"
    name = "logit-manual"
    finds = (
        "`log(p / (1 - p))`, `log(p) - log(1 - p)`, `torch.logit(p)` without eps, of a value that "
        "reaches 0 or 1 (a sigmoid, a softmax, a [0, 1] clamp, a uniform draw)"
    )
    fix_summary = "unsafe: `torch.logit(p, eps=1e-6)`"
    message = "log-odds of `p`, which {why}: +-Inf at 0 and 1, with an Inf or NaN gradient; use `torch.logit(p, eps=...)`{note}"
    rationale = (
        "`torch.log(p / (1 - p))`, `log(p) - log(1 - p)` and `torch.logit(p)` without `eps` are "
        "-Inf at p = 0 and +Inf at p = 1; measured on torch 2.13, the gradient of the quotient "
        "form is NaN at both ends, of the others Inf. A probability reaches them: `sigmoid(x)` "
        "is exactly 1 from x = 16.64 and exactly 0 below x = -88.72 in float32, a softmax "
        "underflows to 0, a uniform draw is 0 once in 2**24. `torch.logit(p, eps=1e-6)` clamps "
        "p to [1e-6, 1 - 1e-6] first: finite (+-13.8), equal to the original inside that range, "
        "with a zero gradient outside it. In float16 and bfloat16 `1 - 1e-6` rounds to 1: there "
        "eps must be at least 3e-4 (float16) or 2e-3 (bfloat16), measured. The logit of a "
        "sigmoid is its input itself: use that where it is at hand."
    )
    safety = Safety.UNSAFE
    needles = ("log",)
    pattern = r"\blog(?:1p|it)?\b"  # a log, log1p or logit by name (not `logger`, `logits`)
    # a call of logit, or of log (alone or the first of `log(p) - log1p(-p)`)
    ast_calls = ("log", "logit")
    produced = frozenset({"sigmoid", "softmax"})
    needs_index = True
    examples = (
        Example(
            bad=("import torch\n\n\ndef log_odds(z):\n    p = torch.sigmoid(z)\n    return torch.log(p / (1 - p))\n"),
            lines=(6,),
            fixed=("import torch\n\n\ndef log_odds(z):\n    p = torch.sigmoid(z)\n    return torch.logit(p, eps=1e-6)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def class_odds(scores):\n"
                "    probs = F.softmax(scores, dim=-1)\n"
                "    return probs.logit()\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def class_odds(scores):\n"
                "    probs = F.softmax(scores, dim=-1)\n"
                "    return probs.logit(eps=1e-6)\n"
            ),
        ),
    )
    good = (
        "import math\nimport torch\ndef init_bias(prior=0.01):\n    return -math.log((1 - prior) / prior)\n",
        "import torch\n"
        "def inverse_sigmoid(x, eps=1e-5):\n"
        "    x = x.clamp(min=0, max=1)\n"
        "    x1 = x.clamp(min=eps)\n"
        "    x2 = (1 - x).clamp(min=eps)\n"
        "    return torch.log(x1 / x2)\n",
        "import torch\n"
        "def f(z, eps=1e-6):\n"
        "    p = torch.sigmoid(z).clamp(eps, 1 - eps)\n"
        "    return torch.log(p / (1 - p)) + torch.logit(torch.sigmoid(z), eps=1e-6)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        logit = match_call(ctx.imports, node, _LOGIT)
        if logit is not None:
            if logit.fully_known and not logit.given("eps"):
                self._check(node, logit.input, logit)
            return
        log = match_call(ctx.imports, node, "log")
        if log is not None and log.fully_known:
            p = _odds(ctx, log.input)
            if p is not None:
                self._check(node, p, None)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Subtract):
            p = _log_difference(self.ctx, node)
            if p is not None:
                if sigmoid_call(self.ctx, p) is not None and owned_elsewhere(self.ctx, self.code, "log-odds-of-sigmoid"):
                    return
                self._check(node, p, None)

    def _check(self, node: cst.CSTNode, p: cst.BaseExpression, logit) -> None:
        ctx = self.ctx
        if is_not_torch(ctx, p) or (logit is None and not is_plain(p)):
            return  # a Python or numpy number; `rand(n) / (1 - rand(n))` is no odds of one value
        why = self._evidence(p)
        if why is None:
            if not ctx.strict or is_guarded(ctx, p):
                return
            why = f"can be 0 or 1 {STRICT_WHY}"
        fix, note = self._fix(node, p, logit)
        if sigmoid_call(ctx, p) is not None:
            note += " (the logit of a sigmoid is its input itself)"
        self.report(node, fix, why=why, note=note)

    def _evidence(self, p: cst.BaseExpression) -> Optional[str]:
        ctx = self.ctx
        if sigmoid_call(ctx, p) is not None:
            return "is a sigmoid: exactly 1 from x = 16.64 and 0 below x = -88.72 in float32"
        if softmax_call(ctx, p) is not None:
            return "is a softmax, whose entries underflow to 0"
        if _clamped_to_unit(ctx, p):
            return "is clamped to [0, 1], which keeps both ends"
        if _unit_draw(ctx, p):
            return "is a uniform draw, exactly 0 once in 2**24 draws"
        return None

    def _fix(self, node: cst.CSTNode, p: cst.BaseExpression, logit):
        """`eps=1e-6` added to a `logit` call; `torch.logit(p, eps=1e-6)` for a form by hand, in
        place of the log (or of the quotient's one assignment, `placing.placed`)."""
        eps = cst.Float(EPS)
        if logit is not None:
            fix = self.fix()
            fix.replace(node, with_keyword(logit.call, "eps", eps))
            return fix, ""

        def build(fix) -> cst.BaseExpression:
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            return cst.Call(func=fix.ref("torch.logit"), args=[cst.Arg(value=p, comma=comma), keyword_arg("eps", eps)])

        assert isinstance(node, cst.BaseExpression)
        log = match_call(self.ctx.imports, node, "log")
        if log is None:  # log(p) - log(1 - p): in place
            fix = self.fix()
            fix.replace(node, build(fix))
            return fix, ""
        chain = self.ctx.chain(log.input, _CHAIN, names_only=True)
        return placed(self, node, log.input, chain, build, [p], "log-odds")
