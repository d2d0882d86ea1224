"""TNL102 kl-div-prob-input: `F.kl_div` given probabilities where it expects log-probabilities
computes a finite but wrong loss and gradient. The fix is judged against KL(target || softmax(a))
per sample, averaged over the batch, in float64. The fix changes the values everywhere (the
original is wrong everywhere), so it has no guarded region and no bound: it must equal the
mathematics to the dtype's precision on every input."""

from __future__ import annotations

from typing import Tuple

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import lifted, put, spanning
from torchnumlint.runtime_check.repros.kl_div.kl_div_prob_target import batch_mean, kl_divergence
from torchnumlint.runtime_check.repros.log_domain.log_of_softmax import log_probabilities


def kl_to_target(a: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """KL(target || softmax(a)) over the last dimension, "batchmean" (summed, over the size of dim 0)."""
    return batch_mean(kl_divergence(target, log_probabilities(a)))


def logits_and_target(seed: int, low: float, high: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """8 x 10 logits and a target distribution, the softmax of other logits, both of magnitude
    `low` to `high` (log-uniform, either sign)."""
    return spanning((8, 10), low, high, seed), torch.softmax(spanning((8, 10), low, high, seed + 1), -1)


def kl_inputs(seed: int, low: float, high: float) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        a, target = logits_and_target(seed, low, high)
        return put(ctx, a=a, target=target)

    return build


# Magnitudes 1e-3 to 3 (adversarial: the original is wrong on any input) and 1e-3 to 10 (benign:
# predicted probabilities from 8.9e-8 to 0.9989, the target's from 1.1e-6 to 0.995, measured),
# where a clamp or an eps of either would change the values.
REPRO = Repro(
    "TNL102",
    "WV",
    "kl_loss",
    FP32,
    adversarial=kl_inputs(102, 1e-3, 3.0),
    benign=kl_inputs(1021, 1e-3, 10.0),
    grad=("a", "target"),
    reference=kl_to_target,
    shapes=lifted(kl_inputs(1022, 1e-3, 10.0)),
    thresholds={
        "*": "8 x 10 logits (magnitudes 1e-3..3) against a softmax target; reference: KL(target || softmax(a)) per sample in float64"
    },
)
