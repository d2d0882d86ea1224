"""TNL301 fp16-autocast-custom-op: a custom autograd.Function without custom_fwd(cast_inputs=
torch.float32) runs its forward in float16 under autocast, where gram * gram overflows."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def _scores(seed: int, scale: float) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        g = gen(seed)
        x = torch.randn(32, 16, generator=g)
        w = torch.randn(16, 16, generator=g) * scale
        return put(ctx, x=x, w=w)

    return build


REPRO = Repro(
    "TNL301", "NF", "step", ("autocast",),
    adversarial=_scores(301, 1.0), benign=_scores(3011, 0.1), grad=("x", "w"),
    thresholds={"*": "scores = x @ w, x 32 x 16 randn, w 16 x 16 randn: gram = scores @ scores.T; gram * gram overflows float16 once a Gram entry passes 255"},
)
