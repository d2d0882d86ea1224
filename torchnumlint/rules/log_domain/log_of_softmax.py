"""TNL103 log-of-softmax: `log(softmax(x))`, whose probabilities underflow to exactly 0 (and the
log to -inf) long before the log-probabilities stop being finite.

A softmax is what `made_by.softmax_call` recognises (any alias, the method form, through names),
or one written by hand (`log_domain.handwritten.hand_softmax`: `exp(x) / exp(x).sum(d,
keepdim=True)`, max-subtracted or not). The log of a sum of its selected entries
(`log(p[:, pos_idx].sum(-1))`, `log((p * pos_mask).sum(-1))`: `log_domain.selected_sums`) is
-inf once every selected one underflows, or when nothing is selected. What the -inf is used
for (`uses.uses_of`) decides the message, and silence where it is only ranked without a gradient.

Evidence for the spread (`magnitudes.magnitude`): a probability is exactly 0 only past a spread
of ~104 in float32 (measured: 103.97 for 2 classes, 93.60 for 32000), which logits reach and
data scores do not. A softmax of a learned map's output (a submodule, a linear layer, a matrix
product, or a parameter its project callers pass one) is reported naming it; a softmax of data
of the batch (a sentence score read from `sample["target"]`, soft labels shipped with the batch,
on every way the value comes and at every caller seen) only in strict mode. A value of unknown
origin is reported: the softmax whose log is taken is a model's prediction in training code.

Fixes (placed by `rewrite.at_source`): `F.log_softmax(x, d)` inline; through a name
`p = F.softmax(x, d)` read only by this log, the assignment becomes `p = F.log_softmax(x, d)`;
read elsewhere too (entropy `p * torch.log(p)`), the log becomes `F.log_softmax(x, d)` when `x`
and `d` are plain and unchanged since; `F.nll_loss(torch.log(F.softmax(x, 1)), y)` becomes
`F.cross_entropy(x, y)`. No fix: a softmax without an explicit dim, one reached through an
attribute or helper, a max-subtracted hand-written one (its exp's input is not the logits).
A sum of entries picked by an index or `gather` becomes `log_softmax(x, d)[sel].logsumexp(dim)`
(exact; -inf in both for an empty pick); one picked by a mask is named, with advice only.
"""

from __future__ import annotations

from typing import Callable, Optional, Set

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.gradient_context import gradient_free, is_detached
from torchnumlint.rules.log_domain.handwritten import ExpNormalisation, hand_softmax, softmax_like
from torchnumlint.rules.log_domain.selected_sums import SelectedSum, softmax_sum
from torchnumlint.rules.log_domain.sites import LogRule, LogSite, chain, recognised, store_targets
from torchnumlint.rules.made_by import softmax_call
from torchnumlint.rules.magnitudes import magnitude
from torchnumlint.rules.rewrite import Build, renamed_call, renamed_func, with_input
from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.test_code import STRICT_IN_TESTS, in_test_code
from torchnumlint.rules.uses import only_ranked, uses_of

# What a finding on a softmax of data says in strict mode.
STRICT_DATA = "strict mode: the softmax's input is data of the batch, not logits; no evidence that its spread passes ~104"


def _log_softmax_builder(match: CallMatch) -> Build:
    def build(fix) -> Optional[cst.BaseExpression]:
        return strip_parens(renamed_call(fix, match, "log_softmax"))

    return build


def _hand_builder(hand: ExpNormalisation) -> Build:
    """`F.log_softmax(x, d)` for `exp(x) / exp(x).sum(d, keepdim=True)`, `d` passed as it was."""

    def build(fix) -> Optional[cst.BaseExpression]:
        return softmax_like(fix, hand, "torch.nn.functional.log_softmax")

    return build


class LogOfSoftmax(LogRule):
    code = "TNL103"
    name = "log-of-softmax"
    finds = (
        "`torch.log(F.softmax(x, d))`, `.softmax(d).log()`, `nll_loss(log(softmax))`, entropy of a softmax, "
        "log of a sum of selected softmax entries (`p[:, idx].sum(-1)`, `(p * mask).sum(-1)`)"
    )
    fix_summary = "safe: `log_softmax` / `cross_entropy`"
    message = "log of a softmax {hazard}; use {use}{note}"
    rationale = (
        "`softmax` rounds probabilities below the smallest subnormal to exactly 0, and the log of "
        "those is -inf: a loss built from it (`nll_loss`, a sum of log-likelihoods) is Inf, a "
        "product with it (`0 * log 0` in an entropy or with one-hot targets) is NaN in the forward "
        "pass, and the gradient is NaN either way. Measured on torch 2.13 (CPU): a probability is "
        "exactly 0 from a logit spread of 104.0 in float32, 17.3 in float16 and 92.8 in bfloat16 "
        "(two classes; with 32000 classes 93.6, 7.0 and 82.8), spreads that saturated or "
        "diverging models reach. `log_softmax` computes `x - logsumexp(x)` directly and stays "
        "finite at any spread; `F.nll_loss(torch.log(F.softmax(x, 1)), y)` is exactly "
        "`F.cross_entropy(x, y)`. The fix keeps the dim and dtype the user passed; a softmax "
        "without an explicit dim (deprecated, its dim is guessed) is reported without a fix. "
        "A softmax of data of the batch (scores, soft labels: bounded, not logits) is reported only in strict mode. "
        "Log-probabilities that are only ranked (`topk`, `argmax`, `sort`, beam scores) where no "
        "gradient flows are left alone: an -inf there ranks last, as it should."
        " In test code (a `tests/` folder of the project, `test_*.py`, `*_test.py`, `conftest.py`) "
        "it is strict-mode only: a test's model trains for a few steps and never spreads its logits by ~104."
    )
    safety = Safety.SAFE
    needles = ("softmax", "Softmax", "exp")
    pattern = r"softmax|Softmax|\bexp\b"  # a softmax (an nn.Softmax module), or an exp a hand-written one divides
    produced = frozenset({"softmax"})  # a helper of the project that returns one
    needs_index = True
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def log_probs(logits):\n"
                "    return torch.log(F.softmax(logits, dim=-1))\n"
            ),
            lines=(6,),
            fixed=("import torch\nimport torch.nn.functional as F\n\n\ndef log_probs(logits):\n    return F.log_softmax(logits, dim=-1)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def loss_fn(logits, labels, w):\n"
                "    return nn.functional.nll_loss(\n"
                "        torch.log(nn.functional.softmax(logits, 1)),\n"
                "        labels,\n"
                "        weight=w,\n"
                '        reduction="sum",\n'
                "    )\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def loss_fn(logits, labels, w):\n"
                "    return nn.functional.cross_entropy(\n"
                "        logits,\n"
                "        labels,\n"
                "        weight=w,\n"
                '        reduction="sum",\n'
                "    )\n"
            ),
        ),
        Example(
            bad=("import torch\n\n\ndef entropy(logits, T):\n    p = (logits / T).softmax(-1)\n    return -(p * p.log()).sum(-1)\n"),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def entropy(logits, T):\n"
                "    p = (logits / T).softmax(-1)\n"
                "    return -(p * (logits / T).log_softmax(-1)).sum(-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def soft_ce(x, onehot):\n"
                "    return -(onehot * torch.log(F.softmax(x))).sum(1).mean()\n"
            ),
            lines=(6,),
            fixed=None,
        ),
    )
    good = (
        # guarded: + eps, clamp_min, clamp(min=)
        "import torch\nimport torch.nn.functional as F\n"
        "def f(x, eps=1e-8):\n"
        "    a = torch.log(F.softmax(x, -1) + eps)\n"
        "    b = F.softmax(x, -1).clamp_min(1e-6).log()\n"
        "    return a + b + torch.log(torch.clamp(F.softmax(x, -1), min=eps))\n",
        # already stable; and logs that are not torch's
        "import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
        "def f(x, n):\n"
        "    return F.log_softmax(x, -1) + torch.log(F.log_softmax(x, -1).exp()) + math.log(n) + np.log(n)\n",
        # Lightning's self.log with arguments is logging, not a logarithm
        "import torch.nn.functional as F\n"
        "class M:\n"
        "    def training_step(self, x):\n"
        "        p = F.softmax(x, -1)\n"
        '        self.log("p", p)\n'
        "        return p\n",
        # a name assigned twice (guarded in between) is not followed
        "import torch\ndef f(x):\n    p = torch.softmax(x, -1)\n    p = p + 1e-8\n    return torch.log(p)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        inp = self.log_input(node)
        if inp is None:
            return
        selected = softmax_sum(self.ctx, inp)
        if selected is not None:
            self._selected(node, selected)
            return
        site = self._site(node, inp)
        if site is None:
            return
        uses = uses_of(self.ctx, self.ctx.stack)
        if only_ranked(self.ctx, uses):
            return
        spread = self._spread(site.logits)
        if spread is None:
            return
        fix = self._cross_entropy_fix(node, site)
        use, note = "`cross_entropy` on the logits", ""
        if fix is None:
            use = "`log_softmax`"
            fix, note = self.fix_for(site)
        self.report(node, fix, hazard=self._hazard(uses, site.logits) + spread, use=use, note=note)

    def _spread(self, logits: cst.BaseExpression) -> Optional[str]:
        """The evidence for the spread the hazard needs, as a clause ("" where none is named);
        None where the softmax's input is data of the batch (a score, a label distribution:
        bounded, not logits that training drives apart) or the file is a test's (`test_code`),
        and the run is not strict."""
        if in_test_code(self.ctx):
            return f" ({STRICT_IN_TESTS})" if self.ctx.strict else None
        found = magnitude(self.ctx, logits)
        if found.learned is not None:
            return f" (the softmax's input is {found.learned})"
        if found.data:
            return f" ({STRICT_DATA})" if self.ctx.strict else None
        return ""

    def _selected(self, node: cst.Call, selected: SelectedSum) -> None:
        """The log of a sum of selected softmax entries: -inf once each selected one underflows,
        or when nothing is selected; fixed as `logsumexp` of the selected log-probabilities."""
        ctx = self.ctx
        match, plain = recognised(ctx, selected.probs, softmax_call, "softmax")
        if match is None or only_ranked(ctx, uses_of(ctx, ctx.stack)):
            return
        spread = self._spread(match.input)
        if spread is None:
            return
        build = _log_softmax_builder(match) if plain and match.given("dim") and selected.rewritable else None
        parts = [match.input] + [a.value for a in match.args.values()]
        core = selected.probs
        site = LogSite(node, core, chain(ctx, core), match.input, build, parts, selected.log_space, match)
        fix, note = self.fix_for(site)
        gradient = "" if gradient_free(ctx) or is_detached(ctx, match.input) else ", its gradient NaN"
        hazard = (
            f"summed over {selected.selection} is -inf once every selected probability underflows to 0 "
            f"(a logit spread above ~104 in fp32, ~17 in fp16) or none is selected{gradient}{spread}"
        )
        use = "`logsumexp` of the selected `log_softmax` entries (`F.log_softmax(x, d)[sel].logsumexp(d)`"
        if selected.reselect is None:
            use += "; for a boolean mask `.masked_fill(~mask, float('-inf')).logsumexp(d)`, -inf as well where the mask is all false"
        self.report(node, fix, hazard=hazard, use=use + ")", note=note)

    def _hazard(self, uses: Set[str], logits: cst.BaseExpression) -> str:
        """The measured consequence for this use of the -inf: NaN in a product, Inf in a loss;
        the gradient is named only where one can flow to the logits."""
        no_gradient = gradient_free(self.ctx) or is_detached(self.ctx, logits)
        if "product" in uses:
            where = "the forward pass" if no_gradient else "the forward pass and the gradient"
            return f"is -inf once a probability underflows to 0, and 0 * -inf = NaN in {where}"
        if "loss" in uses:
            return "makes the loss Inf once a probability underflows to 0 (logit spread > ~104 in fp32, ~17 in fp16)"
        if no_gradient:
            return "is -inf once a probability underflows to 0 (then NaN in 0 * log 0)"
        return "is -inf once a probability underflows to 0 (then NaN in 0 * log 0 and in the gradient)"

    def _site(self, node: cst.Call, inp: cst.BaseExpression) -> Optional[LogSite]:
        ctx = self.ctx
        core = strip_parens(inp)
        wrap: Optional[Callable[[cst.BaseExpression], cst.BaseExpression]] = None
        if isinstance(core, cst.Subscript):
            subscript = core
            core, wrap = subscript.value, (lambda new: subscript.with_changes(value=new))
        else:
            # `probs.gather(1, a)`: log(gather(p)) == gather(log p) exactly
            gather = match_call(ctx.imports, core, "gather")
            if gather is not None and gather.fully_known:
                core, wrap = gather.input, (lambda new: with_input(gather, new))
        match, plain = recognised(ctx, core, softmax_call, "softmax")
        if match is not None:
            build = _log_softmax_builder(match) if plain and match.given("dim") else None
            parts = [match.input] + [a.value for a in match.args.values()]
            return LogSite(node, core, chain(ctx, core), match.input, build, parts, wrap, match)
        hand = hand_softmax(ctx, core)
        if hand is None:
            return None
        dim = hand.dim.value  # type: ignore[union-attr]  # a hand softmax has its dim (`hand_softmax`)
        build = None if hand.shifted or isinstance(dim, (cst.Tuple, cst.List)) else _hand_builder(hand)
        followed = hand.exp_chain + hand.total_chain
        if followed and not ctx.unchanged_since([hand.logits], followed):
            build = None
        parts = [hand.logits, dim]
        return LogSite(node, core, chain(ctx, core), hand.logits, build, parts, wrap, unread=store_targets(followed))

    def _cross_entropy_fix(self, node: cst.Call, site: LogSite):
        """`F.nll_loss(torch.log(F.softmax(x, 1)), y, ...)` -> `F.cross_entropy(x, y, ...)`: the same
        loss exactly when the softmax is over dim 1 (the class dim of cross_entropy) with no other
        argument, and nll_loss's arguments are all visible (cross_entropy takes them all)."""
        stack = self.ctx.stack
        if site.wrap is not None or len(stack) < 3:
            return None
        arg, parent = stack[-2], stack[-3]
        if not isinstance(arg, cst.Arg) or arg.value is not node or not isinstance(parent, cst.Call):
            return None
        nll = match_call(self.ctx.imports, parent, "nll_loss")
        if nll is None or nll.input is not node or not nll.fully_known:
            return None
        softmax = site.source
        if softmax is None or site.build is None:
            return None
        dim = softmax.arg("dim")
        if set(softmax.args) != {"dim"} or not softmax.fully_known:
            return None
        if not isinstance(dim, cst.Integer) or number_value(dim) != 1:
            return None
        if site.chain:
            core = strip_parens(site.core)
            if self.ctx.only_read_here(core):
                return None  # the log-softmax assignment rewrite leaves no dead softmax behind
            if not self.ctx.unchanged_since([softmax.input, dim], site.chain):
                return None
        fix = self.fix()
        logits = strip_parens(softmax.input)
        args = [a.with_changes(value=logits) if a is arg else a for a in parent.args]
        fix.replace(parent, parent.with_changes(func=renamed_func(fix, nll, "cross_entropy"), args=args))
        return fix
