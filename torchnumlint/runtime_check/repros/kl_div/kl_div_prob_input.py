"""TNL102 kl-div-prob-input: `F.kl_div` given probabilities where it expects log-probabilities
computes a finite but wrong loss; the reference is the fix (log_softmax input) in float64."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def _logits_and_target(seed: int, scale: float) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        g = gen(seed)
        a = torch.randn(8, 10, generator=g) * scale
        target = torch.softmax(torch.randn(8, 10, generator=g) * scale, -1)
        return put(ctx, a=a, target=target)

    return build


REPRO = Repro(
    "TNL102", "WV", "kl_loss", FP32,
    adversarial=_logits_and_target(102, 2.0), benign=_logits_and_target(1021, 0.5), grad=("a",),
    thresholds={"*": "8 x 10 logits (randn x 2) against a softmax target; reference: the fix in float64"},
)
