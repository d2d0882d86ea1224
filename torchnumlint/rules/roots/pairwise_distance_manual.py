"""TNL205 pairwise-distance-manual: a distance matrix written by broadcasting,
`torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))` (also `unsqueeze`, batched, `** 0.5`, method
forms). Of a tensor with itself its diagonal is exactly 0, where the root's derivative is
infinite: the gradient of every row is NaN. `torch.cdist(a, b, compute_mode=...)` computes the
same matrix with gradient 0 at coincident points and without the N x M x D intermediate.

Recognised in `rules/pairwise.py` (which TNL204, the norm of any sum of squares, asks to leave
such a root to this rule, `rules/ownership.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch, may_carry_grad
from torchnumlint.rules.gradient_context import gradient_note
from torchnumlint.rules.syntax import same_code, strip_parens
from torchnumlint.rules.candidate_tree import may_be_square_root
from torchnumlint.rules.pairwise import may_pair_rows, pairwise_rows
from torchnumlint.rules.roots.base import RootRule
from torchnumlint.rules.shapes import sum_of_squares

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.index import ProjectIndex
    from torchnumlint.rules.candidate_tree import CandidateTree

# measured on torch 2.13 (CPU, float32): plain cdist takes the matrix-product route above 25 rows,
# off by 0.086 from float64 at 26 rows of magnitude 100 (3.8e-5 with this mode)
MODE = "donot_use_mm_for_euclid_dist"


class PairwiseDistanceManual(RootRule):
    code = "TNL205"
    name = "pairwise-distance-manual"
    finds = "`torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))` (also `unsqueeze`, batched, `** 0.5`) of a tensor with itself where a gradient flows: the 0 diagonal makes every gradient entry NaN"
    fix_summary = 'safe: `torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")`'
    message = 'pairwise distances by hand: the root of a sum of squared differences is 0 {why}, where its gradient is NaN{note}; use `torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")`'
    rationale = (
        "`torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))` builds an N x M x D tensor and takes "
        "a square root whose derivative at 0 is infinite. The distances of a tensor to itself are "
        "0 on the diagonal, so the backward pass gives inf * 0 = NaN there and in every row that "
        "reads it (measured on torch 2.13: 30 points, all 90 gradient entries NaN). "
        '`torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")` computes the same '
        "distances (8.9e-16 apart in float64) with gradient 0 at coincident points; the mode "
        "matters: plain cdist switches to a matrix-product formula above 25 rows, measured 0.086 "
        "off at 26 rows of magnitude 100 in float32 (3.8e-5 with this mode). Safe. Reported by "
        "default for distances of a tensor to itself where a gradient flows; between two tensors "
        "(which meet only where points coincide) in strict mode."
    )
    safety = Safety.SAFE
    needles = ("None", "unsqueeze")
    pattern = r"sqrt|\*\*|pow"

    @classmethod
    def tree_test(cls, tree: "CandidateTree", index: "Optional[ProjectIndex]" = None) -> bool:
        # `root` takes a square root alone (`sqrt(v)`, `pow(v, 0.5)`, `v ** 0.5`; not `rsqrt`,
        # `v ** p`) of a sum over a difference of rows given new axes (`pairwise_rows`)
        return may_pair_rows(tree) and may_be_square_root(tree)

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def repulsion_loss(points):\n"
                "    dist = torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))\n"
                "    return torch.exp(-dist).mean()\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def repulsion_loss(points):\n"
                '    dist = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")\n'
                "    return torch.exp(-dist).mean()\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "\n"
        "\n"
        "def repulsion_loss(points):\n"
        '    dist = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")\n'
        "    return torch.exp(-dist).mean()\n",
        "import torch\n"
        "\n"
        "\n"
        "def repulsion_loss(points, eps=1e-12):\n"
        "    dist = torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1) + eps)\n"
        "    return torch.exp(-dist).mean()\n",
    )

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:
        if kind != "sqrt":
            return
        ctx = self.ctx
        found = sum_of_squares(ctx, arg, node)
        rows = pairwise_rows(ctx, found.base, found.total) if found is not None and found.site is arg else None
        if rows is None:
            return
        a, b = rows
        if is_not_torch(ctx, a) or not (may_carry_grad(ctx, a) or may_carry_grad(ctx, b)):
            return
        note = gradient_note(ctx)
        if note is None:
            return  # only the gradient at 0 is at stake
        if same_code(ctx, a, b):
            why = "on the diagonal (each point's distance to itself)"
        elif ctx.strict:
            why = f"where two points coincide, {STRICT_WHY}"
        else:
            return
        fix = self.fix()
        code = ctx.module.code_for_node
        fix.replace(
            node,
            cst.parse_expression(
                f'{code(fix.ref("torch.cdist"))}({code(strip_parens(a))}, {code(strip_parens(b))}, compute_mode="{MODE}")'
            ),
        )
        self.report(node, fix, why=why, note=note)
