"""TNL104 log-of-sigmoid: `log(sigmoid(x))`, `log(1 - sigmoid(x))`, `log1p(-sigmoid(x))`, and the
log of the probability a sigmoid gives a label, `torch.where(y, p, 1 - p)` or
`y * p + (1 - y) * (1 - p)`: each is -inf once the sigmoid rounds to 0 or 1.

A sigmoid is what `made_by.sigmoid_call` recognises; the label forms are
`log_domain.handwritten.sigmoid_pick`. A guarded input (`+ eps`, `clamp`, a second assignment) is
never one of these shapes. Fixes (placed by `rewrite.at_source`): `F.logsigmoid(x)`,
`F.logsigmoid(-x)`, and `F.logsigmoid(torch.where(y, x, -x))`, which equals the `where` form
exactly; the product form has no exact log-space form for soft labels, so no fix.
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.gradient_context import gradient_free
from torchnumlint.rules.made_by import sigmoid_call
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.log_domain.handwritten import SigmoidPick, one_minus, sigmoid_pick
from torchnumlint.rules.log_domain.sites import LogRule, LogSite, chain, recognised, resolved, store_targets
from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.rewrite import Build, negated
from torchnumlint.rules.uses import only_ranked, uses_of

Found = Tuple[LogSite, str, str]  # the site, what the log reads, what to use instead (for the message)


def _logsigmoid(fix, arg: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=fix.ref("torch.nn.functional.logsigmoid"), args=[cst.Arg(value=arg)])


def _logsigmoid_builder(match: CallMatch, negate: bool) -> Build:
    def build(fix) -> Optional[cst.BaseExpression]:
        return _logsigmoid(fix, negated(match.input) if negate else strip_parens(match.input))

    return build


def _where_builder(pick: SigmoidPick) -> Build:
    """`F.logsigmoid(torch.where(y, x, -x))`, the user's `where` call with its branches swapped
    for the logits (`-x` where it picked `1 - p`)."""

    def build(fix) -> Optional[cst.BaseExpression]:
        call = pick.where
        assert call is not None
        logits = strip_parens(pick.sigmoid.input)
        branches = (negated(logits), logits) if pick.flipped else (logits, negated(logits))
        args = [call.args[0]] + [a.with_changes(value=v) for a, v in zip(call.args[1:], branches)]
        return _logsigmoid(fix, call.with_changes(args=args))

    return build


class LogOfSigmoid(LogRule):
    code = "TNL104"
    name = "log-of-sigmoid"
    finds = "`torch.log(torch.sigmoid(x))`, `torch.log(1 - torch.sigmoid(x))`"
    fix_summary = "safe: `F.logsigmoid(x)` / `F.logsigmoid(-x)`"
    message = "log of {what} is -inf once it rounds to 0{then}; use {use}{note}"
    rationale = (
        "`sigmoid(x)` rounds to exactly 1 from x >= 16.64 in float32 (8.32 in float16, 6.25 in "
        "bfloat16), so `log(1 - sigmoid(x))` is -inf there and its gradient NaN; `sigmoid(x)` "
        "itself underflows to 0 for very negative x, with the same result for `log(sigmoid(x))`. "
        "`F.logsigmoid(x)` computes `-softplus(-x)` directly and is finite everywhere, and "
        "`log(1 - sigmoid(x)) == log(sigmoid(-x)) == F.logsigmoid(-x)` exactly."
    )
    safety = Safety.SAFE
    needles = ("sigmoid", "Sigmoid", "expit")
    produced = frozenset({"sigmoid"})  # a helper of the project that returns one
    needs_index = True
    examples = (
        Example(
            bad=("import torch\nimport torch.nn.functional as F\n\n\ndef log_not(z):\n    return torch.log(1 - torch.sigmoid(z))\n"),
            lines=(6,),
            fixed=("import torch\nimport torch.nn.functional as F\n\n\ndef log_not(z):\n    return F.logsigmoid(-z)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def pair(a, b):\n"
                "    pos = (a * b).sum(-1).sigmoid().log()\n"
                "    neg = (1.0 - (a - b).sigmoid()).log()\n"
                "    return -(pos + neg).mean()\n"
            ),
            lines=(6, 7),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def pair(a, b):\n"
                "    pos = F.logsigmoid((a * b).sum(-1))\n"
                "    neg = F.logsigmoid(-(a - b))\n"
                "    return -(pos + neg).mean()\n"
            ),
        ),
        Example(
            bad=(
                "from torch import log, nn\n"
                "from torch.special import expit\n"
                "\n"
                "\n"
                "def gate(h, w):\n"
                "    g = expit(h @ w)\n"
                "    return h * log(g)\n"
            ),
            lines=(7,),
            fixed=(
                "from torch import log, nn\n"
                "from torch.special import expit\n"
                "\n"
                "\n"
                "def gate(h, w):\n"
                "    g = nn.functional.logsigmoid(h @ w)\n"
                "    return h * g\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "def f(x, eps=1e-6):\n"
        "    a = torch.log(torch.sigmoid(x) + eps)\n"
        "    b = torch.log(1 - torch.sigmoid(x) + eps)\n"
        "    c = torch.sigmoid(x).clamp_min(eps).log()\n"
        "    return a + b + c + torch.log((1 - torch.sigmoid(x)).clamp(min=1e-7))\n",
        "import math\nimport torch\nimport torch.nn.functional as F\n"
        "def f(x, n):\n"
        "    return F.logsigmoid(x) + F.logsigmoid(-x) + math.log(n) + torch.log(2 - torch.sigmoid(x))\n",
        "import torch\ndef f(x):\n    s = torch.sigmoid(x)\n    s = s.clamp(1e-6, 1 - 1e-6)\n    return torch.log(s) + torch.log(1 - s)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = None
        log1p = match_call(self.ctx.imports, node, "log1p")
        if log1p is not None:
            # torch.log1p(-sigmoid(x)) == log(1 - sigmoid(x))
            inner = strip_parens(log1p.input)
            if log1p.fully_known and isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Minus):
                found = self._sigmoid_site(node, inner.expression, negate=True, whole=log1p.input)
        else:
            inp = self.log_input(node)
            if inp is None:
                return
            found = self._site(node, inp)
        if found is None:
            return
        site, what, use = found
        if only_ranked(self.ctx, uses_of(self.ctx, self.ctx.stack)):
            return
        then = "" if gradient_free(self.ctx) else " (then NaN gradients)"
        fix, note = self.fix_for(site)
        self.report(node, fix, what=what, then=then, use=use, note=note)

    def _site(self, node: cst.Call, inp: cst.BaseExpression) -> Optional[Found]:
        pick = sigmoid_pick(self.ctx, inp)
        if pick is not None:
            return self._pick_site(node, inp, pick)
        complement = one_minus(resolved(self.ctx, inp))
        if complement is not None:
            return self._sigmoid_site(node, complement, negate=True, whole=inp)
        return self._sigmoid_site(node, inp, negate=False, whole=inp)

    def _sigmoid_site(self, node, expr, negate: bool, whole) -> Optional[Found]:
        """`whole` is what the log reads; `expr` the sigmoid part of it (the same unless negated)."""
        ctx = self.ctx
        names = chain(ctx, whole)
        inner = chain(ctx, expr) if negate and expr is not whole else []
        match, plain = recognised(ctx, expr, sigmoid_call, "sigmoid")
        if match is None or not match.fully_known:
            return None
        build = _logsigmoid_builder(match, negate) if plain else None
        site = LogSite(node, whole, names + inner, match.input, build, [match.input], unread=store_targets(inner))
        if negate:
            return site, "`1 - sigmoid(x)`", "`F.logsigmoid(-x)`"
        return site, "a sigmoid", "`F.logsigmoid(x)`"

    def _pick_site(self, node, whole, pick: SigmoidPick) -> Found:
        """The probability of the label, `where(y, p, 1 - p)` (exact fix) or `y * p + (1 - y) *
        (1 - p)` (no fix: it is the log-likelihood only for 0/1 labels)."""
        ctx = self.ctx
        p = pick.sigmoid
        _, plain = recognised(ctx, p.call, sigmoid_call, "sigmoid")
        exact = pick.where is not None and plain and p.fully_known
        if exact and pick.p_chain and not ctx.unchanged_since([p.input], pick.p_chain):
            exact = False
        build = _where_builder(pick) if exact else None
        site = LogSite(node, whole, chain(ctx, whole), p.input, build, [p.input, pick.label], unread=store_targets(pick.p_chain))
        if pick.where is not None:
            return site, "`where(y, p, 1 - p)` of a sigmoid `p`", "`F.logsigmoid(torch.where(y, x, -x))`"
        return (
            site,
            "`y * p + (1 - y) * (1 - p)` of a sigmoid `p`",
            '`-F.binary_cross_entropy_with_logits(x, y, reduction="none")` for 0/1 labels',
        )
