"""TNL114 kl-div-mean-reduction: a KL divergence reduced with `"mean"`, PyTorch's default.

`"mean"` divides the summed KL by every element (batch x classes), so the loss is the KL per
sample divided by the number of classes; `"batchmean"` divides by the batch only. Two places
decide the reduction, and each is reported once, where the fix goes:

- `F.kl_div(...)` (`losses.kl_site`, function form): the call's own `reduction`;
- `nn.KLDivLoss(...)`: its constructor, wherever the instance is then called (inline, through a
  local, module-level or `self.` name, or handed to a trainer): the reduction is decided there,
  and one finding per constructor is one per decision however often it is called.

The reduction is read exactly as PyTorch does: the legacy `size_average`/`reduce` arguments,
where given, decide it (`True`/`None` both -> "mean"); a value that is neither a literal nor a
name bound to one on every way (a parameter, a config field, `**kwargs`) is not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.ways import every_way
from torchnumlint.rules.losses import KLDIV_LOSS, kl_site
from torchnumlint.rules.calls import is_literal, match_call
from torchnumlint.rules.rewrite import with_keyword

# nn.KLDivLoss(size_average=None, reduce=None, reduction="mean", log_target=False)
_CTOR_PARAMS = ("size_average", "reduce", "reduction", "log_target")
_MEAN = ("mean", "elementwise_mean")  # "elementwise_mean": the deprecated spelling, still "mean"
_DEFAULT = " (the default)"
_LEGACY = " (the legacy `size_average`/`reduce` arguments select it: drop them)"


@dataclass(frozen=True)
class _Reduction:
    """How a KL call or constructor reduces: `arg` the user's `reduction` argument (None: the
    default), whether a fix can set it (no legacy arguments, the value a literal or absent), and
    how the message says where "mean" comes from."""

    arg: Optional[cst.Arg]
    fixable: bool
    how: str


def _bound_args(call: cst.Call, params) -> Optional[Dict[str, cst.Arg]]:
    """The arguments of a `KLDivLoss` constructor by parameter name; None with `*args`/`**kwargs`
    (the reduction may be in them) or an argument it does not take."""
    if any(a.star for a in call.args):
        return None
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) > len(params):
        return None
    bound = dict(zip(params, positional))
    bound.update((a.keyword.value, a) for a in call.args if a.keyword is not None)
    return bound if all(name in params for name in bound) else None


def _string(node: cst.CSTNode) -> Optional[str]:
    node = strip_parens(node) if isinstance(node, cst.BaseExpression) else node
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value
    return None


def _legacy(args: Dict[str, cst.Arg]) -> Optional[str]:
    """PyTorch's `legacy_get_string`: where `size_average` or `reduce` is given (not None), they
    decide the reduction, "mean" when neither is False. None when neither is given, "?" when one
    is not a literal."""
    given = {}
    for name in ("size_average", "reduce"):
        value = strip_parens(args[name].value) if name in args else None
        if value is not None and not is_literal(value, "None"):
            given[name] = value.value if isinstance(value, cst.Name) and value.value in ("True", "False") else "?"
    if not given:
        return None
    if "?" in given.values():
        return "?"
    if given.get("size_average") == "False" and given.get("reduce") != "False":
        return "sum"
    return "none" if given.get("reduce") == "False" else "mean"


def _reduction(ctx, args: Dict[str, cst.Arg]) -> Optional[_Reduction]:
    """How `args` reduce, when it is surely "mean"; None when it is another or unknown."""
    legacy = _legacy(args)
    if legacy is not None:
        return _Reduction(args.get("reduction"), False, _LEGACY) if legacy == "mean" else None
    arg = args.get("reduction")
    if arg is None:
        return _Reduction(None, True, _DEFAULT)
    if _string(arg.value) is not None:
        return _Reduction(arg, True, "") if _string(arg.value) in _MEAN else None
    if every_way(ctx, arg.value, "kl-mean-reduction", lambda v: _string(v) in _MEAN):
        return _Reduction(arg, False, f" (`{ctx.module.code_for_node(arg.value)}` holds it)")
    return None


def _batchmean(call: cst.Call, given: Optional[cst.Arg]) -> cst.Call:
    """`call` with `reduction="batchmean"`: the user's literal replaced (positional or keyword,
    its quotes kept), or a new keyword."""
    if given is None:
        return with_keyword(call, "reduction", cst.SimpleString('"batchmean"'))
    quote = strip_parens(given.value).quote  # type: ignore[attr-defined]  # fixable only where the reduction is a string literal (`_reduction`)
    new = given.with_changes(value=cst.SimpleString(f"{quote}batchmean{quote}"))
    return call.with_changes(args=[new if a is given else a for a in call.args])


class KlDivMeanReduction(Rule):
    code = "TNL114"
    name = "kl-div-mean-reduction"
    finds = '`F.kl_div` / `nn.KLDivLoss` reduced with `"mean"` (the default): the KL per sample divided by the number of classes'
    fix_summary = 'unsafe: `reduction="batchmean"`'
    message = (
        '`{what}` reduces with "mean"{how}: it divides the summed KL by batch x classes, so the loss '
        'is the per-sample KL divided by the number of classes; use `reduction="batchmean"`'
    )
    rationale = (
        'With `reduction="mean"`, the default of `F.kl_div` and `nn.KLDivLoss`, PyTorch divides the '
        "sum of the pointwise KL terms by the number of elements, batch x classes, not by the "
        "batch: the result is not the KL divergence of anything. Measured with torch 2.13 on the "
        "CPU against the float64 KL per sample, `sum(p * (log p - log q), -1).mean()`: 8 x 10 "
        "logits give exactly 1/10 of it, 4 x 1000 give 1/1000, 32 x 32000 give 1/32000; the "
        "gradient shrinks by the same factor, so a KL term weighted against a cross-entropy (a "
        "distillation `alpha`, a `T ** 2`) is weighted number-of-classes times less than written. "
        "PyTorch warns on every call (\"'mean' will be changed to behave the same as "
        '\'batchmean\' in the next major release"). `reduction="batchmean"` divides by the '
        "batch size only and gives the mathematical KL per sample. The fix changes the loss's "
        "scale (and with it the effective learning rate of the term), so it is unsafe. The legacy "
        "`size_average`/`reduce` arguments are read as PyTorch reads them; where they select "
        '"mean", or a name holds it, the finding has no fix.'
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
                "def distill_loss(student_logits, teacher_probs):\n"
                "    return F.kl_div(F.log_softmax(student_logits, dim=-1), teacher_probs)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def distill_loss(student_logits, teacher_probs):\n"
                '    return F.kl_div(F.log_softmax(student_logits, dim=-1), teacher_probs, reduction="batchmean")\n'
            ),
        ),
        Example(
            bad=(
                "import torch.nn as nn\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "class Distiller(nn.Module):\n"
                "    def __init__(self, student, T=4.0):\n"
                "        super().__init__()\n"
                "        self.student = student\n"
                "        self.T = T\n"
                "        self.kl = nn.KLDivLoss()\n"
                "\n"
                "    def forward(self, x, teacher_logits):\n"
                "        s = F.log_softmax(self.student(x) / self.T, dim=1)\n"
                "        t = F.softmax(teacher_logits / self.T, dim=1)\n"
                "        return self.kl(s, t) * self.T ** 2\n"
            ),
            lines=(10,),
            fixed=(
                "import torch.nn as nn\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "class Distiller(nn.Module):\n"
                "    def __init__(self, student, T=4.0):\n"
                "        super().__init__()\n"
                "        self.student = student\n"
                "        self.T = T\n"
                '        self.kl = nn.KLDivLoss(reduction="batchmean")\n'
                "\n"
                "    def forward(self, x, teacher_logits):\n"
                "        s = F.log_softmax(self.student(x) / self.T, dim=1)\n"
                "        t = F.softmax(teacher_logits / self.T, dim=1)\n"
                "        return self.kl(s, t) * self.T ** 2\n"
            ),
        ),
        Example(
            bad=(
                "from torch.nn.functional import kl_div, log_softmax\n"
                "\n"
                "\n"
                "def consistency(p_clean, logits_aug):\n"
                "    return kl_div(log_softmax(logits_aug, -1), p_clean, reduction='mean')\n"
            ),
            lines=(5,),
            fixed=(
                "from torch.nn.functional import kl_div, log_softmax\n"
                "\n"
                "\n"
                "def consistency(p_clean, logits_aug):\n"
                "    return kl_div(log_softmax(logits_aug, -1), p_clean, reduction='batchmean')\n"
            ),
        ),
    )
    good = (
        # the mathematical KL per sample, by hand: the reproduction's float64 reference
        "import torch\n"
        "import torch.nn.functional as F\n"
        "\n"
        "\n"
        "def distill_loss(student_logits, teacher_probs):\n"
        "    log_q = F.log_softmax(student_logits, dim=-1)\n"
        "    return (torch.xlogy(teacher_probs, teacher_probs) - teacher_probs * log_q).sum(-1).mean()\n",
        'import torch.nn.functional as F\ndef kd(s, t):\n    return F.kl_div(F.log_softmax(s, -1), t, reduction="batchmean")\n',
        # "none", then reduced by the author: summed over the classes first
        "import torch.nn.functional as F\n"
        "def kd(s, t, mask):\n"
        '    kl = F.kl_div(F.log_softmax(s, -1), t, reduction="none").sum(-1)\n'
        "    return (kl * mask).sum() / mask.sum()\n",
        # the reduction is the caller's choice
        "import torch.nn as nn\n"
        "class KL(nn.Module):\n"
        '    def __init__(self, reduction="mean"):\n'
        "        super().__init__()\n"
        "        self.loss = nn.KLDivLoss(reduction=reduction)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.qualname(node.func) in KLDIV_LOSS:
            args, what = _bound_args(node, _CTOR_PARAMS), "KLDivLoss"
        else:
            site = kl_site(ctx, node)
            if site is None or site.ctor is not None or site.opaque:
                return
            args, what = match_call(ctx.imports, node, "kl_div").args, "kl_div"  # type: ignore[union-attr]  # `kl_site` matched this call as `kl_div`
        found = _reduction(ctx, args) if args is not None else None
        if found is None:
            return
        fix = None
        if found.fixable:
            fix = self.fix()
            fix.replace(node, _batchmean(node, found.arg))
        self.report(node, fix, what=what, how=found.how)
