"""TNL110 softmax-manual: an exp divided by its own sum without the max subtracted first, the
softmax written out by hand that overflows where `torch.softmax` does not.

What is recognised is `handwritten.exp_normalisation`: `exp(x) / exp(x).sum(d, keepdim=True)`
inline or through names, in every form of a division (`/`, `/=`, `torch.div`, `div_`), with the
sum reshaped (`e.sum(1)[:, None]`) or taken over everything (`e / e.sum()`), and the first
normalisation of a Sinkhorn loop (`Q = torch.exp(out / eps).t(); Q /= torch.sum(Q)`). Left
alone: a max-subtracted exp (`shifts.is_shifted`: also through a helper returning a max), an exp of log-probabilities (at most 1),
a Gaussian kernel `exp(-x ** 2 / (2 * s ** 2))` normalised over its grid (`handwritten.is_gaussian`),
a quotient that runs only on an empty input (`unreached.on_empty_input`).

The log of such a quotient is one hazard, `log(e / e.sum(d, keepdim=True))`, whose owner is
TNL103 (`ownership.OWNERS["log-of-hand-softmax"]`): its `log_softmax` fix removes the overflow
and the underflow at once. This rule reports it only while TNL103 is disabled.

Fix (SAFE, exact): `torch.softmax(x, d)` for the one form that is a softmax over `d`, a plain
`/` of `exp(x)` by `exp(x).sum(d, keepdim=True)` with one explicit dim, read through names only
when `x` is unchanged since; names the fix leaves unread are removed (`rewrite.drop_if_unread`
asks of one replaced node; here the sum's line, once removed, is no read of the exp's name).
"""

from __future__ import annotations

from typing import List, Sequence

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.divisors import DivisionRule
from torchnumlint.rules.evidence import is_not_torch
from torchnumlint.rules.gradient_context import in_reference_implementation
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.log_domain.handwritten import (
    ExpNormalisation,
    exp_normalisation,
    hand_softmax,
    is_gaussian,
    softmax_like,
)
from torchnumlint.rules.log_domain.sites import store_targets
from torchnumlint.rules.log_domain.unreached import on_empty_input
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.uses import binding_line, only_ranked, reads_of, uses_of


class SoftmaxManual(DivisionRule):
    code = "TNL110"
    name = "softmax-manual"
    finds = (
        "`exp(x) / exp(x).sum(d, keepdim=True)` without the max subtracted (also `/=`, `div_`, "
        "Sinkhorn, contrastive `exp(sim / t)`, InfoNCE's `exp(pos) / exp(sim).sum(1)`): inf/inf = NaN"
    )
    fix_summary = "safe: `torch.softmax(x, d)` (exact form only)"
    message = (
        "softmax written by hand without subtracting the max: exp overflows to inf from an input "
        "of 88.7 in float32 (11.1 in float16), and inf / inf = NaN; {use}"
    )
    rationale = (
        "`exp(x) / exp(x).sum(d, keepdim=True)` is a softmax only while every exp is finite. "
        "Measured on torch 2.13 (CPU): exp is inf from x = 88.73 in float32 (ln of the largest "
        "float32 is 88.72), from 11.09 in float16 and from 89.0 in bfloat16; one such logit in a "
        "row of ten makes that probability inf / inf = NaN, the other nine 0, and the gradient "
        "of every logit of the row NaN, where `torch.softmax` gives 1 and 0 and a finite "
        "gradient. In float16 the sum overflows even sooner (ten logits of 8.8). When every "
        "input of a row is very negative (below -103.98 in float32, -17.34 in float16) every exp "
        "is 0 and the row is 0 / 0 = NaN. Logits that saturate, temperatures of 0.07 on "
        "similarities (a contrastive loss's `exp(sim / t)`: 14.3 at sim = 1, past float16's "
        "limit) and Sinkhorn's `exp(scores / eps)` reach these. `torch.softmax` subtracts the "
        "row max first and is finite for any finite input; the fix `torch.softmax(x, d)` is "
        "exact where the hand-written form is finite, so it is safe. Forms that are not a "
        "softmax over one dim (a reshaped sum, a sum over everything, an in-place division, a "
        "Sinkhorn loop) are reported with the advice to subtract the max, and no rewrite."
    )
    safety = Safety.SAFE
    needles = ("exp",)
    pattern = r"\bexp\b[\s\S]*\bsum\b|\bsum\b[\s\S]*\bexp\b"
    examples = (
        Example(
            bad=(
                "import torch\n\n\ndef attention_weights(scores):\n    return torch.exp(scores) / torch.exp(scores).sum(-1, keepdim=True)\n"
            ),
            lines=(5,),
            fixed=("import torch\n\n\ndef attention_weights(scores):\n    return torch.softmax(scores, -1)\n"),
        ),
        Example(
            bad=(
                "import torch\n\n\ndef contrastive_probs(sim, t):\n    e = torch.exp(sim / t)\n    return e / e.sum(dim=1, keepdim=True)\n"
            ),
            lines=(6,),
            fixed=("import torch\n\n\ndef contrastive_probs(sim, t):\n    return torch.softmax(sim / t, dim=1)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "@torch.no_grad()\n"
                "def sinkhorn(out, eps=0.05, iters=3):\n"
                "    Q = torch.exp(out / eps).t()\n"
                "    Q /= torch.sum(Q)\n"
                "    for _ in range(iters):\n"
                "        Q /= torch.sum(Q, dim=1, keepdim=True)\n"
                "        Q /= torch.sum(Q, dim=0, keepdim=True)\n"
                "    return Q.t()\n"
            ),
            lines=(7,),
            fixed=None,
        ),
    )
    good = (
        # max-subtracted, inline and through names
        "import torch\n"
        "def f(x):\n"
        "    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)\n"
        "    m, _ = torch.max(x, dim=1, keepdim=True)\n"
        "    z = x - m.detach()\n"
        "    return e / e.sum(-1, keepdim=True) + z.exp() / z.exp().sum(1, keepdim=True)\n",
        # exp of log-probabilities is at most 1: renormalising after filtering
        "import torch\n"
        "def f(logits):\n"
        "    log_probs = torch.log_softmax(logits, -1)\n"
        "    p = log_probs.exp()\n"
        "    return p / p.sum(-1, keepdim=True)\n",
        # the built-in softmax, and an exp divided by something that is not its sum
        "import torch\n"
        "def f(x, y):\n"
        "    return torch.softmax(x, -1) + torch.exp(x) / torch.exp(y).sum(-1, keepdim=True) + x.exp() / x.sum()\n",
    )

    def division(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> None:
        found = exp_normalisation(self.ctx, node, x, d)
        if found is None or found.shifted or is_gaussian(self.ctx, found.logits) or is_not_torch(self.ctx, found.logits):
            return
        if on_empty_input(self.ctx, [found.logits]) or in_reference_implementation(self.ctx):
            return  # an empty input has nothing to overflow; a test's reference is naive on purpose
        if self._logged(node) and owned_elsewhere(self.ctx, self.code, "log-of-hand-softmax"):
            return
        fix = self._fix(found)
        if fix is not None:
            use = "use `torch.softmax`"
        elif found.selected:  # InfoNCE written out: one entry of the softmax, often logged
            use = "take `torch.log_softmax(x, d)` and pick the entry from it (`F.cross_entropy` for a loss)"
        else:
            use = "subtract the max before the exp (`x - x.amax(d, keepdim=True)`), or use `torch.softmax`"
        self.report(node, fix, use=use)

    def _logged(self, node: cst.CSTNode) -> bool:
        """The quotient is the input of a log that TNL103 reports as the log of a hand-written
        softmax: `torch.log(e / e.sum(d, keepdim=True))` inline, or through a name that only the
        log reads. Such a log is one hazard with its quotient."""
        ctx = self.ctx
        if hand_softmax(ctx, node) is None:  # type: ignore[arg-type]  # called with the quotient, an expression
            return False
        stack = ctx.stack
        if self._log_above(stack):
            return True
        assign = stack[-2] if len(stack) > 1 else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or assign.value is not node:
            return False
        target = assign.targets[0].target
        reads = reads_of(ctx, target) if isinstance(target, cst.Name) else None
        return reads is not None and len(reads) == 1 and self._log_above(reads[0])

    def _log_above(self, path: Sequence[cst.CSTNode]) -> bool:
        """`path[-1]` is the input of a log call (function or method form) whose -inf is not only
        ranked (TNL103 is silent there, so the quotient stays this rule's)."""
        if len(path) < 3:
            return False
        log = match_call(self.ctx.imports, path[-3], "log")
        if log is None or strip_parens(log.input) is not path[-1]:
            return False
        return not only_ranked(self.ctx, uses_of(self.ctx, path[:-2]))

    def _fix(self, found: ExpNormalisation):
        """`torch.softmax(x, d)` in place of an exact `/`, with x unchanged since the names
        followed to it; the names left unread are removed."""
        ctx = self.ctx
        dim = found.dim
        if not found.exact or not isinstance(found.division, cst.BinaryOperation) or dim is None:
            return None
        if isinstance(dim.value, (cst.Tuple, cst.List)):
            return None
        followed = found.exp_chain + found.total_chain
        if followed and not ctx.unchanged_since([found.logits, dim.value], followed):
            return None
        fix = self.fix()
        fix.replace(found.division, softmax_like(fix, found, "torch.softmax"))
        gone: List[cst.CSTNode] = [found.division]
        for target in store_targets(found.total_chain + found.exp_chain):  # `s = e.sum(...)` reads `e`
            reads, line = reads_of(ctx, target), binding_line(ctx, target)
            if reads and line is not None and all(any(n is g for n in read for g in gone) for read in reads):
                fix.remove_line(line)
                gone.append(line)
        return fix
