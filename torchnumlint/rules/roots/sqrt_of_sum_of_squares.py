"""TNL204 sqrt-of-sum-of-squares: `torch.sqrt((x ** 2).sum(d))`, a 2-norm written by hand (or
the product of two, a cosine's denominator), whose gradient is NaN at a zero row;
`torch.linalg.vector_norm` computes the same value with gradient 0 there (an exact rewrite)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.candidate_tree import may_be_square_root
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch, is_torch_value, may_carry_grad, row_evidence, value_kind
from torchnumlint.rules.gradient_context import gradient_note
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.pairwise import pairwise_rows
from torchnumlint.rules.roots.base import RootRule
from torchnumlint.rules.shapes import may_square, norms_of_squares, vector_norm_fix

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.index import ProjectIndex
    from torchnumlint.rules.candidate_tree import CandidateTree


class SqrtOfSumOfSquares(RootRule):
    code = "TNL204"
    name = "sqrt-of-sum-of-squares"
    finds = "`torch.sqrt((x**2).sum(d))`, `x.pow(2).sum(d).sqrt()`"
    fix_summary = "safe: `torch.linalg.vector_norm(x, dim=d)`"
    message = (
        "square root of {what}, which is 0 {why}: its gradient is NaN there (and it "
        "overflows float16 above 256); use `torch.linalg.vector_norm`{note}"
    )
    rationale = (
        "`torch.sqrt((x ** 2).sum(d))` is a 2-norm written by hand. At a zero vector the backward "
        "pass computes 0 * (1 / (2 * sqrt(0))) = 0 * inf = NaN, so one all-zero row poisons the "
        "whole gradient; in float16 the squares overflow once the norm passes 256. "
        "`torch.linalg.vector_norm(x, dim=d)` computes the same value (float tolerance), uses the "
        "subgradient 0 at the origin and scales internally. Only rewritten with an explicit dim "
        "(or a sum over everything); keepdim is kept. Pairwise distances "
        "(`((a[:, None] - b[None]) ** 2).sum(-1)`), where one zero on the diagonal makes every "
        "gradient entry NaN, get the same exact rewrite. So does the root of a product of two sums of "
        "squares (a cosine's denominator, `sqrt((a * a).sum(-1) * (b * b).sum(-1))`): the product "
        "of the two norms, equal within 2.2e-7 relative (measured, float32), with gradient 0 "
        "instead of NaN at a zero vector. Shape-only steps between the sum and the root are kept "
        "(`(x ** 2).sum(-1).unsqueeze(-1).sqrt()` -> `vector_norm(x, dim=-1).unsqueeze(-1)`)."
    )
    safety = Safety.SAFE
    needles = ("sum",)
    pattern = r"sqrt|\*\*|pow"  # a root of the sum

    @classmethod
    def tree_test(cls, tree: "CandidateTree", index: "Optional[ProjectIndex]" = None) -> bool:
        # `root` takes a square root alone of a sum (`match_call`) of squares (`shapes.square_base`)
        return tree.has_word("sum") and may_be_square_root(tree) and may_square(tree)

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def embedding_norm_loss(x):\n"
                "    h = x - x.mean(dim=-1, keepdim=True)\n"
                "    return torch.sqrt((h ** 2).sum(dim=-1))\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def embedding_norm_loss(x):\n"
                "    h = x - x.mean(dim=-1, keepdim=True)\n"
                "    return torch.linalg.vector_norm(h, dim=-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def distance_loss(a, h, valid_mask):\n"
                "    d = a - a.mean(0)\n"
                "    r = torch.sqrt(torch.sum(d * d, dim=1))\n"
                "    g = (h * valid_mask).pow(2).sum(1, True).sqrt()\n"
                "    return r + g.squeeze(1) + torch.square(torch.relu(a)).sum() ** 0.5\n"
            ),
            lines=(6, 7, 8),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def distance_loss(a, h, valid_mask):\n"
                "    d = a - a.mean(0)\n"
                "    r = torch.linalg.vector_norm(d, dim=1)\n"
                "    g = torch.linalg.vector_norm(h * valid_mask, dim=1, keepdim=True)\n"
                "    return r + g.squeeze(1) + torch.linalg.vector_norm(torch.relu(a))\n"
            ),
        ),
        Example(
            bad=("import torch\n\n\ndef pairwise_loss(a):\n    return torch.sqrt(((a[:, None] - a[None]) ** 2).sum(-1))\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef pairwise_loss(a):\n    return torch.linalg.vector_norm(a[:, None] - a[None], dim=-1)\n"),
        ),
    )
    good = (
        "import torch\n"
        "def f(x, eps=1e-8):\n"
        "    a = torch.sqrt((x ** 2).sum(-1) + eps)\n"
        "    b = x.pow(2).sum(-1).clamp_min(1e-12).sqrt()\n"
        "    c = torch.sqrt((x ** 2).mean(-1))\n"
        "    return a + b + c + torch.sqrt((x ** 3).sum(-1))\n",
        "import torch\ndef f(x):\n    return torch.linalg.vector_norm(x, dim=-1) + (x ** 2).sum(-1) + torch.sqrt(x.sum(-1))\n",
    )

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:
        if kind != "sqrt":
            return
        ctx = self.ctx
        found = norms_of_squares(ctx, arg, node)
        if len(found) == 1 and found[0].site is arg and pairwise_rows(ctx, found[0].base, found[0].total) is not None:
            if owned_elsewhere(ctx, self.code, "pairwise-distance"):
                return  # a distance matrix by broadcasting: cdist also drops the N x M x D tensor
        note = gradient_note(ctx) if found else None
        bases = [f.base for f in found]
        if note is None or any(is_not_torch(ctx, b) for b in bases) or not any(may_carry_grad(ctx, b) for b in bases):
            return  # the hazard is the gradient at 0: only where one flows
        why = next((w for w in (row_evidence(ctx, b, strong=True) for b in bases) if w is not None), None)
        if why is None:
            if not ctx.strict:
                return  # the norm of a learned embedding, a network's output, a residual
            why = STRICT_WHY
        torch_value = value_kind(ctx, node) == "torch" or any(is_torch_value(ctx, b) for b in bases)
        what = "a sum of squares" if len(found) == 1 else "a product of sums of squares"
        fix = vector_norm_fix(self, node, arg, found) if torch_value else None
        self.report(node, fix, what=what, why=why, note=note)
