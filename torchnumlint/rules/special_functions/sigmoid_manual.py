"""TNL111 sigmoid-manual: the logistic function written out, `1 / (1 + exp(-x))` or
`exp(x) / (1 + exp(x))`, whose `exp` overflows where `torch.sigmoid` does not.

Two shapes, in every spelling of their parts (`elementary.one_plus`, `elementary.exp_of`: `x + 1`,
`.add(1)`, `torch.ones_like(x) + ...`, `x.exp()`, through local names):

- the reciprocal of `1 + exp(v)`: `c / (1 + exp(v))`, `torch.div`, `torch.reciprocal`,
  `.reciprocal()`, `** -1`, `.pow(-1)`; it is `c * sigmoid(-v)`. Its forward pass is exact (once
  `exp(v)` is Inf the quotient is 0, which is right), so only its gradient is at stake: the
  reciprocal's derivative `-1 / (1 + e) ** 2` is -0 there, times `e = Inf`: NaN. Code that runs
  without a gradient, or a `v` that carries none, is left alone.
- the ratio `exp(v) / (1 + exp(v))`, which is `sigmoid(v)`, its numerator possibly with a factor
  (`g * exp(v) / (1 + exp(v))` is `g * sigmoid(v)`): Inf / Inf = NaN in the forward pass once
  `exp(v)` overflows, with or without a gradient.

The message names the form found: its numerator and the sign its exponent is written with, which
says on which side exp overflows.

An exponent clamped from above (`exp(-x.clamp(min=-30))`, `exp(v.clamp(max=30))`) cannot
overflow and is not reported. Nor is a form that a `torch.where` keeps only where its exponent is
bounded (`torch.where(v > t, y, g * z / (z + 1))` with `z = exp(v)`: torch's `softplus_backward`):
the condition compares the exponent itself with a threshold, and the form sits in the branch kept
below it, so every selected value and its gradient are finite. The NaN that the unselected entries
still send into the gradient is the catalogue's where-unselected-branch hazard, not this rule's.

Evidence of the magnitude (`magnitudes.magnitude`): exp overflows only past |x| = 88.72 (float32;
11.09 for a tensor that is float16 itself: under CUDA's autocast exp runs in float32, measured
with `cuda_policy`: the gradient of `1 / (1 + exp(-(h @ w)))` is NaN from -90, not -12), which
the logits of a learned map reach (a matrix product, a linear layer, a submodule's output, a
parameter the project's callers pass one, named in the message); an image in [0, 1] times a
gain, a value of unknown origin or a helper no one calls is reported only in strict mode.

The fix, `torch.sigmoid(x)` (times the numerator or factor when there is one), equals the
original wherever the original is finite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.bindings import Binding, is_plain
from torchnumlint.rules.calls import make_op, match_call
from torchnumlint.rules.divisors import division_operands, replaces_whole
from torchnumlint.rules.elementary import Exp, exp_of, is_one, one_plus, overflowing_exp
from torchnumlint.rules.evidence import may_carry_grad
from torchnumlint.rules.gradient_context import gradient_free, in_reference_implementation
from torchnumlint.rules.magnitudes import magnitude
from torchnumlint.rules.rewrite import negated
from torchnumlint.rules.special_functions.placing import placed, torch_function
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.test_code import STRICT_IN_TESTS, in_test_code

_RECIPROCAL = make_op("reciprocal", {"torch.reciprocal"}, "reciprocal")
# What a finding without evidence of the magnitude says, in strict mode.
STRICT_MAGNITUDE = "strict mode: no evidence that the input passes 88.7 in magnitude here"
_MAX_CHAIN = 4


@dataclass
class Logistic:
    """A sigmoid by hand: `node` computes `scale * sigmoid(arg)` (`scale` None for one)."""

    node: cst.CSTNode
    arg: cst.BaseExpression  # what the sigmoid is of, written for the fix
    scale: Optional[cst.BaseExpression]
    ratio: bool  # exp(v) / (1 + exp(v)): NaN in the forward
    exp: Exp  # the exp of the denominator
    chain: List[Binding]  # names followed from the node to the exp (recomputed by the fix)

    def why(self) -> str:
        """The hazard, naming the form found: its numerator (`1`, `c`) and the sign its exponent
        is written with, which says on which side exp overflows."""
        if self.ratio:
            top = "exp(x)" if self.scale is None else "c * exp(x)"
            return f"`{top} / (1 + exp(x))` is Inf / Inf = NaN once exp(x) overflows (x > 88.72 in float32, 11.09 in float16)"
        top = "1" if self.scale is None else "c"
        if _written_negated(self.exp.call.input) is not None:
            exponent, side = "-x", "x < -88.72 in float32, -11.09 in float16"
        else:
            exponent, side = "x", "x > 88.72 in float32, 11.09 in float16"
        return f"`{top} / (1 + exp({exponent}))` has a NaN gradient once exp({exponent}) overflows ({side})"


def _denominator_exp(ctx, expr: cst.BaseExpression):
    """The `exp(v)` of `expr` = `1 + exp(v)` (through local names), with the names followed."""
    chain: List[Binding] = ctx.chain(expr, _MAX_CHAIN, names_only=True)
    value = strip_parens(chain[-1].value if chain else expr)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
    total = one_plus(ctx, value)
    if total is None or total.negative:
        return None
    exp = overflowing_exp(ctx, total.term)
    if exp is None:
        return None
    return exp, chain + list(exp.chain)


def _written_negated(v: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` where `v` is written negated (`-x`, `-c * x` -> `c * x`, `x.neg()`), else None."""
    v = strip_parens(v)
    if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus):
        return strip_parens(v.expression)
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, (cst.Multiply, cst.Divide)):
        left = strip_parens(v.left)
        if isinstance(left, cst.UnaryOperation) and isinstance(left.operator, cst.Minus):
            return v.with_changes(left=left.expression, lpar=[], rpar=[])
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "neg" and not v.args:
        return strip_parens(v.func.value)
    return None


def _negation(v: cst.BaseExpression) -> cst.BaseExpression:
    """`-v`, simplified where `v` is written negated."""
    inner = _written_negated(v)
    return inner if inner is not None else negated(strip_parens(v))


def _exp_factor(ctx, top: cst.BaseExpression, v: cst.BaseExpression):
    """(the rest or None, the `exp(v)`) where the numerator `top` is `exp(v)` or `c * exp(v)` /
    `exp(v) * c` for the same plain `v`; else None."""
    top = strip_parens(top)
    splits: List[Tuple[Optional[cst.BaseExpression], cst.BaseExpression]] = [(None, top)]
    if isinstance(top, cst.BinaryOperation) and isinstance(top.operator, cst.Multiply):
        splits += [(top.left, top.right), (top.right, top.left)]
    for rest, factor in splits:
        found = exp_of(ctx, factor)
        if found is not None and same_code(ctx, found.call.input, v) and is_plain(v):
            return rest, found
    return None


def _reciprocal(ctx, node: cst.CSTNode):
    """(numerator or None for one, denominator) of `c / d`, `torch.reciprocal(d)`,
    `d.reciprocal()`, `d ** -1`, `d.pow(-1)`, `torch.pow(d, -1)`."""
    operands = division_operands(ctx, node)
    if operands is not None:
        top, bottom = operands
        return (None if is_one(ctx, top) else top), bottom
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        return (None, node.left) if number_value(strip_parens(node.right)) == -1.0 else None
    match = match_call(ctx.imports, node, _RECIPROCAL, "pow")
    if match is None or not match.fully_known:
        return None
    if match.op.name == "pow":
        exponent = match.arg("exponent")
        if exponent is None or number_value(strip_parens(exponent)) != -1.0:
            return None
    return None, match.input


def logistic(ctx, node: cst.CSTNode) -> Optional[Logistic]:
    """`node` as a sigmoid written by hand, or None."""
    found = _reciprocal(ctx, node)
    if found is None:
        return None
    top, bottom = found
    denominator = _denominator_exp(ctx, bottom)
    if denominator is None:
        return None
    exp, chain = denominator
    v = exp.call.input
    if top is not None:
        ratio = _exp_factor(ctx, top, v)
        if ratio is not None:
            rest, numerator = ratio
            more = [b for b in numerator.chain if all(b is not seen for seen in chain)]
            return Logistic(node, strip_parens(v), rest, True, exp, chain + more)
    return Logistic(node, _negation(v), top, False, exp, chain)


_ABOVE = (cst.GreaterThan, cst.GreaterThanEqual)
_BELOW = (cst.LessThan, cst.LessThanEqual)
_WHERE_BRANCHES = (("input", 1), ("other", 2))


def _where_arg(call: cst.Call, name: str, index: int) -> Optional[cst.Arg]:
    """The argument `name` (positional at `index`) of a `torch.where` call."""
    for i, arg in enumerate(call.args):
        if (arg.keyword is None and i == index) or (arg.keyword is not None and arg.keyword.value == name):
            return arg
    return None


def bounded_by_where(ctx, v: cst.BaseExpression) -> bool:
    """Whether a `torch.where` around the node being visited keeps it only where the exponent
    `v` is at most a threshold: its condition is `v > t` / `v >= t` (or `t < v`) and the node is
    in `other`, or `v < t` / `v <= t` (or `t > v`) and it is in `input`."""
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        call = stack[i]
        if not (isinstance(call, cst.Call) and ctx.qualname(call.func) == "torch.where"):
            continue
        condition = _where_arg(call, "condition", 0)
        test = strip_parens(condition.value) if condition is not None else None
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        target = test.comparisons[0]
        if same_code(ctx, test.left, v):
            above = isinstance(target.operator, _ABOVE)  # v > t: the kept branch is `other`
        elif same_code(ctx, target.comparator, v):
            above = isinstance(target.operator, _BELOW)  # t < v
        else:
            continue
        if not isinstance(target.operator, _ABOVE + _BELOW):
            continue
        name, index = _WHERE_BRANCHES[1] if above else _WHERE_BRANCHES[0]
        if _where_arg(call, name, index) is stack[i + 1]:
            return True
    return False


class SigmoidManual(Rule):
    code = "TNL111"
    name = "sigmoid-manual"
    finds = "`1 / (1 + exp(-x))`, `exp(x) / (1 + exp(x))` in every spelling: NaN gradient (forward) once exp overflows"
    fix_summary = "safe: `torch.sigmoid(x)`"
    message = "sigmoid written by hand: {why}; use `torch.sigmoid`{scaled}"
    rationale = (
        "`1 / (1 + torch.exp(-x))` overflows in its exp for x < -88.72 in float32 (-89 in "
        "bfloat16, -11.09 in float16). The forward value is still right (1 / Inf = 0), but the "
        "gradient is 0 * Inf = NaN for every such x (measured on torch 2.13: NaN from x = -88.723 "
        "in float32, from -11.094 in float16), and one NaN gradient entry ruins the whole update. "
        "`torch.exp(x) / (1 + torch.exp(x))` is already NaN in the forward pass from x = 88.723 "
        "(Inf / Inf). `torch.sigmoid` never overflows: it equals both forms wherever they are "
        "finite (to 6e-8 in float32) and its gradient is finite everywhere, so the fix is safe. "
        "Reported by default where the input is the output of a learned map (a matrix product, a "
        "linear layer, a submodule, or a parameter the project's callers pass one), which the "
        "message names; an image times a gain, or a helper no one calls, only in strict mode."
        " In test code (a `tests/` folder of the project, `test_*.py`, `*_test.py`, `conftest.py`) "
        "it is strict-mode only: a test's model trains for a few steps and never reaches |x| of 88.7."
    )
    safety = Safety.SAFE
    needles = ("exp",)
    pattern = r"\bexp\b"  # the word: `exp_of` matches torch's exp by name (not `expand`, `expected`)
    needs_index = True  # the input is judged at callers in other modules (`rules/magnitudes.py`)
    examples = (
        Example(
            bad=(
                "import torch\n\n\ndef gate(x):\n    return 1 / (1 + torch.exp(-x))\n"
                "\n\ndef gated_unit(h, w):\n    return h * gate(h @ w)\n"
            ),
            lines=(5,),
            fixed=("import torch\n\n\ndef gate(x):\n    return torch.sigmoid(x)\n\n\ndef gated_unit(h, w):\n    return h * gate(h @ w)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class Gated(nn.Module):\n"
                "    def forward(self, h, w):\n"
                "        z = h @ w\n"
                "        g = (1.0 + (-z).exp()).reciprocal()\n"
                "        e = torch.exp(z)\n"
                "        return g * h + e / (e + 1)\n"
            ),
            lines=(8, 10),
            fixed=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class Gated(nn.Module):\n"
                "    def forward(self, h, w):\n"
                "        z = h @ w\n"
                "        g = torch.sigmoid(z)\n"
                "        return g * h + torch.sigmoid(z)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n\n\ndef shifted_sigmoid(x):\n    return 1.2 / (1 + torch.exp(-(1 / 1.6) * x))\n"
                "\n\ndef quality_head(h, w):\n    return shifted_sigmoid(h @ w)\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n\n\ndef shifted_sigmoid(x):\n    return 1.2 * torch.sigmoid((1 / 1.6) * x)\n"
                "\n\ndef quality_head(h, w):\n    return shifted_sigmoid(h @ w)\n"
            ),
        ),
    )
    good = (
        "import math\nimport numpy as np\nimport torch\n"
        "def f(x, a):\n"
        "    return torch.sigmoid(x) + 1 / (1 + np.exp(-a)) + 1 / (1 + math.exp(-a))\n",
        "import torch\ndef f(x):\n    return 1 / (2 + torch.exp(-x)) + 1 / (1 + torch.exp(-x.clamp(min=-30)))\n",
        "import torch\n@torch.no_grad()\ndef betas(t):\n    return 1 / (1 + torch.exp(-t))\n",
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Divide, cst.Power)):
            self._check(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.DivideAssign):
            self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        ctx = self.ctx
        found = logistic(ctx, node)
        if found is None or in_reference_implementation(ctx):
            return  # a test's reference of sigmoid is naive on purpose
        if bounded_by_where(ctx, found.exp.call.input):
            return  # kept only where exp(v) is bounded; the unselected entries' gradient is where-unselected-branch's
        if not found.ratio and (gradient_free(ctx) or not may_carry_grad(ctx, found.exp.call.input)):
            return  # the reciprocal's forward value is exact; only a gradient can go wrong
        tests = in_test_code(ctx)  # a test's model never trains to |x| of 88.7 (`test_code`)
        source = None if tests else magnitude(ctx, found.exp.call.input).learned
        if source is None and not ctx.strict:
            return  # a bounded input (an image times a gain), one of unknown origin, a test's
        evidence = f"its input is {source}" if source is not None else STRICT_IN_TESTS if tests else STRICT_MAGNITUDE
        scaled = " (times the numerator)" if found.scale is not None else ""
        self.report(node, self._fix(found), why=f"{found.why()} ({evidence})", scaled=scaled)

    def _fix(self, found: Logistic):
        """`torch.sigmoid(x)` (times the numerator) in place of the whole form, recomputed at the
        use when it was read through names (`placing.placed`); no fix for `y /= ...`, `div_`."""
        if isinstance(found.node, cst.AugAssign) or not replaces_whole(found.node):
            return None

        def build(fix) -> cst.BaseExpression:
            new: cst.BaseExpression = torch_function(fix, found.exp.call.call, "sigmoid", found.arg)
            if found.scale is None:
                return new
            space = cst.SimpleWhitespace(" ")
            return cst.BinaryOperation(found.scale, cst.Multiply(space, space), new)

        node = found.node
        assert isinstance(node, cst.BaseExpression)
        fix, _ = placed(self, node, node, found.chain, build, [found.exp.call.input], "")
        return fix
