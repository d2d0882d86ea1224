"""TNL203 cosine-similarity-manual: `(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))`, a cosine
similarity written by hand, is 0/0 = NaN (forward and gradient) for an all-zero row of a or b;
`F.cosine_similarity(a, b, dim=d)` gives the same values and 0 there.

The site (`cosines.manual_cosine`): a dot product (`(a * b).sum(d)`, `torch.sum(a * b, d)`, a
matrix product or einsum) over the product of the two vectors' 2-norms, in either order, through
names. The divisor is `divisors.zero_kind`'s product of norms and the evidence that a row is 0
is `divisors.zero_evidence`'s, the same standard as TNL201 (unguarded-division), which owns
every other division by a norm and leaves this site to this rule while it is enabled
(`ownership.OWNERS["manual-cosine"]`). A guarded denominator (`+ eps`, `clamp_min`), a division
inside `torch.where(...)` (TNL201's) and a tested norm are not reported.

Fix (SAFE: the same values wherever the original is finite, except where a norm is below
cosine_similarity's eps of 1e-8, which it clamps): `F.cosine_similarity(a, b, dim=d)`, written
only where the dot product is a `sum` over an explicit dim that both norms share, nothing keeps
that dim, and the numerator and the norms are written in the division itself (a matrix of
pairwise cosines, or parts read through names, are reported without a fix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.cosines import manual_cosine, norm_of
from torchnumlint.rules.divisors import DivisionRule, in_where, replaces_whole, zero_evidence, zero_kind
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch
from torchnumlint.rules.guarding import is_tested
from torchnumlint.rules.syntax import same_code, strip_parens
from torchnumlint.rules.calls import is_literal, match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FixBuilder


class CosineSimilarityManual(DivisionRule):
    code = "TNL203"
    name = "cosine-similarity-manual"
    finds = "`(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))` (any dot product over the two norms): 0/0 = NaN for a zero row"
    fix_summary = "safe: `F.cosine_similarity(a, b, dim=d)`"
    message = "cosine similarity written by hand is 0/0 = NaN {why}; use `F.cosine_similarity(a, b, dim=...)`"
    rationale = (
        "A dot product over the product of the two norms is 0/0 = NaN, in the forward pass and in "
        "the gradient of every entry of both vectors, as soon as one row of either is all zero "
        "(padding, a dead projection, an empty bag; measured on torch 2.13, CPU, float64: NaN "
        "forward and NaN gradient for a zero row). `F.cosine_similarity(a, b, dim=d)` computes "
        "the same values (measured: within 1.2e-16 in float64) and 0, with a finite gradient, "
        "for a zero row; it clamps each norm at 1e-8, so it differs only where a norm is below "
        "that. Only the explicit-dim form whose sum and norms share the dim is rewritten. In "
        "float16 that eps rounds to 0 and the zero row is NaN again (measured): compute the "
        "similarity in float32 there (TNL303)."
    )
    safety = Safety.SAFE
    needles = ("norm",)
    pattern = r"/|div"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def agreement(z, peer_z):\n"
                "    z = torch.relu(z)\n"
                "    return (z * peer_z).sum(dim=-1) / (z.norm(dim=-1) * peer_z.norm(dim=-1))\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def agreement(z, peer_z):\n"
                "    z = torch.relu(z)\n"
                "    return torch.nn.functional.cosine_similarity(z, peer_z, dim=-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def similarity_matrix(x, y, visible_mask):\n"
                "    x = x * visible_mask[..., None]\n"
                "    return (x @ y.T) / (x.norm(dim=1)[:, None] * y.norm(dim=1)[None, :])\n"
            ),
            lines=(7,),
            fixed=None,
        ),
    )
    good = (
        "import torch\nimport torch.nn.functional as F\n"
        "def agreement(z, peer_z, eps=1e-8):\n"
        "    guarded = (z * peer_z).sum(-1) / (z.norm(dim=-1) * peer_z.norm(dim=-1) + eps)\n"
        "    return guarded + F.cosine_similarity(z, peer_z, dim=-1)\n",
    )

    def division(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> None:
        ctx = self.ctx
        if not replaces_whole(node) or in_where(ctx):
            return
        found = zero_kind(ctx, d)
        if found is None or found.kind not in ("product", "norm"):
            return
        site = manual_cosine(ctx, x, d)
        if site is None or is_not_torch(ctx, found.value) or is_tested(ctx, d, found.value):
            return
        why, _ = zero_evidence(ctx, found, x)
        if why is None:
            if not ctx.strict:
                return
            why = STRICT_WHY
        self.report(node, self._fix(node, x, d), why=why)

    def _fix(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> "Optional[FixBuilder]":
        """`F.cosine_similarity(a, b, dim=d)` in place of the division, or None where the dim is
        not one explicit dim that the sum and both norms share, or the parts are read through
        names."""
        ctx = self.ctx
        summed = match_call(ctx.imports, strip_parens(x), "sum")
        den = strip_parens(d)
        dim = summed.arg("dim") if summed is not None else None
        if summed is None or not summed.fully_known or dim is None or summed.given("keepdim"):
            return None
        product = strip_parens(summed.input)
        if not (isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply)):
            return None  # the product read through a name: its factors may have changed since
        if not (isinstance(den, cst.BinaryOperation) and isinstance(den.operator, cst.Multiply)):
            return None
        inputs = []
        for factor in (den.left, den.right):
            norm = norm_of(ctx, factor)
            if norm is None or strip_parens(factor) is not norm.call or not norm.fully_known:
                return None
            norm_dim = norm.arg("dim")
            if norm_dim is None or not same_code(ctx, norm_dim, dim) or "dtype" in norm.args:
                return None
            if norm.given("keepdim") and not is_literal(norm.arg("keepdim"), "False"):
                return None
            inputs.append(norm.input)
        a, b = strip_parens(product.left), strip_parens(product.right)
        if not any(same_code(ctx, a, p) and same_code(ctx, b, q) for p, q in (inputs, inputs[::-1])):
            return None  # the norms are of other views (`a.T`, a slice) than the product's factors
        fix = self.fix()
        code = ctx.module.code_for_node
        func = code(fix.ref("torch.nn.functional.cosine_similarity"))
        fix.replace(node, cst.parse_expression(f"{func}({code(a)}, {code(b)}, dim={code(dim)})"))
        return fix
