"""TNL401 masked-inf-softmax: a query whose every key is masked with -inf is a NaN row of the
softmax, and every entry of grad(V) is NaN; filled with finfo(dtype).min the row is uniform."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def _inputs(ctx: ReproContext, seed: int, full_row: bool) -> Inputs:
    scores = torch.randn(3, 5, generator=gen(seed)) * 2.0
    v = torch.randn(5, 4, generator=gen(seed + 1))
    mask = torch.rand(3, 5, generator=gen(seed + 2)) < 0.5
    mask[:, 0] = False  # column 0 kept: no row is fully masked
    if full_row:
        mask[1] = True  # query 1 sees no key (an empty sequence, a left-padded first query)
    return put(ctx, scores=scores, mask=mask, v=v)


REPRO = Repro(
    "TNL401", "NF", "attend", PRECISION,
    adversarial=lambda ctx: _inputs(ctx, 401, True),
    benign=lambda ctx: _inputs(ctx, 4011, False),
    grad=("scores", "v"),
    thresholds={"*": "3 x 5 scores, row 1 fully masked with -inf, other rows partly masked (column 0 kept)"},
)
