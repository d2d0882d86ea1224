"""TNL402 label-smoothing-inf-logits: `F.cross_entropy(..., label_smoothing=s)` or an
`nn.CrossEntropyLoss(label_smoothing=s)` instance (inline, local, attribute, module-level:
`losses.loss_site`) with s > 0, on logits that were filled with `-inf` (through
names, in place, additive masks, a `log_softmax` of them: `masking.fills.inf_fills`).

Label smoothing adds s/C times `-log p` of EVERY class to the loss, and `-log p` of a class
filled with `-inf` is inf: the loss of that row is inf, whatever the mask looks like (one masked
class is enough, so causal and top-k masks, which never cover a whole row, are hazards here).
Without smoothing only the target class's `-log p` is read and the loss is finite.

The smoothing is read where it is written: a literal, or a name every way of which is 0 (left
alone). A value the code does not show (`args.label_smoothing`, a parameter, a constructor
argument that is not a literal) is reported, saying that it is so whenever it is above 0: the
option exists to be turned on, and then every step's loss is inf.

A GUIDE rule: the cure, smoothing over the valid classes only (or a finite fill, whose bias grows
with its size), is the user's to write.
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.ways import every_way
from torchnumlint.rules.losses import LossSite, loss_site
from torchnumlint.rules.masking.fills import inf_fills
from torchnumlint.rules.calls import OPS

CE_LOSS = ("torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss")
# nn.CrossEntropyLoss(weight, size_average, ignore_index, reduce, reduction, label_smoothing)
_CTOR_POSITION = 5


def _smoothing_arg(site: LossSite) -> Optional[cst.BaseExpression]:
    """The `label_smoothing` the user passed: to the call, or to the module's constructor."""
    if site.match is not None:
        return site.match.arg("label_smoothing")
    assert site.ctor is not None
    named = [a.value for a in site.ctor.args if a.keyword is not None and a.keyword.value == "label_smoothing"]
    positional = [a.value for a in site.ctor.args if a.keyword is None and not a.star]
    if named:
        return named[0]
    return positional[_CTOR_POSITION] if len(positional) > _CTOR_POSITION else None


def _literal(expr: cst.CSTNode) -> Optional[float]:
    expr = strip_parens(expr) if isinstance(expr, cst.BaseExpression) else expr
    return number_value(expr) if isinstance(expr, cst.BaseExpression) else None


class LabelSmoothingInfLogits(Rule):
    code = "TNL402"
    name = "label-smoothing-inf-logits"
    finds = "`cross_entropy` / `nn.CrossEntropyLoss` with `label_smoothing > 0` on logits filled with `-inf`: the loss is inf"
    fix_summary = "message (smooth over the valid classes only)"
    message = (
        "cross entropy with {smoothing} on logits filled with `-inf`{where}: the loss is "
        "inf (smoothing adds -log p of every class, inf for a masked one); smooth over the valid classes "
        "only, or fill with a finite value and accept the bias"
    )
    rationale = (
        "With `label_smoothing=s`, `F.cross_entropy` adds s/C times -log p of every one of the C "
        "classes to each row's loss. A class whose logit was filled with -inf has p = 0 and "
        "-log p = inf, so the row's loss, and a mean over the batch, is inf: measured with torch "
        "2.13 on the CPU (4 x 10 logits, 3 classes masked) in float32, bfloat16 and float16 at "
        's = 0.1 and s = 1e-4, with `reduction="none"` and with `nn.CrossEntropyLoss` alike. '
        "Without smoothing the loss is finite (2.35 there), since only the target class is read. "
        "One masked class is enough: a causal or top-k mask, which never covers a whole row, is a "
        "hazard here too. Filling with `torch.finfo(dtype).min` is no cure (the sum of -log p over "
        "the masked classes overflows: inf again); a finite fill of -1e4 gives a finite but "
        "meaningless loss (302 there, in float16 inf again). Smoothing over the valid classes only "
        "(`log_softmax`, then the mean of -log p over the unmasked classes) is finite (2.34), and "
        "equals the usual smoothing where nothing is masked."
    )
    safety = Safety.GUIDE
    needles = ("inf",)
    pattern = r"label_smoothing"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def masked_ce(logits, invalid, target):\n"
                '    logits = logits.masked_fill(invalid, float("-inf"))\n'
                "    return F.cross_entropy(logits, target, label_smoothing=0.1)\n"
            ),
            lines=(7,),
            fixed=None,
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class ActionHead(nn.Module):\n"
                "    def __init__(self, dim, actions):\n"
                "        super().__init__()\n"
                "        self.proj = nn.Linear(dim, actions)\n"
                "        self.criterion = nn.CrossEntropyLoss(label_smoothing=0.05)\n"
                "\n"
                "    def forward(self, h, legal, action):\n"
                "        scores = self.proj(h)\n"
                "        scores[~legal] = -torch.inf\n"
                "        return self.criterion(scores, action)\n"
            ),
            lines=(14,),
            fixed=None,
        ),
    )
    good = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "\n"
        "\n"
        "def masked_ce(logits, invalid, target):\n"
        '    logp = logits.masked_fill(invalid, float("-inf")).log_softmax(-1)\n'
        '    nll = F.nll_loss(logp, target, reduction="none")\n'
        "    smooth = -logp.masked_fill(invalid, 0.0).sum(-1) / (~invalid).sum(-1)\n"
        "    return (0.9 * nll + 0.1 * smooth).mean()\n",
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def losses(logits, invalid, target):\n"
        "    hard = F.cross_entropy(logits.masked_fill(invalid, float('-inf')), target)\n"
        "    soft = F.cross_entropy(logits.masked_fill(invalid, -1e4), target, label_smoothing=0.1)\n"
        "    return hard + soft + F.cross_entropy(logits, target, label_smoothing=0.0)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        site = loss_site(ctx, node, OPS["cross_entropy"], CE_LOSS)
        if site is None:
            return
        smoothing = self._smoothing(site)
        if smoothing is None:
            return
        fills = inf_fills(ctx, site.input.value, node, any_entry=True)
        if not fills:
            return
        lines = sorted({span.start.line for span in (ctx.positions.get(f.node) for f in fills) if span is not None})
        where = f" on line {', '.join(map(str, lines))}" if lines else ""
        self.report(node, None, smoothing=smoothing, where=where)

    def _smoothing(self, site: LossSite) -> Optional[str]:
        """How the message names a smoothing that may be above 0; None where there is none, or
        every value it may have is 0."""
        value = _smoothing_arg(site)
        if value is None:
            return None
        text, positive = self._read(site, value)
        if positive is False:
            return None
        return f"`label_smoothing={text}`" + ("" if positive else " (whenever it is above 0)")

    def _read(self, site: LossSite, value: cst.BaseExpression) -> Tuple[str, Optional[bool]]:
        """The code of the smoothing and whether it is above 0 (None: the code does not say). A
        constructor's argument is read only as a literal: its names belong to another scope."""
        ctx = self.ctx
        text = ctx.module.code_for_node(value)
        literal = _literal(value)
        if literal is not None:
            return text, literal > 0
        if site.ctor is not None:
            return text, None
        if every_way(ctx, value, "TNL402 zero", lambda v: _literal(v) == 0):
            return text, False
        if not every_way(ctx, value, "TNL402 known", lambda v: _literal(v) is not None):
            return text, None
        return text, True
