"""TNL211 exp-unbounded (off by default): `torch.exp(v)` of a learned value that nothing bounds
above, named for what a network predicts in log space: a log-variance, a log standard deviation
or scale, a log temperature or rate (`logvar`, `log_sigma`, `self.log_scale`). A network can push
it past 88.72, where float32's exp is inf (11.09 in float16): the variance, the scale or the
logits it multiplies become inf, and the loss NaN.

Heuristic (a prediction in log space is usually small): off by default, enabled by its code, by
a prefix (`--select TNL21`) or by `--select ALL`. A value `elementary.bounded_above` knows to have
a ceiling (a clamp, a negation of a non-negative value, a log-probability) is never reported.
"""

from __future__ import annotations

import re

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.elementary import bounded_above
from torchnumlint.rules.evidence import is_not_torch
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.calls import match_call

# `logvar`, `log_var`, `log_sigma`, `logstd`, `self.log_scale`, `log_temperature`, `log_alpha`
_LOG_SPACE = re.compile(r"(^|_)log_?(var|variance|sigma|sigma2|std|scale|temp|temperature|tau|rate|alpha|beta|precision)s?($|_)")
# exp(80) = 5.5e34: finite in float32 with a factor 6e3 to spare for what multiplies it
CEILING = "80.0"


class ExpUnbounded(Rule):
    code = "TNL211"
    name = "exp-unbounded"
    finds = "`torch.exp(v)` of a value named for log space (`logvar`, `log_sigma`, `log_scale`, `log_temperature`) that nothing bounds above: inf past 88.72 in float32"
    fix_summary = "unsafe: `v.clamp(max=80.0)`"
    message = "`exp` of `{what}`, a value in log space that nothing bounds above: inf past 88.72 in float32 (11.09 in float16); clamp it first: `.clamp(max=...)`, or parametrise it with softplus"
    rationale = (
        "A network's log-variance, log-scale or log-temperature is unbounded: one bad step "
        "pushes it past 88.72, where `torch.exp` is inf in float32 (measured on torch 2.13: "
        "exp(88.72) = 3.4e38, exp(88.73) = inf; in float16 exp(11.086) = 65248 and the next float16, 11.094, gives inf), "
        "and the variance, the sample `mu + eps * exp(0.5 * logvar)` or the logits it scales are "
        "inf, the loss NaN. The fix clamps the exponent, `torch.exp(v.clamp(max=80.0))` (exp(80) "
        "= 5.5e34); it changes exp(v) for v above 80, so it is unsafe. Many models clamp "
        "tighter (a VAE's log-variance at 20, CLIP's logit scale at log 100). Off by default: "
        "the names are the only evidence."
    )
    safety = Safety.UNSAFE
    default = False
    needles = ("exp",)
    pattern = r"(?i)log_?(var|variance|sigma|std|scale|temp|tau|rate|alpha|beta|precision)"
    examples = (
        Example(
            bad=("import torch\n\n\ndef gaussian_kl(mu, logvar):\n    return -0.5 * (1 + logvar - mu ** 2 - torch.exp(logvar)).sum(-1)\n"),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def gaussian_kl(mu, logvar):\n"
                "    return -0.5 * (1 + logvar - mu ** 2 - torch.exp(logvar.clamp(max=80.0))).sum(-1)\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "\n"
        "\n"
        "def gaussian_kl(mu, logvar):\n"
        "    logvar = logvar.clamp(-30.0, 20.0)\n"
        "    return -0.5 * (1 + logvar - mu ** 2 - torch.exp(logvar)).sum(-1)\n",
        "import torch\n"
        "\n"
        "\n"
        "def softmax_by_hand(scores):\n"
        "    e = torch.exp(scores - scores.max(-1, keepdim=True).values)\n"
        "    return e / e.sum(-1, keepdim=True)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        match = match_call(self.ctx.imports, node, "exp")
        if match is None or not match.fully_known:
            return
        ctx, v = self.ctx, match.input
        what = _log_space_name(strip_parens(v))
        if what is None or bounded_above(ctx, v) or is_not_torch(ctx, v):
            return
        fix = self.fix()  # `torch.exp(v)` and `v.exp()` take tensors: `clamp` is v's method
        bare = strip_parens(v)
        if not isinstance(bare, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            bare = bare.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        clamped = cst.Call(
            func=cst.Attribute(value=bare, attr=cst.Name("clamp")),
            args=[
                cst.Arg(
                    cst.Float(CEILING),
                    keyword=cst.Name("max"),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
                )
            ],
        )
        fix.replace(v, clamped)
        self.report(node, fix, what=ctx.module.code_for_node(strip_parens(v)))


def _log_space_name(expr: cst.BaseExpression):
    """The exponent when it is a name, an attribute, a negation or a multiple of one
    (`0.5 * logvar`, `-log_var / 2`) named for a value in log space; else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _log_space_name(strip_parens(expr.expression))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)):
        for side in (expr.left, expr.right):
            found = _log_space_name(strip_parens(side))
            if found is not None:
                return found
        return None
    ident = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else None
    if ident is None:
        return None
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", ident).lower()
    return ident if _LOG_SPACE.search(words) else None
