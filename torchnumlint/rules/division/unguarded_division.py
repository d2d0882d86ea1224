"""TNL201 unguarded-division: a division by a norm, a sum, a deviation, a count, a root of such a
value, or a box union, area or side, which is 0 for real inputs (an all-zero, constant, empty or
fully masked row; a degenerate box) and then gives Inf or 0/0 = NaN.

The divisor is read through names, casts and shape-only steps (`x / n.unsqueeze(-1)` with
`n = x.norm(dim=-1)`); the fix clamps the whole divisor, which is exact because a clamp commutes
with every such step, or for a square root the value inside it (clamping outside would leave the
root's infinite derivative at 0).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.boxes import side
from torchnumlint.rules.cosines import manual_cosine
from torchnumlint.rules.degrees import degree
from torchnumlint.rules.divisors import (
    DivisionRule,
    COUNT_EPS,
    EPS,
    Divisor,
    clamp_fix,
    count_floor,
    in_where,
    normalize_site,
    replaces_whole,
    root_floor,
    zero_evidence,
    zero_kind,
)
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch, is_torch_value, may_carry_grad, value_kind
from torchnumlint.rules.gradient_context import STRICT_GRADIENT, gradient_free, gradient_note, gradient_shown
from torchnumlint.rules.guarding import is_tested
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.edge_tests import EDGE_TEST_WHY
from torchnumlint.rules.mends import mended_after
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.shapes import (
    root_hazard,
    root_of,
    sum_of_squares,
    through_shape,
)


class UnguardedDivision(DivisionRule):
    code = "TNL201"
    name = "unguarded-division"
    needs_index = True  # a mask parameter is judged at its callers in other modules (`rules/callers.py`)
    finds = (
        "`x / d` where d is a count, sum, norm, std/var, sqrt or box union/area/side that the code "
        "shows can be 0 (an empty mask, weights, relu/abs outputs, standardised data, padding rows,"
        " degenerate boxes, an isolated node's degree), unguarded"
    )
    fix_summary = "unsafe: `d.clamp_min(1e-12)` on non-negative tensors; safe: `clamp_min(1)` on integer counts"
    message = "division by {what}, which is 0 {why}: Inf there, NaN (0/0) where the numerator is 0 too; guard the denominator{how}"
    rationale = (
        "A norm, a sum, a standard deviation or variance, `abs().sum()`, a count of mask entries "
        "or a square root of such a value is exactly 0 for an all-zero, constant, empty or fully "
        "masked row, and then `x / d` is 0/0 = NaN in the forward pass and in every gradient that "
        "flows through it. The fix clamps the denominator: `d.clamp_min(1e-12)` (1e-12 is "
        "F.normalize's eps; its reciprocal square still fits float32 and bfloat16, so the "
        "gradient stays finite, and results are unchanged wherever d >= 1e-12). A count is "
        "clamped at 1, which is exact wherever the original was finite and keeps the integer "
        "dtype. A square root is clamped inside (`torch.sqrt(v.clamp_min(1e-12))`): clamping "
        "outside would leave the root's infinite derivative at 0 times a zero gradient, NaN again. "
        "A sum of signed values may need a different guard than clamping, and in float16 code "
        "1e-12 rounds to 0: compute the island in float32 (an eps alone overflows, the gradient "
        "being about 1/eps > 65504); for standardisation prefer `F.layer_norm`. The fix changes "
        "results where the denominator is below the floor, so it is unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("/", "div")
    # a denominator that can be 0 is built by one of these (directly or through a name); a box's
    # side is a difference of coordinates taken by indexing (`b[:, 2] - b[:, 0]`, corners
    # `b[..., :2]`, `b[..., 2:]`) or unpacking (`b.unbind(-1)`), an area may be `box_area`'s; a
    # per-class count a `bincount` (`rules/count_sources.py`)
    pattern = r"norm|sum|std|var|count_nonzero|sqrt|\*\*|pow|\]\s*-|:2|2:|unbind|chunk|split|box_area|max|degree|rowcount|bincount"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def standardize(h):\n"
                "    x = torch.relu(h)\n"
                "    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def standardize(h):\n"
                "    x = torch.relu(h)\n"
                "    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True).clamp_min(1e-12)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def masked_mean(h, valid_mask):\n"
                "    n = valid_mask.sum(dim=1, keepdim=True)\n"
                "    return (h * valid_mask).sum(dim=1, keepdim=True) / n\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def masked_mean(h, valid_mask):\n"
                "    n = valid_mask.sum(dim=1, keepdim=True)\n"
                "    return (h * valid_mask).sum(dim=1, keepdim=True) / n.clamp_min(1e-12)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def positive_loss(losses, labels: torch.Tensor):\n"
                "    total = losses.sum()\n"
                "    total /= (labels > 0).sum()\n"
                "    return total\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def positive_loss(losses, labels: torch.Tensor):\n"
                "    total = losses.sum()\n"
                "    total /= (labels > 0).sum().clamp_min(1)\n"
                "    return total\n"
            ),
            safety="safe",
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "class Scaled(torch.nn.Module):\n"
                "    def forward(self, x, w, a):\n"
                "        y = torch.div(x, torch.linalg.norm(w))\n"
                "        z = (a - a.mean(0)) / torch.sqrt(a.var(0))\n"
                "        return y * z / w.abs().sum(-1, keepdim=True)\n"
            ),
            lines=(6, 7, 8),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "class Scaled(torch.nn.Module):\n"
                "    def forward(self, x, w, a):\n"
                "        y = torch.div(x, torch.linalg.norm(w).clamp_min(1e-12))\n"
                "        z = (a - a.mean(0)) / torch.sqrt(a.var(0).clamp_min(1e-12))\n"
                "        return y * z / w.abs().sum(-1, keepdim=True).clamp_min(1e-12)\n"
            ),
        ),
    )
    good = (
        "import math\nimport torch\n"
        "def attend(q, k, mask):\n"
        "    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
        "    s = s / q.shape[-1] ** 0.5 / len(mask) / k.numel()\n"
        "    return s / torch.sqrt(torch.tensor(q.shape[-1], dtype=q.dtype))\n",
        "import torch\n"
        "def guarded(x, mask, eps=1e-6):\n"
        "    a = x / (x.norm(dim=-1, keepdim=True) + eps)\n"
        "    b = x / x.std(-1, keepdim=True).clamp(min=1e-5)\n"
        "    c = (x * mask).sum(1) / mask.sum(1).clamp_min(1)\n"
        "    d = x / torch.sqrt(x.var(-1, keepdim=True) + eps)\n"
        "    e = x / torch.maximum(x.abs().sum(), torch.tensor(eps))\n"
        "    return a + b + c + d + e / x.sum().clamp(min=torch.finfo(x.dtype).eps)\n",
        "import torch\ndef softmax(x):\n    e = torch.exp(x - x.max(-1, keepdim=True).values)\n    return e / e.sum(-1, keepdim=True)\n",
        "import torch\n"
        "def mean_loss(loss, mask):\n"
        "    n = mask.sum()\n"
        "    if n == 0:\n"
        "        return loss.sum() * 0\n"
        "    return (loss * mask).sum() / n\n",
        "import torch\ndef unit(x):\n    return x / x.norm(dim=-1, keepdim=True)\n",
    )

    def division(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> None:
        ctx = self.ctx
        found = zero_kind(ctx, d)
        if found is None:
            return
        if found.kind == "box" and not _box_hazard(ctx, x, found.value):
            return
        if isinstance(node, cst.BinaryOperation) and _compared(ctx):
            return  # `prod / norm > -1e-6`: a NaN or Inf only turns the comparison False
        if _positive_number(ctx, x) and _capped(ctx):
            return  # `torch.minimum(ones, max_norm / norm)`: a number over 0 is +Inf, capped to the bound
        selected = in_where(ctx)
        note = gradient_note(ctx) if selected else ""
        if note is None:
            return  # selected away in the forward, and no gradient to poison here
        if (
            not selected
            and replaces_whole(node)
            and normalize_site(ctx, x, d, node) is not None
            and owned_elsewhere(ctx, self.code, "normalize")
        ):
            return
        if (
            not selected
            and replaces_whole(node)
            and found.kind in ("product", "norm")
            and manual_cosine(ctx, x, d) is not None
            and owned_elsewhere(ctx, self.code, "manual-cosine")
        ):
            return
        if not selected and replaces_whole(node) and _hand_softmax(ctx, x, found) and owned_elsewhere(ctx, self.code, "hand-softmax"):
            return
        root = root_of(ctx, found.value) if found.kind == "sqrt" else None
        tested = (d, through_shape(ctx, d, names=False), found.value)
        if is_tested(ctx, *tested, *([root[1], ctx.resolve(root[1])] if root else [])):
            return  # `if var > 0: x /= torch.sqrt(var)`
        if is_not_torch(ctx, found.value):
            return  # numpy or Python numbers: not this linter's business, and no clamp_min
        mend = mended_after(ctx, node) if replaces_whole(node) else None
        carried = self._gradient_evidence(x, d) if mend is not None else None
        if mend is not None and carried is None:
            # its Inf re-filled on the next lines: a guard of the forward; what is left is the
            # gradient's NaN at the mended entry (0 * inf, into the numerator and the divisor,
            # measured), claimed only where one is shown
            return
        why, non_negative = zero_evidence(ctx, found, x, d, through_shape(ctx, d, names=False))
        if why is None:
            if not ctx.strict:
                return
            why = STRICT_WHY
        if mend is None and not selected and why.startswith(EDGE_TEST_WHY):
            # overwritten where the code tests for 0 (`out[n == 0] = 0`): the forward is mended
            # too, and the claim left is the gradient's, made where one is shown. (Selected away
            # by `where`, the claim is where-unselected-branch's too, which defers to this rule:
            # both read the code's gradient, `gradient_note`.)
            carried = self._gradient_evidence(x, d)
            if carried is None:
                return
        fix = None
        # no clamp inside a `where` (the double-where rewrite is where-unselected-branch's), on a
        # value of unknown type (clamp_min is a tensor method), or of either sign (it would flip it)
        counted = degree(ctx, found.value) if found.kind == "degree" else None
        torch_value = counted is not None and counted.library
        if not selected and non_negative and (torch_value or is_torch_value(ctx, d) or is_torch_value(ctx, found.value)):
            fix = self._clamp(d, found)
            if fix is False:
                return  # the root is TNL206's, reported where it is computed
        at = node if isinstance(node, cst.AugAssign) else d
        how = self._how(selected, note, found, fix, non_negative)
        if mend is not None:
            how += f" (the mend {mend} keeps the forward finite, not the gradient{carried})"
        elif carried:
            how += f" (a gradient reaches it{carried})"
        self.report(at, fix, what=found.what, why=why, how=how)

    def _gradient_evidence(self, x: cst.BaseExpression, d: cst.BaseExpression) -> Optional[str]:
        """For a division whose forward is mended (its Inf re-filled, or overwritten where the
        code tests for 0): the note naming the evidence that a gradient
        reaches it ("" where the code shows it; `: <why>` from a caller), or in strict mode the
        strict note where only may; None where no gradient claim is made (gradient-free code, a
        no-grad producer's output, parameters no caller gives a gradient)."""
        ctx = self.ctx
        note = gradient_note(ctx)
        if note is None or not (may_carry_grad(ctx, x) or may_carry_grad(ctx, d)):
            return None
        shown = gradient_shown(ctx, x)
        if shown is None:
            shown = gradient_shown(ctx, d)
        if shown is not None:
            return f": {shown}" if shown else note
        return STRICT_GRADIENT if ctx.strict else None

    def _clamp(self, d: cst.BaseExpression, found: Divisor):
        """The clamp for a non-negative divisor: the whole divisor (shape-only steps commute with
        a clamp), a count at 1; for a square root the value inside it, where the root is written
        in the divisor or computed for this division alone. None where no clamp is written here;
        False where the root belongs to TNL206."""
        ctx = self.ctx
        if found.kind == "degree":  # a count of edges is an integer: 1 is exact; summed weights are not
            counted = degree(ctx, found.value)
            return clamp_fix(self, d, COUNT_EPS if counted is not None and counted.counts else EPS)
        if found.kind != "sqrt":
            return clamp_fix(self, d, count_floor(ctx, found.value) if found.kind == "count" else EPS)
        _, arg = root_of(ctx, found.value)  # type: ignore[misc]  # a sqrt divisor is a root (`zero_kind`)
        if self._vector_norm_first(arg, found.value):
            return None
        if through_shape(ctx, d, names=False) is found.value:
            return clamp_fix(self, arg, root_floor(ctx, arg))
        if root_hazard(ctx, arg) is not None and owned_elsewhere(ctx, self.code, "named-root"):
            return False
        name = through_shape(ctx, d, names=False)
        binding = ctx.binding(name) if isinstance(name, cst.Name) else None
        if binding is not None and binding.rewritable and binding.value is found.value and ctx.only_read_here(name):
            return clamp_fix(self, arg, root_floor(ctx, arg))  # the root is read only here
        return None

    @staticmethod
    def _how(selected: bool, note: str, found: Divisor, fix, non_negative: bool) -> str:
        if selected:
            return (
                " itself: `torch.where` selects the result away in the forward, but the unselected "
                "branch still sends NaN into the gradient (`x / torch.where(d > 0, d, 1)`)" + note
            )
        if fix is not None:
            exact = found.kind in ("count", "degree") and fix.safety is Safety.SAFE
            return f": `.clamp_min({COUNT_EPS if exact else 'eps'})`"
        if non_negative:
            return " (`+ eps` or `.clamp_min(eps)`)"
        return " without flipping its sign (e.g. `torch.where(d.abs() < eps, eps, d)`)"

    def _vector_norm_first(self, arg: cst.BaseExpression, root: cst.BaseExpression) -> bool:
        """A root of a sum of squares whose exact rewrite to `vector_norm` (TNL204, when enabled)
        comes before any clamp."""
        return sum_of_squares(self.ctx, arg, root) is not None and owned_elsewhere(self.ctx, self.code, "root-of-sum-of-squares")


def _hand_softmax(ctx, x: cst.BaseExpression, found: Divisor) -> bool:
    """`e / e.sum(d)` of an exponential `e`: a softmax written by hand (its sum is 0 only where
    every exp underflows, and `torch.softmax` removes that too)."""
    if found.kind != "sum":
        return False
    summed = match_call(ctx.imports, strip_parens(found.value), "sum")
    return (
        summed is not None
        and same_code(ctx, x, summed.input)
        and match_call(ctx.imports, strip_parens(ctx.resolve(summed.input)), "exp") is not None
    )


def _compared(ctx) -> bool:
    """Whether the division being visited is an operand of a comparison (through parentheses):
    its Inf or NaN becomes a boolean, and no gradient flows through one."""
    for ancestor in reversed(ctx.stack[:-1]):
        if isinstance(ancestor, cst.Comparison):
            return True
        if not isinstance(ancestor, cst.ComparisonTarget):
            return False
    return False


def _box_hazard(ctx, x: cst.BaseExpression, box: cst.BaseExpression) -> bool:
    """Whether a division by a box's union, area or side is reported. Not in evaluation or data
    code (its boxes are checked ground truth). A union or an area (IoU, GIoU, IoA) anywhere
    else; a single side only as an aspect ratio (`w / h`, CIoU's `atan(w / h)`) or in code that
    shows a gradient (a loss): a coordinate mapped into its box (`heatmap_size / w`,
    `(y - y0) / (y1 - y0)` when pasting a mask) reads boxes that the pipeline has filtered."""
    if gradient_free(ctx):
        return False
    if side(ctx, box) is None:
        return True
    return side(ctx, x) is not None or gradient_note(ctx) == "" or ctx.strict


_CAPS = ("torch.minimum", "torch.min", "torch.fmin")


def _positive_number(ctx, x: cst.BaseExpression) -> bool:
    """A number known to be over 0: a positive literal, or a Python number the function tests
    (`if norm_threshold > 0:`). Over 0 its only non-finite quotient is +Inf."""
    value = number_value(x)
    if value is not None:
        return value > 0
    return value_kind(ctx, x) == "python" and is_tested(ctx, x)


def _capped(ctx) -> bool:
    """Whether the division being visited is capped from above where it is computed: an
    argument of `torch.minimum(bound, q)` (or `min`), or `q.clamp(max=...)` / `q.clamp_max(...)`.
    With a number over it, its only non-finite value is +Inf, which the cap turns into the bound:
    the clipping idiom `scale = min(1, threshold / norm)`."""
    stack = ctx.stack
    if len(stack) < 3:
        return False
    parent, grand = stack[-2], stack[-3]
    if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call) and len(grand.args) == 2:
        return ctx.qualname(grand.func) in _CAPS
    if isinstance(parent, cst.Attribute) and isinstance(grand, cst.Call) and grand.func is parent:
        method = parent.attr.value
        keywords = {a.keyword.value for a in grand.args if a.keyword is not None}
        return method == "clamp_max" or (method in ("clamp", "clip") and keywords == {"max"})
    return False
