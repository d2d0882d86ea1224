"""TNL113 probabilities-into-cross-entropy: a softmax handed to `F.cross_entropy` /
`nn.CrossEntropyLoss` (which apply their own `log_softmax`: logits expected) or to `F.nll_loss` /
`nn.NLLLoss` (log-probabilities expected).

The sites (`losses.loss_site`): the function forms under any alias, and the loss
modules called inline, through a name or an attribute (`self.criterion = nn.CrossEntropyLoss()`).
The input is a softmax as `made_by.softmax_call` sees it: inline, through names and subscripts,
a helper returning one, a model whose `Sequential` or `forward` ends in `nn.Softmax`. Not this
rule's: `log_softmax` into `cross_entropy` (measured on torch 2.13: exactly the same loss as the
logits, since log_softmax is idempotent), and `nll_loss(torch.log(F.softmax(x)))`, whose input
is log-probabilities (TNL103 log-of-softmax reports the log's underflow there). Nothing is
numerically unsafe here, the values are wrong, so code without a gradient (a validation loss)
is reported too.

Fix (UNSAFE: it changes the loss to the intended one): `cross_entropy` of an inline softmax
takes its logits (`F.cross_entropy(x, y)`); otherwise the softmax becomes `log_softmax` with its
arguments kept (`F.nll_loss(F.log_softmax(x, 1), y)`; `cross_entropy` of log-probabilities is the
same loss), at its one assignment when nothing else reads it, or recomputed at the use when what
it reads is unchanged since. No fix: a softmax without an explicit dim behind a name, one made by
a helper or a module.
"""

from __future__ import annotations

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.cross_entropy.sites import rewritten_input, source_of
from torchnumlint.rules.made_by import softmax_call
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.losses import LossSite, loss_site
from torchnumlint.rules.calls import CallMatch, OPS
from torchnumlint.rules.rewrite import renamed_call, renamed_note

CE_LOSS = ("torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss")
NLL_LOSS = ("torch.nn.NLLLoss", "torch.nn.modules.loss.NLLLoss")

_HAZARD = {
    "cross_entropy": (
        "it applies its own log_softmax, which squeezes the loss into [log(1 + (C-1)/e), log(C-1 + e)] "
        "([1.46, 2.46] for 10 classes) and shrinks its gradient"
    ),
    "nll_loss": "nll_loss of probabilities is -p[y], a negative loss that is no log-likelihood",
}
_USE = {"cross_entropy": "the logits (or `log_softmax`)", "nll_loss": "`log_softmax`"}


class ProbabilitiesIntoCrossEntropy(Rule):
    code = "TNL113"
    name = "probabilities-into-cross-entropy"
    finds = (
        "a softmax (or a model ending in `nn.Softmax`) into `cross_entropy` / `CrossEntropyLoss` / "
        "`nll_loss` / `NLLLoss`: loss squeezed, gradient far too small"
    )
    fix_summary = "unsafe: the logits / `log_softmax`"
    message = "{loss} of a softmax{made}: {hazard}; pass {use}{note}"
    rationale = (
        "`F.cross_entropy` and `nn.CrossEntropyLoss` apply `log_softmax` to their input: given "
        "probabilities they compute the cross entropy of softmax(softmax(x)), finite but wrong. "
        "With C classes the loss can only lie in [log(1 + (C-1)/e), log(C-1 + e)], [1.46, 2.46] "
        "for 10 classes, whatever the model does. Measured on torch 2.13 (CPU, 8 x 10 logits): at "
        "logits of scale 3 the loss is 2.32 where the true one is 4.50 and the gradient norm 15x "
        "too small; with one logit 30 above the rest on a wrong class the loss is 2.46 (true 30) "
        "and the largest gradient 1.1e-13 (true 1): training stalls. `F.nll_loss` expects "
        "log-probabilities; given probabilities it returns -p[y], a negative loss. Passing the "
        "logits to `cross_entropy` (or `log_softmax` to `nll_loss`) gives the intended loss; "
        "`cross_entropy(log_softmax(x))` equals `cross_entropy(x)` exactly. The fix changes the "
        "loss, so it is unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss")
    pattern = r"softmax|Softmax"
    produced = frozenset({"softmax"})  # a helper or model of the project that returns one
    needs_index = True
    examples = (
        Example(
            bad=("import torch\nimport torch.nn.functional as F\n\n\ndef ce(x, y):\n    return F.cross_entropy(F.softmax(x, dim=1), y)\n"),
            lines=(6,),
            fixed=("import torch\nimport torch.nn.functional as F\n\n\ndef ce(x, y):\n    return F.cross_entropy(x, y)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class Classifier(nn.Module):\n"
                "    def __init__(self, dim, classes):\n"
                "        super().__init__()\n"
                "        self.net = nn.Sequential(nn.Linear(dim, classes), nn.Softmax(dim=1))\n"
                "        self.criterion = nn.CrossEntropyLoss()\n"
                "\n"
                "    def training_step(self, x, y):\n"
                "        return self.criterion(self.net(x), y)\n"
            ),
            lines=(12,),
            fixed=None,
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def nll(scores, labels, w):\n"
                "    probs = scores.softmax(-1)\n"
                "    return F.nll_loss(probs, labels, weight=w)\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def nll(scores, labels, w):\n"
                "    probs = scores.log_softmax(-1)\n"
                "    return F.nll_loss(probs, labels, weight=w)\n"
            ),
        ),
    )
    good = (
        "import torch\nimport torch.nn.functional as F\n\n\ndef ce(x, y):\n    return F.cross_entropy(x, y)\n",
        # log-probabilities, and a softmax as the (soft) target
        "import torch\nimport torch.nn.functional as F\n"
        "def losses(x, y, teacher):\n"
        "    a = F.cross_entropy(F.log_softmax(x, 1), y) + F.nll_loss(x.log_softmax(1), y)\n"
        "    return a + F.cross_entropy(x, F.softmax(teacher, dim=1))\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        site = loss_site(self.ctx, node, OPS["cross_entropy"], CE_LOSS)
        loss = "cross_entropy"
        if site is None:
            site, loss = loss_site(self.ctx, node, OPS["nll_loss"], NLL_LOSS), "nll_loss"
        if site is None:
            return
        softmax = softmax_call(self.ctx, site.input.value)
        if softmax is None:
            return
        fix, note = self._fix(site, softmax, loss)
        made = f" (made by `{self.ctx.module.code_for_node(softmax.call.func)}`)" if softmax.form == "producer" else ""
        self.report(node, fix, loss=loss, made=made, hazard=_HAZARD[loss], use=_USE[loss], note=note)

    def _fix(self, site: LossSite, softmax: CallMatch, loss: str):
        """The input as the logits (an inline softmax into cross_entropy) or as `log_softmax`;
        (None, "") where the softmax is out of reach."""
        inp = site.input.value
        found = source_of(self.ctx, inp, "softmax")
        if found is None or found[0].call is not softmax.call:
            return None, ""
        chain = found[1]
        fix = self.fix()
        if loss == "cross_entropy" and not chain and set(softmax.args) <= {"dim"}:
            fix.replace(inp, strip_parens(softmax.input))
            return fix, ""
        if not softmax.given("dim"):
            return None, ""
        parts = [softmax.input] + [a.value for a in softmax.args.values()]
        new, renamed = rewritten_input(fix, inp, chain, lambda f: renamed_call(f, softmax, "log_softmax"), parts, False)
        if new is None:
            return None, ""
        fix.replace(inp, new)
        return fix, renamed_note(renamed)
