"""TNL105 bce-on-sigmoid: binary cross entropy computed from a sigmoid's probabilities instead of
from the logits.

The built-in `F.binary_cross_entropy` / `nn.BCELoss` clamps its logs at -100: once the sigmoid
rounds to 1 (or to 0), the loss is capped at 100 and the gradient that should be +-1 is 0 (NaN in
float16). The sites: the function form under any alias, an `nn.BCELoss` called inline, through a
name or an attribute (`self.criterion = nn.BCELoss()` called in another method:
`losses.loss_site`), whose input is a sigmoid as `made_by.sigmoid_call` sees it
(inline, through names and subscripts, a helper or a model ending in `nn.Sigmoid()`). A clamped
sigmoid is no sigmoid there: the author has chosen the clamp. A `nan_to_num` between them is no
guard (it replaces only NaN and Inf, the 1.0 of a saturated sigmoid stays): seen through. Code that runs without a gradient
(`no_grad`, evaluation) is left alone: there the only harm is one element's loss capped at 100.

The hand-written `-(y * log(p) + (1 - y) * log(1 - p))` of a sigmoid `p` is Inf, its gradient
NaN, once `p` rounds to 1. Each of its logs is TNL104's (log-of-sigmoid) and that rule owns the
site (`ownership.OWNERS["handwritten-bce"]`): its `F.logsigmoid` fixes are exact even where `y`
broadcasts against `p`, which `binary_cross_entropy_with_logits` refuses. This rule reports the
hand-written form, without a fix, only where TNL104 is disabled.

Fix (SAFE: equal wherever the original is finite and unclamped): `F.binary_cross_entropy_with_logits(z,
y, ...)` / `nn.BCEWithLogitsLoss(...)(z, y)` with every other argument kept (`weight`,
`reduction`; the deprecated `size_average`/`reduce` are in the same positions), only where the
logits are in reach: an inline sigmoid, or a local name bound once to one (recomputed at the use
when the logits are plain, its assignment rewritten when nothing else reads it). An `nn.BCELoss`
kept in a name or attribute may serve other calls: reported without a fix. A `nan_to_num` in
the way is dropped with the sigmoid, and the fix is then UNSAFE: the loss of a NaN logit, which
`nan_to_num` made finite (its gradient NaN all the same), becomes NaN.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.bindings import Binding, is_plain
from torchnumlint.rules.calls import CallMatch, make_op, match_call
from torchnumlint.rules.cross_entropy.sites import MAX_CHAIN, rewritten_input, source_of
from torchnumlint.rules.gradient_context import gradient_free
from torchnumlint.rules.losses import LossSite, loss_site
from torchnumlint.rules.made_by import sigmoid_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.test_code import STRICT_IN_TESTS, in_test_code
from torchnumlint.rules.value_steps import finite_kept

BCE = make_op(
    "binary_cross_entropy",
    {"torch.nn.functional.binary_cross_entropy"},
    None,
    ("target", "weight", "size_average", "reduce", "reduction"),
)
BCE_LOSS = ("torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss")
_WITH_LOGITS = "torch.nn.functional.binary_cross_entropy_with_logits"
_WITH_LOGITS_LOSS = "torch.nn.BCEWithLogitsLoss"
# A NaN logit: `nan_to_num` made the probability 0 and the loss finite (0 for label 0, 100 for
# label 1; its gradient NaN all the same, measured on torch 2.13 CPU); the fix's loss is NaN.
_DROPPED = "the fix drops the `nan_to_num` with the sigmoid: the loss of a NaN logit becomes NaN, as its gradient already is"
_SATURATION = "logit above 16.6 in float32, 8.3 in float16, 6.25 in bfloat16"


def _renamed(fix, func: cst.BaseExpression, qualified: str) -> cst.BaseExpression:
    """`func` renamed to `qualified`'s last part where it is spelled as an attribute of
    `qualified`'s module (`F.binary_cross_entropy`, `nn.BCELoss`), else `qualified` in the
    file's own alias (an import added if needed)."""
    module, _, last = qualified.rpartition(".")
    if isinstance(func, cst.Attribute) and fix.ctx.qualname(func.value) in (module, module + ".modules.loss"):
        return func.with_changes(attr=cst.Name(last))
    return fix.ref(qualified)


class BceOnSigmoid(Rule):
    code = "TNL105"
    name = "bce-on-sigmoid"
    finds = (
        "`F.binary_cross_entropy` / `nn.BCELoss` on a sigmoid (inline, names, through `nan_to_num`, `self.criterion`, "
        "helpers, models ending in `nn.Sigmoid`): loss capped at 100, gradient 0 or 10x too small "
        "once saturated"
    )
    fix_summary = "safe: `binary_cross_entropy_with_logits` on the logits"
    message = "binary cross entropy of a sigmoid{made}{hazard}; use {use}{note}"
    rationale = (
        "`F.binary_cross_entropy` and `nn.BCELoss` clamp their logs at -100, so once a sigmoid "
        "rounds to 1 (measured on torch 2.13, CPU: `1 - sigmoid(z) == 0` from z = 16.64 in "
        "float32, 8.32 in float16, 6.25 in bfloat16) a wrong prediction costs 100 whatever the "
        "logit (z = 20: loss 100, true 20) and its gradient is exactly 0 where it should be 1; "
        "in float16 the gradient is NaN. Below that, the backward clamps `p * (1 - p)` at 1e-12: "
        "at z = -30 with label 1 the gradient is -0.094 instead of -1. Under CUDA autocast "
        "`binary_cross_entropy` raises. Written out, `-(y * log(p) + (1 - y) * log(1 - p))` is "
        "Inf with a NaN gradient from the same point. `F.binary_cross_entropy_with_logits(z, y)` "
        "computes the loss from the logits (log-sum-exp form) and is exact everywhere; the fix "
        "keeps `weight` and `reduction` and equals the original wherever that is finite and "
        "unclamped."
        " In test code (a `tests/` folder of the project, `test_*.py`, `*_test.py`, `conftest.py`) "
        "it is strict-mode only: a test's model trains for a few steps and never reaches a saturating logit."
    )
    safety = Safety.SAFE
    needles = ("binary_cross_entropy", "BCELoss", "log")
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
                "def bce(z, y):\n"
                "    return F.binary_cross_entropy(torch.sigmoid(z), y)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\nimport torch.nn.functional as F\n\n\ndef bce(z, y):\n    return F.binary_cross_entropy_with_logits(z, y)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class Tagger(nn.Module):\n"
                "    def __init__(self, dim, tags):\n"
                "        super().__init__()\n"
                "        self.head = nn.Linear(dim, tags)\n"
                "        self.criterion = nn.BCELoss()\n"
                "\n"
                "    def training_step(self, h, labels):\n"
                "        probs = self.head(h).sigmoid()\n"
                "        return self.criterion(probs, labels)\n"
            ),
            lines=(13,),
            fixed=None,
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def mask_loss(mask_logits, gt, w):\n"
                "    probs = mask_logits.sigmoid()\n"
                '    loss = F.binary_cross_entropy(probs, gt, weight=w, reduction="sum")\n'
                "    return loss, probs > 0.5\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def mask_loss(mask_logits, gt, w):\n"
                "    probs = mask_logits.sigmoid()\n"
                '    loss = F.binary_cross_entropy_with_logits(mask_logits, gt, weight=w, reduction="sum")\n'
                "    return loss, probs > 0.5\n"
            ),
        ),
    )
    good = (
        "import torch\nimport torch.nn.functional as F\n\n\ndef bce(z, y):\n    return F.binary_cross_entropy_with_logits(z, y)\n",
        # probabilities that are no sigmoid: data, a clamped sigmoid, a softplus loss
        "import torch\nimport torch.nn.functional as F\n"
        "def losses(z, y, target_probs, soft):\n"
        "    p = torch.sigmoid(z).clamp(1e-6, 1 - 1e-6)\n"
        "    return F.binary_cross_entropy(p, y) + F.binary_cross_entropy(target_probs, soft) + F.softplus(-z * y).mean()\n",
        # evaluation: no gradient flows
        "import torch\nimport torch.nn.functional as F\n"
        "@torch.no_grad()\n"
        "def evaluate(model, x, y):\n"
        "    return F.binary_cross_entropy(torch.sigmoid(model(x)), y).item()\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        site = loss_site(self.ctx, node, BCE, BCE_LOSS)
        if site is None or gradient_free(self.ctx):
            return
        sigmoid = sigmoid_call(self.ctx, site.input.value)
        if sigmoid is None or self._in_tests():
            return
        fix, note = self._fix(site, sigmoid)
        made = f" (made by `{self.ctx.module.code_for_node(sigmoid.call.func)}`)" if sigmoid.form == "producer" else ""
        hazard = f": the loss is capped at 100 and its gradient wrong, 0 once the sigmoid rounds to 1 ({_SATURATION}){self._tests_note()}"
        self.report(node, fix, made=made, hazard=hazard, use="`binary_cross_entropy_with_logits` on the logits", note=note)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if owned_elsewhere(self.ctx, self.code, "handwritten-bce"):
            return
        if handwritten_bce(self.ctx, node) is None or self._in_tests():
            return
        hazard = f" written out: `log(1 - p)` is -inf once the sigmoid rounds to 1 ({_SATURATION}), the loss Inf, its gradient NaN{self._tests_note()}"
        use = '`F.binary_cross_entropy_with_logits(z, y, reduction="none")` on the logits (or `F.logsigmoid(z)`, `F.logsigmoid(-z)`)'
        self.report(node, None, made="", hazard=hazard, use=use, note="")

    def _in_tests(self) -> bool:
        """A test's model never trains to a saturating logit (`test_code`): strict mode only."""
        return in_test_code(self.ctx) and not self.ctx.strict

    def _tests_note(self) -> str:
        return f" ({STRICT_IN_TESTS})" if in_test_code(self.ctx) else ""

    def _fix(self, site: LossSite, sigmoid: CallMatch):
        """The call on the logits, or (None, "") where the logits or the call are out of reach."""
        if not site.inline:
            return None, ""
        inp = site.input.value
        found = _sigmoid_source(self.ctx, inp)
        if found is None or found[0].call is not sigmoid.call:
            return None, ""
        logits = strip_parens(sigmoid.input)
        fix = self.fix(Safety.UNSAFE if found[2] else None)
        new_input, renamed = rewritten_input(fix, inp, found[1], lambda _: logits, [logits], is_plain(logits))
        if new_input is None:
            return None, ""
        args = [a.with_changes(value=new_input) if a is site.input else a for a in site.call.args]
        if site.ctor is None:
            call = site.call.with_changes(func=_renamed(fix, site.call.func, _WITH_LOGITS), args=args)
        else:
            ctor = site.ctor.with_changes(func=_renamed(fix, site.ctor.func, _WITH_LOGITS_LOSS))
            call = site.call.with_changes(func=ctor, args=args)
        fix.replace(site.call, call)
        notes = [f"the fix makes `{renamed}` hold the logits"] if renamed else []
        if found[2]:
            notes.append(_DROPPED)
        return fix, f" ({'; '.join(notes)})" if notes else ""


def _sigmoid_source(ctx, inp: cst.BaseExpression) -> Optional[Tuple[CallMatch, List[Binding], bool]]:
    """`sites.source_of` for a sigmoid, also through `nan_to_num`s inline or at the end of the
    names followed (`p = torch.sigmoid(z).nan_to_num(0.0)`): the call, every name followed to it,
    and whether a `nan_to_num` was stepped over (the fix drops it with the sigmoid)."""
    chain: List[Binding] = []
    expr = inp
    for _ in range(MAX_CHAIN):
        found = source_of(ctx, expr, "sigmoid")
        if found is not None:
            return found[0], chain + found[1], expr is not inp
        links = ctx.chain(expr, MAX_CHAIN, names_only=True)
        kept = finite_kept(ctx.imports, strip_parens(links[-1].value if links else expr))
        if kept is None:
            return None
        chain, expr = chain + links, kept
    return None


# ---------------------------------------------------------------------------------------------
# The hand-written form


def _signed(expr: cst.BaseExpression) -> Tuple[int, cst.BaseExpression]:
    """(-1, e) for `-e`, (1, e) otherwise."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return -1, strip_parens(expr.expression)
    return 1, expr


def _term(ctx, expr: cst.BaseExpression) -> Optional[Tuple[int, cst.BaseExpression, cst.BaseExpression]]:
    """A term `y * log(v)` (either order, a minus on the term or on either factor) as
    (sign, label, v)."""
    sign, expr = _signed(expr)
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Multiply):
        return None
    (s1, a), (s2, b) = _signed(expr.left), _signed(expr.right)
    for label, other in ((a, b), (b, a)):
        log = match_call(ctx.imports, other, "log")
        if log is not None and log.fully_known:
            return sign * s1 * s2, label, strip_parens(log.input)
    return None


def _one_minus(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`v` for `1 - v` (any literal one)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract) and number_value(strip_parens(expr.left)) == 1.0:
        return strip_parens(expr.right)
    return None


def handwritten_bce(ctx, node: cst.BinaryOperation) -> Optional[CallMatch]:
    """The sigmoid `p` of `y * log(p) + (1 - y) * log(1 - p)` (or its negation, `-y * log(p) -
    (1 - y) * log(1 - p)`, terms and factors in any order), or None."""
    if not isinstance(node.operator, (cst.Add, cst.Subtract)):
        return None
    first, second = _term(ctx, node.left), _term(ctx, node.right)
    if first is None or second is None:
        return None
    sign = -1 if isinstance(node.operator, cst.Subtract) else 1
    if first[0] != sign * second[0]:
        return None
    terms: List[Tuple[cst.BaseExpression, cst.BaseExpression]] = [(first[1], first[2]), (second[1], second[2])]
    for (y, p), (not_y, not_p) in (terms, terms[::-1]):
        q, z = _one_minus(not_p), _one_minus(not_y)
        if q is not None and z is not None and same_code(ctx, p, q) and same_code(ctx, y, z):
            return sigmoid_call(ctx, p)
    return None
