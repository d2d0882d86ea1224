"""TNL102 kl-div-prob-input: a KL divergence whose input is a softmax.

PyTorch's `kl_div(input, target)` wants log-probabilities as its input; probabilities give a
wrong loss and gradient without any NaN. Sites come from `losses.kl_site`; the (unsafe) fix is
`rewrite.to_log_softmax`, at the call or the one assignment of the softmax.
"""

from __future__ import annotations

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.made_by import softmax_call
from torchnumlint.rules.losses import kl_site
from torchnumlint.rules.rewrite import renamed_note, to_log_softmax


class KlDivProbInput(Rule):
    code = "TNL102"
    name = "kl-div-prob-input"
    finds = "`F.kl_div(F.softmax(a, d), ...)`: input must be log-probabilities"
    fix_summary = "unsafe: `log_softmax`"
    message = "`kl_div` input must be log-probabilities, not a softmax: use `log_softmax`{note}"
    rationale = (
        "PyTorch's `kl_div(input, target)` expects `input` to hold log-probabilities (unlike the "
        "mathematical KL(P||Q) notation). Passing probabilities from `softmax` gives a loss and a "
        "gradient that are silently wrong: nothing NaNs, training just optimises the wrong "
        "objective. `log_softmax` computes the intended log-probabilities stably. The fix changes "
        "the loss value, so it is unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("kl_div", "KLDivLoss")
    needs_index = True  # an input from a helper of another module (`rules/producers.py`)
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
        fix, renamed = None, None
        if not site.opaque:
            fix = self.fix()
            new_input, renamed = to_log_softmax(fix, site.input.value)
            if new_input is None:
                fix = None
            elif new_input is not site.input.value:
                fix.replace(site.input.value, new_input)
        self.report(site.input.value, fix, note=renamed_note(renamed))
