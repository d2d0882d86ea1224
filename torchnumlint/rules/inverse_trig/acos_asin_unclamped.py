"""TNL208 acos-asin-unclamped: `torch.acos` / `torch.asin` (`arccos`, `arcsin`, method forms) of a
cosine that nothing keeps inside (-1, 1).

A cosine computed in floating point leaves [-1, 1] by rounding: measured on torch 2.13, CPU,
`F.cosine_similarity(a, a)` of random 64-d float32 vectors exceeds 1 in 431 of 2000 draws (up
to 1.00000036), the dot product of two `F.normalize`d copies of one vector in 208 of 1000. acos
of 1.0000001 is NaN; at exactly +-1 the value is finite but the gradient is infinite (acos: -inf,
asin: +inf), and a clamp to exactly [-1, 1] keeps that infinite gradient at the edge.

Evidence (`cosines.cosine_evidence`, on every value the input may hold): a cosine similarity, a
dot product of unit vectors or over the norms, a component of a unit vector (a quaternion's
scalar part), a rotation's `(trace(R) - 1) / 2` of a matrix that rounding takes past it: a product
of rotations (measured: `(trace(R1.T @ R1) - 1) / 2` of 100000 random float32 rotations built
from quaternions exceeds 1 in 27633, up to 1.0000012) or a module's output, or one a gradient
flows through in a module (the gradient is infinite at +-1 even when exact); R a parameter is
judged by what its callers pass (`magnitudes.magnitude`). One rotation built from cos/sin of
an angle, or from a unit quaternion, never passes 1 (its trace is 3 minus non-negative
terms). Without evidence (any acos of a tensor) the rule reports only in strict mode. Not
reported: a value clamped strictly inside (-1, 1) (an upper bound other than the literal 1) or
shrunk by a factor in [0.9, 1), a value tested in the function's control flow (a slerp that
falls back to lerp above a threshold), code that runs without a gradient and detached values
(diagnostics), `math.acos` / `np.arccos` of non-tensors. A clamp to exactly [-1, 1] keeps the
forward finite; it is reported only in strict mode.

Fix (UNSAFE: moves acos(1) from 0 to acos(1 - eps), 4.9e-4 in float32): clamp the input to
+-(1 - eps) with the eps of its own dtype, `v.clamp(-1 + torch.finfo(v.dtype).eps, 1 -
torch.finfo(v.dtype).eps)` (a literal 1e-7 rounds away in float16 and bfloat16: measured, the
clamp then leaves 1.0). Offered where the input is a name or an attribute (an expression would
be computed three times); elsewhere the message says what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.cosines import ROTATION_COSINE, cosine_evidence, rotation_matrix
from torchnumlint.rules.evidence import STRICT_WHY, in_module_class, is_not_torch, may_carry_grad
from torchnumlint.rules.gradient_context import gradient_free, is_detached
from torchnumlint.rules.guarding import is_tested
from torchnumlint.rules.magnitudes import magnitude
from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.calls import CallMatch, make_op, match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext, FixBuilder

INVERSE_TRIG = (
    make_op("acos", {"torch.acos"}, "acos"),
    make_op("arccos", {"torch.arccos"}, "arccos"),
    make_op("asin", {"torch.asin"}, "asin"),
    make_op("arcsin", {"torch.arcsin"}, "arcsin"),
)
_EDGE = "clamped to exactly [-1, 1]: finite, but the gradient is infinite where it reaches +-1"
# A rotation's cosine whose matrix is not shown to be a product, a prediction or differentiated.
_EXACT_ROTATION = (
    f"{ROTATION_COSINE}, of a matrix not shown to be a product or a prediction (strict mode: no evidence that rounding passes +-1 here)"
)


def _guard(ctx: "FileContext", value: cst.BaseExpression) -> Optional[str]:
    """ "inside" for a value kept strictly inside (-1, 1) (a clamp whose upper bound is not the
    literal 1, a product with a literal factor just below 1), "edge" for a clamp to exactly 1, None
    for no guard."""
    value = strip_parens(value)
    clamp = match_call(ctx.imports, value, "clamp", "clip", "clamp_")
    if clamp is not None:
        high = clamp.arg("max")
        if high is None:
            return None
        return "edge" if number_value(strip_parens(high)) == 1 else "inside"
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        for factor in (value.left, value.right):
            number = number_value(strip_parens(factor))
            if number is not None and 0.9 <= number < 1:  # a shrink (`cos * 0.999999`), not `0.5 * (tr - 1)`
                return "inside"
    return None


def _why(ctx: "FileContext", arg: cst.BaseExpression) -> Tuple[Optional[str], bool, bool, bool]:
    """(the evidence that a value `arg` may hold unguarded is a cosine, or None; whether some
    value it may hold is unguarded; whether some value is clamped to exactly +-1; whether some
    value is the rotation cosine of a matrix with no evidence that rounding passes 1)."""
    why: Optional[str] = None
    unguarded = edge = exact = False
    todo = list(ctx.origins(arg))
    while todo:
        origin = strip_parens(todo.pop(0))
        if isinstance(origin, cst.IfExp):  # both values of a conditional expression
            todo += ctx.origins(origin.body) + ctx.origins(origin.orelse)
            continue
        guard = _guard(ctx, origin)
        if guard is not None:
            edge = edge or guard == "edge"
            continue
        unguarded = True
        found = _evidence(ctx, origin)
        if found == _EXACT_ROTATION:
            exact = True
        else:
            why = why or found
    return why, unguarded, edge, exact


def _evidence(ctx: "FileContext", origin: cst.BaseExpression) -> Optional[str]:
    """`cosines.cosine_evidence`, and for a rotation's `(trace(R) - 1) / 2` the evidence on R
    (`_EXACT_ROTATION` where there is none):
    the trace of one exactly built rotation is `1 + 2 cos t`, whose cosine reaches +-1 but never
    passes it (measured for 200001 angles in float16, bfloat16, float32 and float64), while a
    product of rotations or a predicted matrix passes it by rounding; and a gradient through the
    acos is infinite at +-1 even when exact."""
    why = cosine_evidence(ctx, origin)
    matrix = rotation_matrix(ctx, origin) if why is not None else None
    if matrix is None:
        return why
    source = magnitude(ctx, matrix)
    if source.learned is not None:
        return f"{ROTATION_COSINE} of {source.learned}"
    if in_module_class(ctx) and may_carry_grad(ctx, matrix):
        function = ctx.enclosing(cst.FunctionDef)
        name = function.name.value if function is not None else "forward"
        return f"{ROTATION_COSINE} of a matrix a gradient flows through (in the module's `{name}`)"
    return _EXACT_ROTATION


class AcosAsinUnclamped(Rule):
    code = "TNL208"
    name = "acos-asin-unclamped"
    finds = (
        "`torch.acos` / `asin` (and `arccos`, `arcsin`, method forms) of a cosine similarity, a dot "
        "product of unit vectors or over the norms, a quaternion's scalar part, `(trace(R) - 1) / 2`: "
        "rounding takes it past 1 (cos_sim(a, a) = 1.00000036: NaN), the gradient is infinite at +-1"
    )
    fix_summary = "unsafe: clamp to +-(1 - `torch.finfo(v.dtype).eps`)"
    message = (
        "`{op}` of {why}, which rounding takes onto or past +-1: NaN beyond it (measured: "
        "cos_sim(a, a) = 1.00000036 in float32), an infinite gradient on it; clamp the input to "
        "+-(1 - eps){how}"
    )
    rationale = (
        "A cosine computed in floating point leaves [-1, 1] by rounding. Measured on torch 2.13, "
        "CPU: `F.cosine_similarity(a, a)` of random 64-d float32 vectors exceeds 1 in 431 of 2000 "
        "draws (up to 1.00000036), and the dot product of two normalised copies of one vector in "
        "208 of 1000 (up to 1.00000024). `torch.acos(1.0000001)` is NaN; at exactly 1 the value "
        "is 0 but the gradient is -inf (asin: +inf), so identical vectors, a prediction equal to "
        "its target or a rotation equal to the identity give a NaN update; a clamp to exactly "
        "[-1, 1] keeps that infinite gradient. Clamping to +-(1 - eps) with the eps of the value's "
        "dtype keeps both finite and moves acos(1) from 0 to 4.9e-4 in float32 (0.044 in float16, "
        "0.125 in bfloat16, where a literal 1e-7 would round away and leave the clamp at 1)."
    )
    safety = Safety.UNSAFE
    needs_index = True  # a rotation parameter is judged at callers in other modules (`rules/magnitudes.py`)
    needles = ("acos", "asin", "arccos", "arcsin")
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def angular_loss(pred, target):\n"
                "    cos = F.cosine_similarity(pred, target, dim=-1)\n"
                "    return torch.acos(cos).mean()\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def angular_loss(pred, target):\n"
                "    cos = F.cosine_similarity(pred, target, dim=-1)\n"
                "    return torch.acos(cos.clamp(-1 + torch.finfo(cos.dtype).eps, 1 - torch.finfo(cos.dtype).eps)).mean()\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def rotation_distance(q_pred, q_gt):\n"
                "    q1 = F.normalize(q_pred, dim=-1)\n"
                "    q2 = F.normalize(q_gt, dim=-1)\n"
                "    dot = (q1 * q2).sum(-1).abs()\n"
                "    return 2 * torch.acos(dot)\n"
            ),
            lines=(9,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def rotation_distance(q_pred, q_gt):\n"
                "    q1 = F.normalize(q_pred, dim=-1)\n"
                "    q2 = F.normalize(q_gt, dim=-1)\n"
                "    dot = (q1 * q2).sum(-1).abs()\n"
                "    return 2 * torch.acos(dot.clamp(-1 + torch.finfo(dot.dtype).eps, 1 - torch.finfo(dot.dtype).eps))\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def geodesic_loss(r_pred, r_gt):\n"
                "    rel = r_pred.transpose(-1, -2) @ r_gt\n"
                "    cos = (rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2\n"
                "    return cos.acos().mean()\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def geodesic_loss(r_pred, r_gt):\n"
                "    rel = r_pred.transpose(-1, -2) @ r_gt\n"
                "    cos = (rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2\n"
                "    return cos.clamp(-1 + torch.finfo(cos.dtype).eps, 1 - torch.finfo(cos.dtype).eps).acos().mean()\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "\n"
        "\n"
        "def angular_loss(pred, target, eps=1e-7):\n"
        "    cos = F.cosine_similarity(pred, target, dim=-1)\n"
        "    return torch.acos(cos.clamp(-1 + eps, 1 - eps)).mean()\n",
        # a diagnostic: no gradient, and math.acos of a Python float
        "import math\nimport torch\nimport torch.nn.functional as F\n"
        "@torch.no_grad()\n"
        "def angle_between(a, b):\n"
        "    return torch.rad2deg(torch.acos(F.cosine_similarity(a, b, dim=0))).item(), math.acos(0.5)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        match = match_call(self.ctx.imports, node, *INVERSE_TRIG)
        if match is None or not match.fully_known:
            return
        arg = match.input
        if is_not_torch(self.ctx, arg) or gradient_free(self.ctx) or is_detached(self.ctx, arg):
            return
        if is_tested(self.ctx, arg):
            return
        why, unguarded, edge, exact = _why(self.ctx, arg)
        if why is None:
            if not self.ctx.strict or not (unguarded or edge):
                return
            why = _EXACT_ROTATION if exact else f"a value that reaches +-1 {STRICT_WHY}" if unguarded else _EDGE
        fix = self._fix(match)
        how = "" if fix is not None else " (`v.clamp(-1 + torch.finfo(v.dtype).eps, 1 - torch.finfo(v.dtype).eps)`)"
        self.report(node, fix, op=match.op.name, why=why, how=how)

    def _fix(self, match: CallMatch) -> "Optional[FixBuilder]":
        """The input clamped to +-(1 - eps) of its dtype, where the input is a name or attribute."""
        value = strip_parens(match.input)
        if not isinstance(value, (cst.Name, cst.Attribute)):
            return None
        fix = self.fix()
        code = self.ctx.module.code_for_node(value)
        finfo = self.ctx.module.code_for_node(fix.ref("torch.finfo"))
        eps = f"{finfo}({code}.dtype).eps"
        fix.replace(match.input, cst.parse_expression(f"{code}.clamp(-1 + {eps}, 1 - {eps})"))
        return fix
