"""TNL109 logsumexp-manual: the log of a sum (or mean) of exps, `torch.log(torch.exp(x).sum(d))`,
`x.exp().sum(d).log()`, `torch.log(torch.mean(torch.exp(x), d))` and `torch.log(torch.exp(a) +
torch.exp(b))`, each inf once one exp overflows and -inf once every exp underflows, where
`torch.logsumexp` / `torch.logaddexp` (which subtract the max) are finite.

The log and the fix's placement are `sites.LogRule`'s; the exps are `handwritten.exp_of`,
through local names. Left alone: a max-subtracted exp (`log(exp(x - m).sum(d)) + m`, the stable
form written out, the max also through a helper or every assignment: `shifts.is_shifted`) and
an exp of log-probabilities (`handwritten.stable_exp`), a log of `1 + exp(x)` (TNL108's
softplus; not a sum of exps), and code the overflow cannot reach (`unreached`): a log that runs
only on an empty input (`if x.numel() == 0:`), one `torch.where` keeps only where every exp's
input is already infinite (torch's `_refs.logaddexp`), where the naive form is exact.

Fixes (SAFE): `torch.logsumexp(x, d)` keeping `keepdim`; for a mean over one int dim of a plain
`x`, `torch.logsumexp(x, d) - math.log(x.shape[d])` (`import math` added when the file has no
`math`); `torch.logaddexp(a, b)` for two inline exps. No fix without an explicit dim, with a
`dtype`, or for three or more terms.
"""

from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.evidence import is_not_torch
from torchnumlint.rules.gradient_context import in_reference_implementation
from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.log_domain.handwritten import exp_of, stable_exp
from torchnumlint.rules.log_domain.sites import LogRule, LogSite, chain, resolved, store_targets
from torchnumlint.rules.log_domain.unreached import on_empty_input, selected_at_non_finite
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.rewrite import Build

_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
# where a difference may stand without parentheses
_LOOSE_PARENTS = (cst.Arg, cst.Return, cst.Assign, cst.AnnAssign, cst.Expr, cst.Element)


def _terms(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The summands of `a + b + c` (any nesting of `+`)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _terms(expr.left) + _terms(expr.right)
    return [expr]


def _int_dim(expr: Optional[cst.BaseExpression]) -> bool:
    """An int literal dim (`1`, `-1`): `x.shape[d]` is then the count a mean divides by."""
    if expr is None:
        return False
    expr = strip_parens(expr)
    inner = expr.expression if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) else expr
    return isinstance(inner, cst.Integer) and number_value(expr) is not None


def _math(fix) -> Optional[cst.BaseExpression]:
    """The file's name for the `math` module, adding `import math` where the file binds no
    `math`; None where the name means something else."""
    ctx = fix.ctx
    for local, target in ctx.imports.top_level.items():
        if target == "math" and local not in ctx.imports.ambiguous:
            return cst.Name(local)
    if re.search(r"\bmath\b", ctx.text):
        return None
    if "import math" not in fix.imports:
        fix.imports.append("import math")
    return cst.Name("math")


def _logsumexp_builder(reduction: CallMatch, logits: cst.BaseExpression) -> Build:
    """`torch.logsumexp(x, d, ...)` with the reduction's dim and keepdim as passed; for a mean,
    minus `math.log(x.shape[d])`."""

    def build(fix) -> Optional[cst.BaseExpression]:
        x = strip_parens(logits)
        rest = [arg.with_changes(comma=_COMMA) for name, arg in reduction.args.items() if name != "dtype"]
        args = [cst.Arg(value=x, comma=_COMMA)] + rest
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        call = cst.Call(func=fix.ref("torch.logsumexp"), args=args)
        if reduction.op.name == "sum":
            return call
        math = _math(fix)
        if math is None:
            return None
        size = cst.Subscript(
            value=cst.Attribute(value=x, attr=cst.Name("shape")),
            slice=[cst.SubscriptElement(slice=cst.Index(value=strip_parens(reduction.arg("dim"))))],  # type: ignore[arg-type]  # `fully_known` reductions give their dim
        )
        log_n = cst.Call(func=cst.Attribute(value=math, attr=cst.Name("log")), args=[cst.Arg(value=size)])
        return cst.BinaryOperation(left=call, operator=cst.Subtract(), right=log_n)

    return build


def _logaddexp_builder(a: cst.BaseExpression, b: cst.BaseExpression) -> Build:
    def build(fix) -> Optional[cst.BaseExpression]:
        args = [cst.Arg(value=strip_parens(a), comma=_COMMA), cst.Arg(value=strip_parens(b))]
        return cst.Call(func=fix.ref("torch.logaddexp"), args=args)

    return build


class LogsumexpManual(LogRule):
    code = "TNL109"
    name = "logsumexp-manual"
    finds = "`torch.log(torch.exp(x).sum(d))`, `log(mean(exp(x), d))`, `log(exp(a) + exp(b))` without the max subtracted"
    fix_summary = "safe: `torch.logsumexp(x, d)` (mean: `- math.log(n)`), `torch.logaddexp(a, b)`"
    message = (
        "log of a {what} of exps: inf once one input reaches 88.7 in float32 (11.1 in float16), "
        "-inf once all are below -104 (-17.3), with a NaN gradient; use {use}"
    )
    rationale = (
        "`log(exp(x).sum(d))` overflows and underflows where its value does not. Measured on "
        "torch 2.13 (CPU): exp is inf from x = 88.73 in float32 (11.09 in float16, 89.0 in "
        "bfloat16), so the log is inf and the gradient (exp(x) / sum = inf / inf) NaN for every "
        "input of the row; exp is 0 from x = -103.98 in float32 (-17.34 in float16, -93.0 in "
        "bfloat16), so a row whose inputs are all below that is log 0 = -inf with a NaN "
        "gradient, where `torch.logsumexp` gives -101.68 (-15.04, -90.5). Energies, "
        "log-likelihoods of many terms and critic outputs (the `log(mean(exp(t)))` of a "
        "mutual-information bound) reach those values. `torch.logsumexp(x, d)` subtracts the "
        "max first and is finite for any finite input; `log(mean(exp(x), d))` is "
        "`logsumexp(x, d) - log(n)` and `log(exp(a) + exp(b))` is `torch.logaddexp(a, b)`. The "
        "fixes equal the original wherever it is finite, so they are safe. A sum of a "
        "max-subtracted exp (`log(exp(x - m).sum(d)) + m`, the stable form written out) and an "
        "exp of log-probabilities (at most 1) are left alone."
    )
    safety = Safety.SAFE
    needles = ("exp",)
    pattern = r"\blog\b"
    # a call of log only (`LogSites.log_input`)
    ast_calls = ("log",)
    examples = (
        Example(
            bad=("import torch\n\n\ndef free_energy(energies):\n    return -torch.log(torch.exp(-energies).sum(dim=-1))\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef free_energy(energies):\n    return -torch.logsumexp(-energies, dim=-1)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def mine_lower_bound(t_joint, t_marginal):\n"
                "    return t_joint.mean() - torch.log(torch.mean(torch.exp(t_marginal), 0))\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "import math\n"
                "\n"
                "\n"
                "def mine_lower_bound(t_joint, t_marginal):\n"
                "    return t_joint.mean() - (torch.logsumexp(t_marginal, 0) - math.log(t_marginal.shape[0]))\n"
            ),
        ),
        Example(
            bad=("import torch\n\n\ndef log_mix(log_a, log_b):\n    return torch.log(torch.exp(log_a) + torch.exp(log_b))\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef log_mix(log_a, log_b):\n    return torch.logaddexp(log_a, log_b)\n"),
        ),
    )
    good = (
        # the stable form written out, and torch's own
        "import torch\n"
        "def f(x):\n"
        "    m = x.max(dim=-1, keepdim=True).values\n"
        "    return torch.log(torch.exp(x - m).sum(-1, keepdim=True)) + m + torch.logsumexp(x, -1)\n",
        # exps of log-probabilities sum to at most 1
        "import torch\ndef f(logits):\n    log_probs = torch.log_softmax(logits, -1)\n    return torch.log(log_probs.exp().sum(-1))\n",
        # softplus and logs that are not torch's
        "import math\nimport torch\ndef f(x, v):\n    return torch.log(1 + torch.exp(x)) + math.log(sum(math.exp(t) for t in v))\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        inp = self.log_input(node)
        if inp is None:
            return
        found = self._site(node, strip_parens(inp))
        if found is None:
            return
        site, what, use, inputs = found
        if on_empty_input(self.ctx, inputs) or selected_at_non_finite(self.ctx, inputs):
            return
        if in_reference_implementation(self.ctx):
            return  # a test's reference of logsumexp, naive on purpose
        fix, note = self.fix_for(site)
        self.report(node, fix, what=what, use=use + note)

    def _site(self, node: cst.Call, core: cst.BaseExpression):
        """(the site, "sum" or "mean", the advice, the exps' inputs) of a log of a sum of exps."""
        ctx = self.ctx
        value = resolved(ctx, core)
        reduction = match_call(ctx.imports, value, "sum", "mean")
        if reduction is not None and reduction.fully_known:
            exp = exp_of(ctx, reduction.input)
            if exp is None or stable_exp(ctx, exp.input) or is_not_torch(ctx, exp.input):
                return None
            logits, exp_chain = strip_parens(exp.input), chain(ctx, reduction.input)
            build = self._reduction_build(reduction, logits, exp_chain)
            site = LogSite(
                node,
                core,
                chain(ctx, core),
                logits,
                build,
                [logits] + [a.value for a in reduction.args.values()],
                self._parenthesised,
                unread=store_targets(exp_chain),
            )
            return site, reduction.op.name, "`torch.logsumexp`" + (" minus log(n)" if reduction.op.name == "mean" else ""), [logits]
        terms = _terms(value) if isinstance(value, cst.BinaryOperation) else []
        exps = [exp_of(ctx, term) for term in terms]
        if len(terms) < 2 or any(e is None or stable_exp(ctx, e.input) or is_not_torch(ctx, e.input) for e in exps):
            return None
        inline = all(e.call is t for e, t in zip(exps, terms))  # type: ignore[union-attr]  # no None in `exps`: returned above
        build = _logaddexp_builder(exps[0].input, exps[1].input) if len(exps) == 2 and inline else None  # type: ignore[union-attr]  # no None in `exps`: returned above
        parts = [e.input for e in exps]  # type: ignore[union-attr]  # no None in `exps`: returned above
        return LogSite(node, core, chain(ctx, core), parts[0], build, parts), "sum", "`torch.logaddexp`", parts

    def _reduction_build(self, reduction: CallMatch, logits: cst.BaseExpression, exp_chain) -> Optional[Build]:
        """The logsumexp fix, where it is exact: an explicit dim, no dtype, the logits unchanged
        since the names followed to the exp; a mean only over one int dim of a plain value."""
        if not reduction.given("dim") or "dtype" in reduction.args:
            return None
        if exp_chain and not self.ctx.unchanged_since([logits], exp_chain):
            return None
        if reduction.op.name == "mean" and not (
            _int_dim(reduction.arg("dim")) and isinstance(logits, (cst.Name, cst.Attribute)) and is_plain(logits)
        ):
            return None
        return _logsumexp_builder(reduction, logits)

    def _parenthesised(self, new: cst.BaseExpression) -> cst.BaseExpression:
        """A difference (the mean's fix) in parentheses unless it stands alone (an argument, a
        returned or assigned value)."""
        new = strip_parens(new)
        parent = self.ctx.stack[-2] if len(self.ctx.stack) > 1 else None
        if not isinstance(new, cst.BinaryOperation) or isinstance(parent, _LOOSE_PARENTS):
            return new
        return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
