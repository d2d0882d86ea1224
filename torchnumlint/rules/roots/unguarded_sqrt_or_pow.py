"""TNL206 unguarded-sqrt-or-pow: a square root, reciprocal root or fractional power of a value
that reaches 0 or rounds below it (`shapes.root_hazard`): a variance, a difference, a mean or
other reduction of squares, an elementwise square (`sqrt(x ** 2)`, an absolute value by hand),
an element-wise sum of squares (`sqrt(gx * gx + gy * gy)`, an image's gradient magnitude), a
quadratic form (`sqrt(v @ M @ v)`). At 0 the derivative is infinite (inf or 0 * inf = NaN in
the backward pass); below 0 the forward pass is NaN. Reported by default with evidence in the
code that the value gets there, and where a gradient flows for a hazard that is only the
gradient's (`rules/evidence.py`, `rules/gradients.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.degrees import ISOLATED, Degree, degree, read_at_endpoints
from torchnumlint.rules.divisors import COUNT_EPS, EPS, clamp_fix, division_operands, zero_kind
from torchnumlint.rules.evidence import (
    STRICT_WHY,
    difference_evidence,
    is_bounded,
    is_data,
    is_not_torch,
    is_torch_value,
    may_carry_grad,
    row_evidence,
    value_kind,
)
from torchnumlint.rules.gradient_context import gradient_note
from torchnumlint.rules.guarding import is_tested
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.mends import mended_after
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.roots.base import RootRule
from torchnumlint.rules.shapes import (
    in_place,
    is_finite_difference,
    norms_of_squares,
    quadratic_form,
    reciprocal,
    reduced_square,
    root_hazard,
    shape_step,
    square_base,
    summed_squares,
    through_shape,
)

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

FLAT = "where neighbouring values are equal (a flat region: every component a difference of neighbours)"


def _mean_of_squares_of(ctx: "FileContext", second: cst.BaseExpression, mean: cst.BaseExpression) -> bool:
    """Whether `second - mean ** 2` is a variance by hand: `mean` is `x.mean(...)` and `second`
    is the mean of the squares of the same x; or both are scatter means over the same index
    (`scatter_mean(x * x, batch) - scatter_mean(x, batch) ** 2`, a per-graph variance)."""
    first = _mean(ctx, strip_parens(ctx.resolve(mean)))
    second_mean = _mean(ctx, strip_parens(ctx.resolve(second)))
    if first is None or second_mean is None or (first[1] is None) != (second_mean[1] is None):
        return False
    if first[1] is not None and not same_code(ctx, first[1], second_mean[1]):
        return False
    base = square_base(ctx, strip_parens(ctx.resolve(second_mean[0])))
    return base is not None and same_code(ctx, base, first[0])


def _mean(ctx: "FileContext", value: cst.BaseExpression):
    """(what is averaged, the scatter index or None) of `x.mean(...)`, `scatter_mean(x, index)` or
    `scatter(x, index, ..., reduce="mean")` (a graph library's per-segment mean), else None."""
    match = match_call(ctx.imports, value, "mean")
    if match is not None:
        return match.input, None
    if not isinstance(value, cst.Call) or len(value.args) < 2 or any(a.star for a in value.args[:2]):
        return None
    qual = ctx.qualname(value.func) or ""
    last = qual.rpartition(".")[2]
    reduce = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "reduce"), None)
    is_mean = last == "scatter_mean" or (last == "scatter" and isinstance(reduce, cst.SimpleString) and reduce.evaluated_value == "mean")
    if not is_mean or not qual.startswith(("torch_geometric", "torch_scatter")):
        return None
    return value.args[0].value, value.args[1].value


def _is_cosine(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A cosine similarity, by `F.cosine_similarity`, by hand (a quotient by a norm) or by name
    (`cos_theta`, `cosine`), and not clamped inside (-1, 1)."""
    if is_bounded(ctx, expr):
        return False
    value = strip_parens(ctx.resolve(expr))
    ident = value.value if isinstance(value, cst.Name) else value.attr.value if isinstance(value, cst.Attribute) else ""
    if ident.lower().startswith("cos") and not ident.lower().startswith("cosh"):
        return True
    if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.nn.functional.cosine_similarity":
        return True
    return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide) and (zero_kind(ctx, value.right) is not None)


class UnguardedSqrtOrPow(RootRule):
    code = "TNL206"
    name = "unguarded-sqrt-or-pow"
    finds = (
        "`sqrt`/`rsqrt`/`** 0.5` of a variance, a difference, a mean of squares, a quadratic form; "
        "`sqrt(x**2)`; `sqrt(gx * gx + gy * gy)` of finite differences; `deg.pow(-0.5)` of a graph degree without self-loops (an isolated node)"
    )
    fix_summary = "unsafe: clamp inside the root; safe: `torch.abs(x)`"
    message = "{op} of {what}, {edge}; {how}{note}"
    rationale = (
        "A variance, a difference such as `E[x^2] - E[x]^2` or `1 - c ** 2`, or a mean of squares "
        "reaches exactly 0 for a constant or zero row and goes slightly negative through rounding. "
        "`sqrt` (and any fractional power) of a negative number is NaN; at 0 the derivative "
        "1 / (2 sqrt(v)) is infinite, so the backward pass gives inf or 0 * inf = NaN; `rsqrt` is "
        "already infinite in the forward pass. The fix clamps the argument inside the root, "
        "`torch.sqrt(v.clamp_min(1e-12))` (1e-12 as F.normalize's eps; the root is then at least "
        "1e-6 and its gradient finite). It moves results whose argument was below 1e-12, so it is "
        "unsafe. An element-wise sum of squares, `torch.sqrt(gx * gx + gy * gy)` (a gradient "
        "magnitude, an edge map, a 2-D distance), is 0 where every component is: measured on "
        "torch 2.13, the finite differences of an 8 x 8 image with one edge give 42 of 49 "
        "magnitudes 0 and 62 of the image's 64 gradient entries NaN (none with the clamp, or "
        "with `+ 1e-6`; `torch.hypot` is NaN there too). Reported by default where every "
        "component is a difference of neighbouring entries (`x[..., 1:] - x[..., :-1]`, "
        "`torch.diff`) or otherwise reaches 0 with its row; else in strict mode. "
        "Roots of plain numbers, shapes, guarded values, exp/softplus/sigmoid and "
        "`x ** 2 + eps` are never flagged; a root of a sum of squares is TNL204's, and a root "
        "written directly as a denominator is TNL201's."
    )
    safety = Safety.UNSAFE
    needles = ("sqrt", "**", "pow")
    # a root: sqrt/rsqrt, or a power whose exponent is a fractional literal (`** 0.5`, `pow(1.5)`)
    # a fractional literal exponent, or a tensor one (`** self.p`, `** torch.sigmoid(a)`: `exponents.py`)
    pattern = r"sqrt|\*\*\s*\(?\s*-?\d*\.\d|\*\*\s*\(?\s*-?\d+e|pow_?\s*\(|\*\*\s*\(?\s*(self\.|[\w.]*sigmoid)"
    examples = (
        Example(
            bad=("import torch\n\n\ndef inv_std(x):\n    return torch.rsqrt(x.var(dim=-1, keepdim=True))\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef inv_std(x):\n    return torch.rsqrt(x.var(dim=-1, keepdim=True).clamp_min(1e-12))\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def spread_loss(x, cos: torch.Tensor):\n"
                "    mu = x.mean(-1)\n"
                "    var = (x * x).mean(-1) - mu ** 2\n"
                "    sd = torch.sqrt(var)\n"
                "    sin = (1 - cos ** 2) ** 0.5\n"
                "    rms = ((x - mu[..., None]) ** 2).mean(-1).pow(0.5)\n"
                "    return sd + sin + rms\n"
            ),
            lines=(7, 8, 9),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def spread_loss(x, cos: torch.Tensor):\n"
                "    mu = x.mean(-1)\n"
                "    var = (x * x).mean(-1) - mu ** 2\n"
                "    sd = torch.sqrt(var.clamp_min(1e-12))\n"
                "    sin = (1 - cos ** 2).clamp_min(1e-12) ** 0.5\n"
                "    rms = ((x - mu[..., None]) ** 2).mean(-1).clamp_min(1e-12).pow(0.5)\n"
                "    return sd + sin + rms\n"
            ),
        ),
    )
    good = (
        "import math\nimport torch\nimport torch.nn.functional as F\n"
        "def f(x, d_model, eps=1e-5):\n"
        "    a = math.sqrt(d_model) * torch.sqrt(torch.tensor(2.0)) * x.shape[-1] ** 0.5\n"
        "    b = torch.sqrt(x.var(-1) + eps) + torch.rsqrt(x.pow(2).mean(-1) + eps)\n"
        "    c = torch.sqrt(F.softplus(x)) + torch.exp(x).sqrt() + torch.sqrt(x ** 2 + eps)\n"
        "    return a * b * c * torch.sqrt((x - x.mean()).clamp(min=0)) ** 2\n",
        "import torch\n"
        "def f(x, y):\n"
        "    return torch.sqrt((x ** 2).sum(-1)) + torch.sqrt(x ** 2 + y ** 2) + torch.sqrt(x) + x.sum() ** 0.5\n",
        "import torch\ndef f(x, alpha_bar):\n    return torch.sqrt(1 - alpha_bar) * x / torch.sqrt(x.var(0))\n",
    )

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:
        ctx = self.ctx
        if reciprocal(ctx, node):
            found = degree(ctx, arg)
            if found is not None:
                self._degree(node, kind, arg, found)
                return
        what = root_hazard(ctx, arg)
        if what is None and kind == "sqrt" and not owned_elsewhere(ctx, self.code, "root-of-sum-of-squares"):
            norms = norms_of_squares(ctx, arg, node)
            what = {1: "a sum of squares", 2: "a product of sums of squares"}.get(len(norms))
        if what is None or self._is_denominator(node, kind) or is_tested(ctx, arg, ctx.resolve(arg)):
            return
        if what == "a sum of element-wise squares" and any(
            is_not_torch(ctx, b) for b in summed_squares(ctx, through_shape(ctx, arg)) or ()
        ):
            return  # `sqrt(d ** 2 + c ** 2)` of a number c (a pseudo-Huber loss): at least c
        if is_not_torch(ctx, arg) or value_kind(ctx, node) in ("numpy", "python"):
            return
        edge = self._negative(what, arg)
        note = ""
        if edge is None:
            if kind != "rsqrt":
                flows = gradient_note(ctx)
                if flows is None or not may_carry_grad(ctx, arg):
                    return  # only the gradient at 0 is at stake: reported where one flows
                note = flows
            why = self._zero(what, arg)
            if why is None:
                if not ctx.strict:
                    return
                why = STRICT_WHY
            edge = f"which is 0 {why}: " + ("Inf there" if kind == "rsqrt" else "an infinite gradient there")
        torch_value = value_kind(ctx, node) == "torch" or is_torch_value(ctx, arg)
        op = {"sqrt": "`sqrt`", "rsqrt": "`rsqrt`", "pow": "a fractional power"}[kind]
        how = "clamp it first: `.clamp_min(eps)`"
        fix = None
        if torch_value and what == "a square" and kind == "sqrt":
            # `sqrt(x ** 2)` is |x| (within a rounding of the square), with gradient 0 at 0
            how = "it is `torch.abs(x)`"
            base = reduced_square(ctx, arg)[0]  # type: ignore[index]  # this hazard comes from a reduced square (`root_hazard`)
            fix = self.fix(Safety.SAFE)
            fix.replace(
                node,
                cst.parse_expression(f"{ctx.module.code_for_node(fix.ref('torch.abs'))}({ctx.module.code_for_node(strip_parens(base))})"),
            )
        elif torch_value:
            fix = clamp_fix(self, arg)
        self.report(node, fix, op=op, what=what, edge=edge, how=how, note=note)

    def _degree(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression, found: Degree) -> None:
        """`deg.pow(-0.5)` of a graph degree: Inf for an isolated node, NaN once it meets the
        node's zero adjacency row. Left alone where the code mends the Inf right after
        (`d[d == float('inf')] = 0`): a degree is the graph's structure, data that carries no
        gradient (a count of edges never does), so the mend is exact."""
        ctx = self.ctx
        if is_tested(ctx, arg, ctx.resolve(arg)) or is_not_torch(ctx, found.value):
            return
        mend = mended_after(ctx, node)
        if mend is not None:
            return
        why = ISOLATED
        if read_at_endpoints(ctx, node):  # `d[row] * d[col]`: the counted endpoints are never 0
            if not ctx.strict:
                return
            why = STRICT_WHY
        op = {"rsqrt": "`rsqrt`", "pow": "a negative power"}.get(kind, "`sqrt`")
        edge = f"which is 0 {why}: Inf there, and NaN where it meets that node's zero row of the adjacency"
        floor = COUNT_EPS if found.counts else EPS
        how = f"clamp it first: `.clamp_min({floor})`"
        torch_value = found.library or is_torch_value(ctx, arg)  # a clamp_min on numpy would crash
        fix = None if in_place(node) or not torch_value else clamp_fix(self, arg, floor)
        self.report(node, fix, op=op, what="a graph degree", edge=edge, how=how, note="")

    def _negative(self, what: str, arg: cst.BaseExpression) -> Optional[str]:
        """Why the argument goes below 0, a forward NaN wherever the code runs: `E[x^2] - E[x]^2`
        cancels, and `1 - c ** 2` of a cosine computed by hand rounds past 1. None otherwise."""
        ctx = self.ctx
        value = strip_parens(ctx.resolve(arg))
        if what != "a difference" or not isinstance(value, cst.BinaryOperation):
            return None
        right_square = square_base(ctx, ctx.resolve(value.right))
        if right_square is None:
            return None
        if _mean_of_squares_of(ctx, value.left, right_square):
            return "which rounding makes negative (`E[x^2] - E[x]^2` cancels): NaN"
        if number_value(strip_parens(value.left)) is not None and _is_cosine(ctx, right_square):
            return "which is negative once the cosine rounds past 1: NaN"
        return None

    def _zero(self, what: str, arg: cst.BaseExpression) -> Optional[str]:
        """Why the argument reaches 0 for real inputs, or None without evidence."""
        ctx = self.ctx
        if what in ("a mean of squares", "a sum of squares", "a square"):
            return row_evidence(ctx, reduced_square(ctx, arg)[0], strong=True)  # type: ignore[index]  # this hazard comes from a reduced square (`root_hazard`)
        if what == "a sum of element-wise squares":
            return self._components_zero(arg)
        if what == "a product of sums of squares":
            bases = [f.base for f in norms_of_squares(ctx, arg, arg)]
            return next((w for w in (row_evidence(ctx, b, strong=True) for b in bases) if w is not None), None)
        if what == "a quadratic form":
            return row_evidence(ctx, quadratic_form(ctx, through_shape(ctx, arg)), strong=True)  # type: ignore[arg-type]  # this hazard comes from a quadratic form (`root_hazard`)
        if what == "a variance":
            var = match_call(ctx.imports, through_shape(ctx, arg), "var")
            if var is None:
                return None
            if is_data(ctx, var.input):
                return "for constant data"
            rows = row_evidence(ctx, var.input, strong=True)
            return f"for a constant row ({rows})" if rows is not None else None
        return None  # a difference or a sum of unknown terms: that they coincide is no evidence

    def _components_zero(self, arg: cst.BaseExpression) -> Optional[str]:
        """Why every component of `sqrt(gx * gx + gy * gy)` is 0 at once, or None: each is a
        difference of neighbouring entries (an image's or a signal's gradient, 0 in a flat
        region; measured on torch 2.13: an 8 x 8 image with one edge, 62 of its 64 gradient
        entries NaN) or a difference that reaches 0 (`difference_evidence`: a row minus its
        mean, a tensor minus itself pairwise). One component's evidence is not enough: the length
        is 0 only where all of them are. The components of `forward`'s input are none: a vector
        exactly at the origin is no normal input, unlike a flat region of an image."""
        ctx = self.ctx
        reasons = []
        for base in summed_squares(ctx, through_shape(ctx, arg)) or ():
            reason = FLAT if is_finite_difference(ctx, base) else difference_evidence(ctx, through_shape(ctx, base), strong=True)
            if reason is None:
                return None
            reasons.append(reason)
        return reasons[0] if reasons else None

    def _is_denominator(self, node: cst.CSTNode, kind: str) -> bool:
        """A square root written directly as the divisor of a division, under shape-only steps
        (`x / torch.sqrt(v)[..., None]`): TNL201 reports it (with this fix)."""
        if kind != "sqrt" or not owned_elsewhere(self.ctx, self.code, "root-as-divisor"):
            return False
        stack, ctx = self.ctx.stack, self.ctx
        at, operand = len(stack) - 1, node
        while at >= 2:
            parent, above = stack[at - 1], stack[at - 2]
            if shape_step(ctx, parent) is operand:  # `[..., None]`, `.T`
                at, operand = at - 1, parent
            elif isinstance(parent, cst.Attribute) and shape_step(ctx, above) is operand:  # `.unsqueeze(-1)`
                at, operand = at - 2, above
            else:
                break
        division = stack[at - 2] if at >= 2 and isinstance(stack[at - 1], cst.Arg) else stack[at - 1] if at >= 1 else None
        operands = division_operands(ctx, division) if division is not None else None
        return operands is not None and operands[1] is operand
