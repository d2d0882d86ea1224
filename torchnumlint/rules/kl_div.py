"""TNL1xx, KL divergence: `F.kl_div` / `nn.KLDivLoss` called with probabilities where PyTorch
expects log-probabilities, or a probability target whose zeros poison the gradient."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.guards import is_detached, module_call, softmax_call
from torchnumlint.rules.names import is_literal, match_call
from torchnumlint.rules.rewrite import renamed_call, with_keyword

_KLDIV_LOSS = ("torch.nn.KLDivLoss", "torch.nn.modules.loss.KLDivLoss")


@dataclass
class KlSite:
    """One KL-divergence call, in function form or through an `nn.KLDivLoss` instance."""

    call: cst.Call
    input: cst.Arg
    target: cst.Arg
    log_target: Optional[cst.BaseExpression]
    ctor: Optional[cst.Call]  # the nn.KLDivLoss(...) constructor, for the module form
    opaque: bool  # *args / **kwargs: arguments we cannot see

    @property
    def inline(self) -> bool:
        """Whether a fix can rewrite every argument: function form, or an inline constructor."""
        return not self.opaque and (self.ctor is None or self.call.func is self.ctor)


def kl_site(ctx, call: cst.Call) -> Optional[KlSite]:
    match = match_call(ctx.imports, call, "kl_div")
    if match is not None:
        if "target" not in match.args:
            return None
        arg0 = next(a for a in call.args if a.value is match.input)
        return KlSite(call, arg0, match.args["target"], match.arg("log_target"), None, not match.fully_known)
    ctor = module_call(ctx, call, *_KLDIV_LOSS)
    if ctor is None:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    named = {a.keyword.value: a for a in call.args if a.keyword is not None}
    inp = positional[0] if positional else named.get("input")
    target = positional[1] if len(positional) > 1 else named.get("target")
    if inp is None or target is None:
        return None
    log_target = next((a.value for a in ctor.args if a.keyword is not None and a.keyword.value == "log_target"), None)
    opaque = any(a.star for a in call.args) or any(a.star for a in ctor.args)
    return KlSite(call, inp, target, log_target, ctor, opaque)


def _to_log_softmax(ctx, fix, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`value` (a softmax) rewritten to `log_softmax`. Through a name, the assignment itself is
    rewritten, and only when nothing else reads the name (nested functions included); then `value`
    itself comes back. None when no rewrite is safe."""
    direct = match_call(ctx.imports, value, "softmax")
    if direct is not None:
        return renamed_call(fix, direct, "log_softmax")
    binding = ctx.binding(value)
    if binding is None or not binding.rewritable:
        return None
    match = match_call(ctx.imports, binding.value, "softmax")
    if match is None or not ctx.only_read_here(value):
        return None
    fix.replace(binding.value, renamed_call(fix, match, "log_softmax"))
    return value


class KlDivProbTarget(Rule):
    code = "TNL101"
    name = "kl-div-prob-target"
    message = (
        "`kl_div` target is a softmax that carries gradients: where it underflows to 0 the "
        "gradient of its logits is NaN; use `log_softmax` and `log_target=True`"
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
                "def consistency(student, teacher, T=2.0):\n"
                "    p = (teacher / T).softmax(-1)\n"
                '    crit = nn.KLDivLoss(reduction="batchmean")\n'
                "    return crit(torch.log_softmax(student / T, -1), p) * T * T\n"
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
        site = kl_site(self.ctx, node)
        if site is None or not (site.log_target is None or is_literal(site.log_target, "False")):
            return
        target = site.target.value
        if softmax_call(self.ctx, target) is None or self.ctx.in_no_grad() or is_detached(self.ctx, target):
            return
        fix = None
        if site.inline:
            fix = self.fix()
            new_target = _to_log_softmax(self.ctx, fix, target)
            if new_target is None:
                fix = None
            else:
                args = [a.with_changes(value=new_target) if a is site.target else a for a in node.args]
                new = node.with_changes(args=args)
                if site.ctor is None:
                    new = with_keyword(new, "log_target", cst.Name("True"))
                else:
                    new = new.with_changes(func=with_keyword(site.ctor, "log_target", cst.Name("True")))
                fix.replace(node, new)
        self.report(target, fix)


class KlDivProbInput(Rule):
    code = "TNL102"
    name = "kl-div-prob-input"
    message = "`kl_div` input must be log-probabilities, not a softmax: use `log_softmax`"
    rationale = (
        "PyTorch's `kl_div(input, target)` expects `input` to hold log-probabilities (unlike the "
        "mathematical KL(P||Q) notation). Passing probabilities from `softmax` gives a loss and a "
        "gradient that are silently wrong: nothing NaNs, training just optimises the wrong "
        "objective. `log_softmax` computes the intended log-probabilities stably. The fix changes "
        "the loss value, so it is unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("kl_div", "KLDivLoss")
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def kl_loss(a, target):\n"
                '    return F.kl_div(F.softmax(a, dim=-1), target, reduction="batchmean")\n'
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def kl_loss(a, target):\n"
                '    return F.kl_div(F.log_softmax(a, dim=-1), target, reduction="batchmean")\n'
            ),
        ),
    )
    good = (
        "import torch.nn.functional as F\n"
        "def kl_loss(a, target):\n"
        '    return F.kl_div(F.log_softmax(a, dim=-1), target, reduction="batchmean")\n',
    )

    def visit_Call(self, node: cst.Call) -> None:
        site = kl_site(self.ctx, node)
        if site is None or softmax_call(self.ctx, site.input.value) is None:
            return
        fix = None
        if not site.opaque:
            fix = self.fix()
            new_input = _to_log_softmax(self.ctx, fix, site.input.value)
            if new_input is None:
                fix = None
            elif new_input is not site.input.value:
                fix.replace(site.input.value, new_input)
        self.report(site.input.value, fix)
