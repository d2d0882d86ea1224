"""TNL101 kl-div-prob-target: a KL divergence whose target is a softmax that carries gradients.

`xlogy`'s backward evaluates log(target), so a target probability that underflows to 0 turns its
logits' gradient row NaN while the loss stays finite. Sites and the no-gradient evidence
(teachers, callers that detach) come from `losses`; the fix goes where `rewrite.at_source` puts
it (the call, or the one assignment of the softmax).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.made_by import softmax_call
from torchnumlint.rules.losses import kl_site, target_gradient
from torchnumlint.rules.rewrite import renamed_note, to_log_softmax, with_keyword


class KlDivProbTarget(Rule):
    code = "TNL101"
    name = "kl-div-prob-target"
    finds = (
        "`F.kl_div(inp, F.softmax(b, d))` / `nn.KLDivLoss` with a softmax target that carries "
        "gradients: NaN gradient once it underflows (vocab 32000: spread 93.6 fp32, 7.0 fp16)"
    )
    fix_summary = "safe: `log_softmax` + `log_target=True`"
    message = (
        "`kl_div` target is a softmax that carries gradients{why}: where it underflows to 0 the "
        "gradient of its logits is NaN; use `log_softmax` and `log_target=True`{note}"
    )
    rationale = (
        "`F.kl_div(input, target)` computes `target * (log(target) - input)` with `xlogy`, whose "
        "backward with respect to the target evaluates log(target). When the target is a softmax "
        "that still carries gradients (self-distillation, consistency or mutual-learning losses), "
        "any probability that underflows to exactly 0 makes the whole gradient row of its logits "
        "NaN, although the forward loss stays finite. With a vocabulary of 32000 this happens at a "
        "logit spread of 93.6 in float32, 83 in bfloat16 and only 7.0 in float16. Passing the "
        "target as `log_softmax` with `log_target=True` computes the same loss from "
        "log-probabilities, which never underflow to -inf at those spreads."
    )
    safety = Safety.SAFE
    needles = ("kl_div", "KLDivLoss")
    needs_index = True  # a target from a helper of another module (`rules/producers.py`)
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def distill_loss(s1, s2):\n"
                '    return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")\n'
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def distill_loss(s1, s2):\n"
                '    return F.kl_div(F.log_softmax(s1, dim=-1), F.log_softmax(s2, dim=-1), reduction="batchmean", log_target=True)\n'
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def consistency(noisy, clean, T=2.0):\n"
                "    p = (clean / T).softmax(-1)\n"
                '    crit = nn.KLDivLoss(reduction="batchmean")\n'
                "    return crit(torch.log_softmax(noisy / T, -1), p) * T * T\n"
            ),
            lines=(8,),
            fixed=None,
        ),
        Example(
            bad=(
                "from torch import nn\n"
                "from torch.nn.functional import kl_div, log_softmax, softmax\n"
                "\n"
                "\n"
                "def mutual(a, b):\n"
                "    q = softmax(b, dim=1)\n"
                '    loss = kl_div(log_softmax(a, dim=1), q, reduction="batchmean")\n'
                '    loss2 = nn.KLDivLoss(reduction="batchmean")(log_softmax(b, dim=1), a.softmax(1))\n'
                "    return loss + loss2\n"
            ),
            lines=(7, 8),
            fixed=(
                "from torch import nn\n"
                "from torch.nn.functional import kl_div, log_softmax, softmax\n"
                "\n"
                "\n"
                "def mutual(a, b):\n"
                "    q = log_softmax(b, dim=1)\n"
                '    loss = kl_div(log_softmax(a, dim=1), q, reduction="batchmean", log_target=True)\n'
                '    loss2 = nn.KLDivLoss(reduction="batchmean", log_target=True)(log_softmax(b, dim=1), a.log_softmax(1))\n'
                "    return loss + loss2\n"
            ),
        ),
    )
    good = (
        # the target carries no gradient: detached, or computed under no_grad
        "import torch.nn.functional as F\n"
        "def kd(s, t):\n"
        '    return F.kl_div(F.log_softmax(s, -1), F.softmax(t, -1).detach(), reduction="batchmean")\n',
        "import torch\nimport torch.nn.functional as F\n"
        "def kd(s, x, teacher):\n"
        "    with torch.no_grad():\n"
        "        p = F.softmax(teacher(x), -1)\n"
        '    return F.kl_div(F.log_softmax(s, -1), p, reduction="batchmean")\n',
        "import torch.nn.functional as F\n"
        "def kd(s, t):\n"
        '    return F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), reduction="batchmean", log_target=True)\n',
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        site = kl_site(ctx, node)
        if site is None or not site.log_target_false:
            return
        target = site.target.value
        softmax = softmax_call(ctx, target)
        if softmax is None:
            return
        why = target_gradient(ctx, target, softmax.input, site.input.value)
        if why is None:
            return
        fix, renamed = None, None
        if site.inline:
            fix = self.fix()
            new_target, renamed = to_log_softmax(fix, target)
            if new_target is None:
                fix = None
            else:
                args = [a.with_changes(value=new_target) if a is site.target else a for a in node.args]
                new = node.with_changes(args=args)
                if site.ctor is None:
                    new = _with_log_target(new, site.log_target)
                else:
                    new = new.with_changes(func=_with_log_target(site.ctor, site.log_target))
                fix.replace(node, new)
        self.report(target, fix, why=why, note=renamed_note(renamed))


def _with_log_target(call: cst.Call, given: Optional[cst.Arg]) -> cst.Call:
    """`call` with `log_target=True`: in the argument the user passed (positional or keyword),
    else as a new keyword."""
    if given is None:
        return with_keyword(call, "log_target", cst.Name("True"))
    return call.with_changes(args=[a.with_changes(value=cst.Name("True")) if a is given else a for a in call.args])
