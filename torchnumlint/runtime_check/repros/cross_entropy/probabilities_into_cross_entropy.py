"""TNL113 probabilities-into-cross-entropy: `F.cross_entropy(F.softmax(x, dim=1), y)` is finite
but wrong, its loss squeezed into [1.46, 2.46] for 10 classes and its gradient far too small; the
reference is the fix (`F.cross_entropy(x, y)`) in float64. The fix changes the loss (UNSAFE), so
benign inputs are not required to agree."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def _logits(seed: int, scale: float, saturated: bool) -> Builder:
    """8 x 10 logits, standard normal times `scale`, with labels; `saturated` puts one logit 30
    above the rest of the last row, on a class that is not its label."""

    def build(ctx: ReproContext) -> Inputs:
        g = gen(seed)
        x = torch.randn(8, 10, generator=g) * scale
        y = torch.randint(0, 10, (8,), generator=g)
        if saturated:
            x[-1] = 0.0
            x[-1, (int(y[-1]) + 1) % 10] = 30.0
        return put(ctx, x=x, y=y)

    return build


REPRO = Repro(
    "TNL113", "WV", "ce", FP32,
    adversarial=_logits(113, 3.0, True), benign=_logits(1131, 1.0, False), grad=("x",),
    thresholds={"*": "8 x 10 logits (randn x 3), one row with a wrong class 30 ahead; reference: the fix in float64"},
)
