"""TNL115 sigmoid-into-logits-loss: `F.binary_cross_entropy_with_logits` / `nn.BCEWithLogitsLoss`
given a sigmoid's probabilities, the opposite mistake of TNL105 (bce-on-sigmoid).

The loss applies a sigmoid of its own, so it computes the cross entropy of sigmoid(sigmoid(z)):
the probabilities it sees lie in (0.5, 0.73) for z > 0 and (0.27, 0.5) for z < 0, the loss of
any example is squeezed into [0.31, 1.31], and a confident mistake (a positive at z = -30) costs
0.693 instead of 30, with a gradient of 4.7e-14 instead of 1: the model stops learning without a
NaN or a warning. The sites are TNL105's (`losses.loss_site`: the function form under any alias,
an `nn.BCEWithLogitsLoss` called inline, through a name or an attribute set in `__init__`), and
the sigmoid is `made_by.sigmoid_call`'s (inline, through names and subscripts, a helper or a
model ending in `nn.Sigmoid()`). Unlike TNL105 this is reported in evaluation code too: the loss
value itself is wrong there, not only its gradient.

Fix (UNSAFE: the loss changes everywhere, to the right value): pass the logits `z` in place of
`sigmoid(z)`, every other argument kept (`pos_weight`, `weight`, `reduction`), only where the
logits are in reach (an inline sigmoid, or a local name bound once to one: recomputed at the use
when the logits are plain, the assignment rewritten when nothing else reads it); a sigmoid made
by a helper or a model is reported without a fix. The input is the only argument rewritten, so
a loss module kept in an attribute is fixed at its call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.cross_entropy.sites import rewritten_input, source_of
from torchnumlint.rules.made_by import sigmoid_call
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.losses import LossSite, loss_site
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import CallMatch, make_op

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FixBuilder

BCE_WITH_LOGITS = make_op(
    "binary_cross_entropy_with_logits",
    {"torch.nn.functional.binary_cross_entropy_with_logits"},
    None,
    ("target", "weight", "size_average", "reduce", "reduction", "pos_weight"),
)
BCE_WITH_LOGITS_LOSS = ("torch.nn.BCEWithLogitsLoss", "torch.nn.modules.loss.BCEWithLogitsLoss")


class SigmoidIntoLogitsLoss(Rule):
    code = "TNL115"
    name = "sigmoid-into-logits-loss"
    finds = (
        "`F.binary_cross_entropy_with_logits` / `nn.BCEWithLogitsLoss` on a sigmoid (inline, names, "
        "`self.criterion`, helpers, models ending in `nn.Sigmoid`): a second sigmoid squeezes the "
        "loss into [0.31, 1.31]; a positive at z = -30 gets gradient 4.7e-14 instead of 1"
    )
    fix_summary = "unsafe: pass the logits"
    message = (
        "`{loss}` of a sigmoid{made}: the loss applies its own sigmoid, so every loss lies in "
        "[0.31, 1.31] and a confident mistake barely moves the model (a positive at z = -30: loss "
        "0.693 instead of 30, gradient 4.7e-14 instead of 1); pass the logits{note}"
    )
    rationale = (
        "`F.binary_cross_entropy_with_logits` and `nn.BCEWithLogitsLoss` apply a sigmoid to their "
        "input. Given `torch.sigmoid(z)`, they compute the cross entropy of sigmoid(sigmoid(z)), "
        "whose probabilities stay within (0.27, 0.73). Measured on torch 2.13, CPU: the loss of "
        "any example lies in [0.313, 1.313] (label 1: softplus(-p), label 0: softplus(p), p in "
        "(0, 1)); a positive at z = -30 gets loss 0.693 instead of 30 and a gradient of "
        "-4.68e-14 instead of -1.0 in float32 (exactly 0 in float16). Nothing is NaN and nothing "
        "warns: learning stalls silently. Passing the logits gives the intended loss; the fix "
        "changes the values everywhere (the original is wrong everywhere), hence unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("binary_cross_entropy_with_logits", "BCEWithLogitsLoss")
    pattern = r"sigmoid|Sigmoid|expit"
    produced = frozenset({"sigmoid"})  # a helper or model of the project that returns one
    needs_index = True
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def multilabel_loss(z, y):\n"
                "    return F.binary_cross_entropy_with_logits(torch.sigmoid(z), y)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def multilabel_loss(z, y):\n"
                "    return F.binary_cross_entropy_with_logits(z, y)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class Detector(nn.Module):\n"
                "    def __init__(self, dim):\n"
                "        super().__init__()\n"
                "        self.head = nn.Sequential(nn.Linear(dim, 1), nn.Sigmoid())\n"
                "        self.criterion = nn.BCEWithLogitsLoss()\n"
                "\n"
                "    def forward(self, h, labels):\n"
                "        return self.criterion(self.head(h), labels)\n"
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
                "def objectness_loss(obj_logits, obj_target, pos_w):\n"
                "    obj = obj_logits.sigmoid()\n"
                '    loss = F.binary_cross_entropy_with_logits(obj, obj_target, pos_weight=pos_w, reduction="sum")\n'
                "    return loss, obj > 0.5\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def objectness_loss(obj_logits, obj_target, pos_w):\n"
                "    obj = obj_logits.sigmoid()\n"
                '    loss = F.binary_cross_entropy_with_logits(obj_logits, obj_target, pos_weight=pos_w, reduction="sum")\n'
                "    return loss, obj > 0.5\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "\n"
        "\n"
        "def multilabel_loss(z, y):\n"
        "    return F.binary_cross_entropy_with_logits(z, y)\n",
        # a sigmoid as the target (distillation from a teacher's probabilities) is right
        "import torch\nimport torch.nn.functional as F\n"
        "def distill(student_logits, teacher_logits):\n"
        "    return F.binary_cross_entropy_with_logits(student_logits, torch.sigmoid(teacher_logits))\n",
        # the probabilities go to the loss that expects them
        "import torch\nimport torch.nn.functional as F\n"
        "def bce(z, y):\n"
        "    p = torch.sigmoid(z).clamp(1e-6, 1 - 1e-6)\n"
        "    return F.binary_cross_entropy(p, y)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        site = loss_site(self.ctx, node, BCE_WITH_LOGITS, BCE_WITH_LOGITS_LOSS)
        if site is None:
            return
        sigmoid = sigmoid_call(self.ctx, site.input.value)
        if sigmoid is None:
            return
        fix, note = self._fix(site, sigmoid)
        made = f" (made by `{self.ctx.module.code_for_node(sigmoid.call.func)}`)" if sigmoid.form == "producer" else ""
        loss = "BCEWithLogitsLoss" if site.ctor is not None else "binary_cross_entropy_with_logits"
        self.report(node, fix, loss=loss, made=made, note=note)

    def _fix(self, site: LossSite, sigmoid: CallMatch) -> "Tuple[Optional[FixBuilder], str]":
        """The call on the logits, or (None, "") where the logits are out of reach."""
        if any(a.star for a in site.call.args):
            return None, ""
        inp = site.input.value
        found = source_of(self.ctx, inp, "sigmoid")
        if found is None or found[0].call is not sigmoid.call:
            return None, ""
        logits = strip_parens(sigmoid.input)
        fix = self.fix()
        new_input, renamed = rewritten_input(fix, inp, found[1], lambda _: logits, [logits], is_plain(logits))
        if new_input is None:
            return None, ""
        fix.replace(inp, new_input)
        return fix, f" (the fix makes `{renamed}` hold the logits)" if renamed else ""
