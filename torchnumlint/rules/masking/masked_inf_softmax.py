"""TNL401 masked-inf-softmax: a `-inf` fill (`masked_fill`, in place, through `.data`, an index
assignment, `torch.where`, or an additive mask built with `torch.full(..., -inf)` or as the log
of a 0/1 mask, `scores + keep.log()`) whose result reaches a softmax or log-softmax in the same
function.

A row whose every entry is masked is `-inf - (-inf)` = NaN after the max-subtraction of the
softmax, and its NaN reaches every gradient that flows through the softmax's output. Which fills
can cover a row, and how they are followed, is `masking.fills`. Left alone: causal masks (they
never mask the diagonal), a softmax whose output is re-zeroed where masked after a
`masked_fill` (the forward and, measured, the gradient stay finite: `masked_fill`'s backward
zeroes the masked entries), `F.scaled_dot_product_attention` (no softmax is written), and large
finite fills (`-1e9`, `torch.finfo(...).min`), whose float16 overflow is another rule's.

Evidence before a report: by default a fill is reported only when its mask can cover a whole
row by evidence (`mask_origin`): a selection that real batches can leave empty (labels compared
with a class, values past a threshold such as a neighbourhood radius, a random drop, a mask whose
name says it selects: `matched`, `fg`, `visible`), or a triangle that masks the whole first row
(`fills.masks_first_row`); a `torch.full(..., -inf)` covers every row. A padding or length mask
(`key_padding_mask`, `arange(T) >= lengths`, `ids == pad_id`) covers a row only for a sequence with
no tokens at all, and a mask built only from constants and shapes (a local-window map stored in
`__init__`, `arange(n).ge(step)` of a cache step) is what its author chose: both are reported only
in strict mode, saying so.

The fix fills with `torch.finfo(x.dtype).min` where the filled tensor `x` is written plainly and
the fill reaches the softmax directly: a fully masked row is then uniform instead of NaN, and
every other row is unchanged (exp underflows to exactly 0 either way). An additive mask gets no
fix: added twice (a causal and a padding mask), `finfo.min + finfo.min` is -inf again.
"""

from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.evidence import STRICT_WHY
from torchnumlint.rules.gradient_context import gradient_note
from torchnumlint.rules.module_calls import module_call
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.log_domain.handwritten import exp_normalisation
from torchnumlint.rules.masking.fills import InfFill, inf_fills, masks_first_row, rezeroed
from torchnumlint.rules.mask_origin import origin
from torchnumlint.rules.bindings import is_plain
from torchnumlint.rules.calls import match_call

_SOFTMAX_MODULES = ("torch.nn.Softmax", "torch.nn.LogSoftmax")
_FIXABLE = frozenset({"masked_fill", "masked_fill_", "index", "data", "where"})


class MaskedInfSoftmax(Rule):
    code = "TNL401"
    name = "masked-inf-softmax"
    needs_index = True  # a mask parameter is judged at its callers in other modules (`rules/callers.py`)
    finds = (
        "a `-inf` fill (`masked_fill`, in place, `.data`, `s[m] = -inf`, `torch.where`, an additive"
        " `torch.full(..., -inf)` or `s + keep.log()` mask) reaching a softmax (or one by hand), unless causal, a top-k filter or "
        "re-zeroed: a fully masked row is NaN"
    )
    fix_summary = "safe: `torch.finfo(x.dtype).min` (none for additive masks)"
    message = "`-inf` fill reaching a {softmax}{where}: {hazard}; {advice}"
    rationale = (
        "A softmax subtracts each row's maximum first; in a row whose every entry was filled with "
        "-inf that is -inf - (-inf) = NaN, so the whole row is NaN, in `softmax` and in "
        "`log_softmax` alike (measured with torch 2.13 on the CPU in float32, bfloat16 and "
        "float16), and so is every gradient that flows through it: with one fully masked query "
        "of three, all 20 of 20 entries of grad(V) in `softmax(s) @ V` are NaN. A padding mask "
        "covers a whole row for an empty sequence, and a causal mask combined with left padding "
        "for its first query. Filling with `torch.finfo(s.dtype).min` instead gives that row a "
        "uniform distribution and leaves every other row exactly as it was (exp of the fill "
        "minus the row's maximum underflows to 0 either way). An additive mask must be added "
        "once: `finfo.min + finfo.min` is -inf again. Re-zeroing the softmax output where masked "
        "(`p.masked_fill(m, 0)`) makes the forward finite; after a `masked_fill` of -inf the "
        "gradient is then finite too (measured), but through an additive mask the NaN of the "
        "fully masked row still reaches the gradient of the scores. "
        "`F.scaled_dot_product_attention` gives 0 for a fully masked row."
    )
    safety = Safety.SAFE
    needles = ("inf", "log(")  # a `-inf` spelled out, or the log of a 0/1 mask
    pattern = r"softmax|Softmax|\bexp\b"  # a softmax, or an exp a softmax by hand divides
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def attend(scores, drop_mask, v):\n"
                '    scores = scores.masked_fill(drop_mask, float("-inf"))\n'
                "    return scores.softmax(-1) @ v\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def attend(scores, drop_mask, v):\n"
                "    scores = scores.masked_fill(drop_mask, torch.finfo(scores.dtype).min)\n"
                "    return scores.softmax(-1) @ v\n"
            ),
        ),
        Example(
            bad=(
                "import math\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def pool(h, w, background):\n"
                "    logits = h @ w\n"
                "    logits[background] = -math.inf\n"
                "    weights = F.softmax(logits, dim=1)\n"
                "    return (weights.unsqueeze(-1) * h).sum(1)\n"
            ),
            lines=(7,),
            fixed=(
                "import math\n"
                "import torch.nn.functional as F\n"
                "import torch\n"
                "\n"
                "\n"
                "def pool(h, w, background):\n"
                "    logits = h @ w\n"
                "    logits[background] = torch.finfo(logits.dtype).min\n"
                "    weights = F.softmax(logits, dim=1)\n"
                "    return (weights.unsqueeze(-1) * h).sum(1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def attention(q, k, outlier_mask):\n"
                '    bias = torch.zeros(outlier_mask.shape).masked_fill(outlier_mask, float("-inf"))\n'
                "    scores = q @ k.transpose(-2, -1) + bias[:, None, :]\n"
                "    return torch.log_softmax(scores, dim=-1)\n"
            ),
            lines=(5,),
            fixed=None,
        ),
    )
    good = (
        "import torch\n"
        "\n"
        "\n"
        "def attend(scores, mask, v):\n"
        "    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)\n"
        "    return scores.softmax(-1) @ v\n",
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def causal(q, k, v):\n"
        "    n = q.size(-2)\n"
        "    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)\n"
        "    s = (q @ k.transpose(-2, -1)).masked_fill(future, float('-inf'))\n"
        "    return F.softmax(s, -1) @ v + F.scaled_dot_product_attention(q, k, v, attn_mask=~future)\n",
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def pool(x, mask):\n"
        "    s = x.masked_fill(mask, -1e4).softmax(-1)\n"
        "    p = F.pad(x, (1, 1), value=float('-inf'))\n"
        "    return s + F.max_pool1d(p, 3, 1)\n",
        "import torch\ndef attend(s, mask):\n    p = s.masked_fill(mask, float('-inf')).softmax(-1)\n    return p.masked_fill(mask, 0.0)\n",
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """A softmax written by hand, `e / e.sum(d)` with `e = (x - x.amax(d)).exp()`: the max
        subtraction is no help where a mask removed every entry of a row (-inf - -inf = NaN;
        unshifted, exp gives 0 / 0), measured: NaN in the forward pass."""
        if not isinstance(node.operator, cst.Divide):
            return
        found = exp_normalisation(self.ctx, node, node.left, node.right)
        if found is None:
            return
        logits = strip_parens(self.ctx.resolve(found.logits)) if found.shifted else found.logits
        if found.shifted and isinstance(logits, cst.BinaryOperation) and isinstance(logits.operator, cst.Subtract):
            logits = logits.left
        self._softmax(node, logits, "softmax by hand")

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        match = match_call(ctx.imports, node, "softmax", "log_softmax")
        if match is not None:
            scores, kind = match.input, match.op.name.replace("_", "-")
        elif module_call(ctx, node, *_SOFTMAX_MODULES) is not None and node.args and not node.args[0].star:
            scores, kind = node.args[0].value, "softmax module"
        else:
            return
        self._softmax(node, scores, kind)

    def _softmax(self, node: cst.CSTNode, scores: cst.BaseExpression, kind: str) -> None:
        ctx = self.ctx
        fills = inf_fills(ctx, scores, node)
        if not fills:
            return
        zeroed = rezeroed(ctx, node)
        reported: Set[int] = ctx.per_file("TNL401-reported", lambda _: set())
        span = ctx.positions.get(node)
        where = f" on line {span.start.line}" if span is not None else ""
        for fill in fills:
            if id(fill.node) in reported:
                continue
            why = self._evidence(fill)
            if why is None and not ctx.strict:
                continue
            hazard = self._hazard(fill, zeroed)
            if hazard is None:
                continue
            hazard += f" ({why})" if why is not None else f"; a whole row is masked {self._strict_why(fill)}"
            reported.add(id(fill.node))
            self.report(fill.node, self._fix(fill), softmax=kind, where=where, hazard=hazard, advice=self._advice(fill))

    def _evidence(self, fill: InfFill) -> Optional[str]:
        """Why the fill can cover a whole row, or None (see the module)."""
        if fill.mask is None:
            return "every entry of the `-inf` tensor is filled" if fill.form in ("full", "full_like") else None
        if fill.form not in ("where", "log") and masks_first_row(self.ctx, fill.mask):  # theirs may be kept
            return "the triangle masks the whole first row"
        return origin(self.ctx, fill.mask).why

    def _strict_why(self, fill: InfFill) -> str:
        """Strict mode's reason, naming a padding mask: it covers a row only for an input with no
        tokens at all."""
        padding = origin(self.ctx, fill.mask).padding if fill.mask is not None else None
        if padding is None:
            return STRICT_WHY
        return f"only for an input with no tokens (strict mode: {padding})"

    def _hazard(self, fill: InfFill, zeroed: bool) -> Optional[str]:
        if not zeroed:
            return "a row whose every entry is masked is NaN (-inf - -inf), and so is every gradient through it"
        note = gradient_note(self.ctx) if fill.additive else None
        if note is None:
            return None  # masked_fill's backward zeroes the masked entries: finite both ways (measured)
        return (
            "the output is re-zeroed where masked, so the forward is finite, but a fully masked row "
            "still sends NaN into the gradient of the scores through the additive mask" + note
        )

    @staticmethod
    def _advice(fill: InfFill) -> str:
        if fill.form == "log":
            return (
                "the log of a 0/1 mask is -inf where it is 0: build the additive mask as "
                "`torch.where(keep, 0.0, torch.finfo(dtype).min)` and add it once, or use "
                "`F.scaled_dot_product_attention`"
            )
        if fill.additive:
            return (
                "build the mask with `torch.finfo(dtype).min` and add it once (finfo.min + finfo.min "
                "is -inf again), or use `F.scaled_dot_product_attention`"
            )
        return "fill with `torch.finfo(x.dtype).min` (a fully masked row becomes uniform)"

    def _fix(self, fill: InfFill):
        target = strip_parens(fill.target) if fill.target is not None else None
        if fill.additive or fill.form not in _FIXABLE or target is None or not is_plain(target):
            return None
        fix = self.fix()
        finfo = cst.Call(func=fix.ref("torch.finfo"), args=[cst.Arg(cst.Attribute(value=target, attr=cst.Name("dtype")))])
        fix.replace(fill.value, cst.Attribute(value=finfo, attr=cst.Name("min")))
        return fix
