"""TNL207 unguarded-log: `torch.log(v)` (also `log2`, `log10`, method forms) of a value whose
entries the code shows can be exactly 0 (`rules/zeros.py`): normalised counts and histograms,
relu and absolute values, uniform draws (`-log(-log(torch.rand(...)))` without eps), ratios
whose numerator is one of these, sums of `|d| ** p`, one-hot tensors, literal tables with a 0,
accumulators still at their zeros; and entropies `p * log(p)`, where 0 * -inf = NaN.

A log of a softmax or sigmoid (or of a sum of selected softmax entries) is TNL103's / TNL104's (`rules/ownership.py`: their log-space
rewrites are exact, a clamp is not); a `log(1 + x)` TNL106's; a log inside a `torch.where` or a
`masked_fill` that tests its input has a finite forward (its gradient is TNL209's). `log(mask)` (a 0/-inf additive mask) and a log whose -inf is
only ranked (`argmax`, `topk` with no gradient) are meant, and never reported.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.divisors import clamp_fix
from torchnumlint.rules.elementary import one_plus
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch, is_torch_value, may_carry_grad, value_kind
from torchnumlint.rules.gradient_context import in_reference_implementation
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.log_domain.selected_sums import softmax_sum
from torchnumlint.rules.made_by import sigmoid_call, softmax_call
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.number_kinds import is_positive
from torchnumlint.rules.syntax import same_code, strip_parens
from torchnumlint.rules.calls import make_op, match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.uses import only_ranked, uses_of
from torchnumlint.rules.selections import enclosing_selection, mentions
from torchnumlint.rules.zeros import element_zero, kept_positive

_LOG2 = make_op("log2", {"torch.log2", "torch.special.log2"}, "log2")
_LOG10 = make_op("log10", {"torch.log10"}, "log10")
# a log whose -inf is absorbed right away: `out.log().nan_to_num(neginf=0.0)`, `log(x).clamp(min=-100)`,
# or cast to an integer (a bucket index that `where` then selects away: T5's relative positions)
_ABSORBING = frozenset({"nan_to_num", "nan_to_num_", "torch.nan_to_num"})
_FLOORING = frozenset({"clamp", "clip", "clamp_min", "torch.clamp", "torch.clip", "torch.clamp_min"})
_INTEGER_CASTS = frozenset({"long", "int", "short", "round", "floor", "ceil"})
_INTEGER_DTYPES = frozenset({"torch.long", "torch.int", "torch.int64", "torch.int32"})


class UnguardedLog(Rule):
    code = "TNL207"
    name = "unguarded-log"
    finds = "`torch.log(v)` (`log2`, `log10`, method forms) of a value the code shows can be exactly 0: normalised counts and histograms, relu/abs outputs, uniform draws (Gumbel noise without eps), ratios of counts, sums of `|d| ** p`, tables with a 0, accumulators at their zeros; entropies `p * log(p)` (0 * -inf = NaN)"
    fix_summary = "unsafe: `v.clamp_min(1e-12)`; safe: `torch.special.xlogy(p, p)`"
    message = "`{op}` of {what}: log 0 = -inf{entropy}; {how}"
    rationale = (
        "`log(0)` is -inf, and its gradient 1 / 0 is inf: a loss that reads it is inf, and "
        "`0 * log(0)` (an entropy term, a one-hot target times a log-probability) is NaN in the "
        "forward and the backward pass. Values that are exactly 0 are common: a class absent "
        "from the batch leaves its normalised count at 0, relu and abs give 0, a histogram has "
        "empty bins, and `torch.rand` returns exactly 0.0 (measured on torch 2.13: float32 draws "
        "are multiples of 2^-24, so 1 in 16.7M entries is 0.0, once per 512 x 32768 Gumbel draw; "
        "of 2M draws 3981 were 0.0 in bfloat16 and 501 in float16). The fix clamps the argument, "
        "`torch.log(v.clamp_min(1e-12))` (log 1e-12 = -27.6), on values known never to be "
        "negative; it moves values below 1e-12, so it is unsafe. An entropy `p * torch.log(p)` "
        "becomes `torch.special.xlogy(p, p)`, which is 0 at p = 0 and equal elsewhere (safe; its "
        "gradient at p = 0 is still NaN, as the original's, so a differentiated entropy needs "
        "`p.clamp_min(eps)`). Reported by default only where the code shows that an entry reaches "
        "0; `+ eps`, a clamp with a positive floor, exp, softplus, `x + 1` and constants are never "
        "reported, nor a softmax or sigmoid (TNL103, TNL104) or a mask (a deliberate -inf)."
    )
    safety = Safety.UNSAFE
    needles = ("log",)
    pattern = r"\blog(2|10)?\b"
    ast_calls = ("log", "log2", "log10")
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def class_log_prior(labels):\n"
                "    counts = torch.bincount(labels, minlength=10).float()\n"
                "    return torch.log(counts / counts.sum())\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def class_log_prior(labels):\n"
                "    counts = torch.bincount(labels, minlength=10).float()\n"
                "    return torch.log((counts / counts.sum()).clamp_min(1e-12))\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def code_usage_entropy(assign):\n"
                "    usage = torch.relu(assign).sum(0)\n"
                "    p = usage / usage.sum()\n"
                "    return -(p * torch.log(p)).sum()\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def code_usage_entropy(assign):\n"
                "    usage = torch.relu(assign).sum(0)\n"
                "    p = usage / usage.sum()\n"
                "    return -(torch.special.xlogy(p, p)).sum()\n"
            ),
            safety="safe",
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def gumbel_sample(logits):\n"
                "    u = torch.rand_like(logits)\n"
                "    g = -torch.log(-torch.log(u))\n"
                "    return torch.softmax(logits + g, dim=-1)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def gumbel_sample(logits):\n"
                "    u = torch.rand_like(logits)\n"
                "    g = -torch.log(-torch.log(u.clamp_min(1e-12)))\n"
                "    return torch.softmax(logits + g, dim=-1)\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "\n"
        "\n"
        "def f(x, counts, eps=1e-8):\n"
        "    p = counts / counts.sum()\n"
        "    a = torch.log(p + eps) + torch.log(torch.clamp(x.relu(), min=1e-6))\n"
        "    b = torch.log(torch.exp(x)) + torch.log(F.softplus(x)) + torch.log(x.abs() + 1)\n"
        "    return a + b + torch.log(torch.tensor(10000.0))\n",
        "import torch\n\n\ndef additive_mask(mask):\n    return torch.log(mask.float())\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        match = match_call(self.ctx.imports, node, "log", _LOG2, _LOG10)
        if match is None or not match.fully_known:
            return
        ctx, arg = self.ctx, match.input
        if is_not_torch(ctx, arg) or in_reference_implementation(ctx) or self._owned(arg) or self._absorbed(arg):
            return
        zero = element_zero(ctx, arg)  # a clamp at 0 is evidence, not a guard
        if zero is None and (is_guarded(ctx, arg) or is_positive(ctx, arg) or is_mask(ctx, arg, by_name=False) or kept_positive(ctx, arg)):
            return
        entropy = self._entropy_partner(node, arg)
        if zero is None and entropy is None and not ctx.strict:
            return
        if self._only_ranked(arg):
            return  # -inf ranks last: decoding, a search, an argmax, a sampling key
        what = (
            zero.why
            if zero is not None
            else ("an entropy's probabilities" if entropy is not None else f"a value that may be 0 {STRICT_WHY}")
        )
        torch_value = value_kind(ctx, node) == "torch" or is_torch_value(ctx, arg)
        fix, how = None, "clamp it first: `.clamp_min(eps)`"
        if entropy is not None:
            how = "write it `torch.special.xlogy(p, p)` (0 at p = 0)"
            # xlogy is the natural log's: an entropy in bits (log2) or decimal digits gets no rewrite
            fix = self._xlogy_fix(entropy, arg) if torch_value and match.op.name == "log" else None
        elif zero is not None and zero.non_negative and torch_value:
            fix = clamp_fix(self, arg)
        note = ", and 0 * -inf = NaN in the entropy term" if entropy is not None else ""
        op = match.op.name if match.form == "function" else f".{match.op.name}()"
        self.report(node, fix, op=op, what=what, entropy=note, how=how)

    def _only_ranked(self, arg: cst.BaseExpression) -> bool:
        """The log's -inf is only compared, sorted or top-k'd, and no gradient flows (a sampling
        key `rand.log() / w` whose top-k picks the sample)."""
        ctx = self.ctx
        uses = uses_of(ctx, ctx.stack)
        if only_ranked(ctx, uses):
            return True
        return uses <= {"rank", "index", "shape"} and "rank" in uses and not may_carry_grad(ctx, arg)

    def _owned(self, arg: cst.BaseExpression) -> bool:
        """A site another rule reports better: a softmax's or sigmoid's log (exact log-space
        rewrites), `log(1 + x)` / `log(1 - x)` (log1p), a logit by hand (`logit(p, eps)`)."""
        ctx = self.ctx
        softmax = softmax_call(ctx, arg) is not None or softmax_sum(ctx, arg) is not None  # `log(p[:, idx].sum(-1))` too
        if softmax and owned_elsewhere(ctx, self.code, "log-of-softmax"):
            return True
        if sigmoid_call(ctx, arg) is not None and owned_elsewhere(ctx, self.code, "log-of-sigmoid"):
            return True
        if one_plus(ctx, arg) is not None:
            return True  # TNL106's site; `1 + x` of a non-negative x is no zero, `1 - u` of a draw neither
        return self._log_odds(arg) and owned_elsewhere(ctx, self.code, "log-odds")

    def _log_odds(self, arg: cst.BaseExpression) -> bool:
        """`log(p / (1 - p))`, or the `log(p)` of `log(p) - log(1 - p)`: a logit by hand."""
        ctx = self.ctx
        value = strip_parens(ctx.resolve(arg))
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
            odds = one_plus(ctx, strip_parens(ctx.resolve(value.right)))
            return odds is not None and odds.negative and same_code(ctx, odds.term, value.left)
        parent = ctx.stack[-2] if len(ctx.stack) >= 2 else None
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Subtract):
            other = match_call(ctx.imports, strip_parens(parent.right), "log")
            complement = one_plus(ctx, strip_parens(ctx.resolve(other.input))) if other is not None else None
            return complement is not None and complement.negative and same_code(ctx, complement.term, arg)
        return False

    def _absorbed(self, arg: cst.BaseExpression) -> bool:
        """The -inf is replaced in the same expression, through arithmetic: `v.log().nan_to_num()`,
        `torch.clamp(20 * torch.log10(v), min=-80)`, `(torch.log(n / m) * k).long()` (an index),
        or selected away by a `where`/`masked_fill` that tests `v` (whose gradient is TNL209's)."""
        stack, ctx = self.ctx.stack, self.ctx
        selection = enclosing_selection(ctx)
        if selection is not None and mentions(ctx, selection.condition, arg):
            return True
        for i in range(len(stack) - 2, 0, -1):
            node, child, above = stack[i], stack[i + 1], stack[i - 1]
            if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation)):
                continue
            if isinstance(node, cst.Attribute) and node.value is child and isinstance(above, cst.Call):
                name = node.attr.value
                if name in _ABSORBING or name in _INTEGER_CASTS:
                    return True
                if name in ("to", "type") and any(ctx.qualname(a.value) in _INTEGER_DTYPES for a in above.args):
                    return True
                return name in _FLOORING and self._floors(above, method=True)
            if isinstance(node, cst.Arg) and isinstance(above, cst.Call):
                qual = ctx.qualname(above.func)
                return qual in _ABSORBING or (qual in _FLOORING and self._floors(above, method=False))
            return False
        return False

    @staticmethod
    def _floors(call: cst.Call, method: bool) -> bool:
        """A clamp call that sets a lower bound (`clamp(min=-100)`, `clip(-100, 0)`)."""
        keyword = any(a.keyword is not None and a.keyword.value == "min" for a in call.args)
        positional = [a for a in call.args if a.keyword is None]
        return keyword or len(positional) >= (1 if method else 2)

    def _entropy_partner(self, node: cst.Call, arg: cst.BaseExpression) -> Optional[cst.BinaryOperation]:
        """The product `p * log(p)` (either order, `-p * log(p)` too) this log is a factor of."""
        parent = self.ctx.stack[-2] if len(self.ctx.stack) >= 2 else None
        if not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply)):
            return None
        other = parent.left if parent.right is node else parent.right
        other = strip_parens(other)
        if isinstance(other, cst.UnaryOperation) and isinstance(other.operator, cst.Minus) and parent.left is not node:
            other = strip_parens(other.expression)
        return parent if same_code(self.ctx, other, arg) else None

    def _xlogy_fix(self, product: cst.BinaryOperation, arg: cst.BaseExpression):
        """`p * log(p)` -> `torch.special.xlogy(p, p)`; `-p * log(p)` -> `-torch.special.xlogy(p, p)`."""
        fix = self.fix(Safety.SAFE)
        p = strip_parens(arg)
        call = cst.Call(func=fix.ref("torch.special.xlogy"), args=[cst.Arg(p), cst.Arg(p)])
        left = strip_parens(product.left)
        negated = isinstance(left, cst.UnaryOperation) and isinstance(left.operator, cst.Minus)
        new: cst.BaseExpression = cst.UnaryOperation(operator=cst.Minus(), expression=call) if negated else call
        fix.replace(product, new)
        return fix
