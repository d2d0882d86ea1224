"""TNL113 probabilities-into-cross-entropy: `F.cross_entropy(F.softmax(x, dim=1), y)` is finite
but wrong, its loss squeezed into [1.46, 2.46] for 10 classes and its gradient far too small. The
fix is judged against the cross-entropy of the logits by its definition, the mean of
-ln softmax(x)_y = -(x_y - ln sum_j e^(x_j)), in float64. The fix changes the values everywhere
(the original is wrong everywhere), so it has no guarded region and no bound: it must equal the
mathematics to the dtype's precision on every input.

Example 3 (`F.nll_loss(scores.softmax(-1), labels, weight=w)`, fixed to log_softmax) is
reproduced too, against the class-weighted mean. Example 2 is not: the linter offers no fix for it."""

from __future__ import annotations

from typing import Tuple

import torch

from torchnumlint.runtime_check.context import FP32, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put, spanning
from torchnumlint.runtime_check.repros.log_domain.log_of_softmax import log_probabilities, weighted_nll_sum


def mean_cross_entropy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean over the samples (and positions) of -ln softmax(x_i)_(y_i), dim 1 the class."""
    return -log_probabilities(x, 1).gather(1, y.unsqueeze(1)).mean()


def weighted_nll_mean(scores: torch.Tensor, labels: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_i w[y_i] (-ln softmax(x_i)_(y_i)) / sum_i w[y_i]: the class-weighted mean (nll_loss's
    "mean" divides by the summed weights of the labels)."""
    return weighted_nll_sum(scores, labels, w) / w[labels].sum()


def confidently_wrong() -> Tuple[torch.Tensor, torch.Tensor]:
    """8 x 10 logits of magnitude 1e-3 to 3 (log-uniform, either sign) with random labels, the
    last row 0 but for a logit of 30 on a class that is not its label: the original is wrong on any
    input, and most at a saturated softmax."""
    x = spanning((8, 10), 1e-3, 3.0, 113)
    y = torch.randint(0, 10, (8,), generator=gen(114))
    x[-1] = 0.0
    x[-1, (int(y[-1]) + 1) % 10] = 30.0
    return x, y


def extreme_labels() -> Tuple[torch.Tensor, torch.Tensor]:
    """8 x 10 logits of magnitude 1e-3 to 30 (log-uniform, either sign), labelled with each even
    row's largest logit and each odd row's smallest: the labels' probabilities range from 8.6e-15
    to 0.9995 (measured), where a clamp or an eps of the probabilities would change the loss."""
    x = spanning((8, 10), 1e-3, 30.0, 1131)
    y = torch.where(torch.arange(8) % 2 == 0, x.argmax(1), x.argmin(1))
    return x, y


def extreme_positions() -> Tuple[torch.Tensor, torch.Tensor]:
    """`extreme_labels` with 3 positions per sample (8 x 10 x 3: the class dim 1 is not last)."""
    x = spanning((8, 10, 3), 1e-3, 30.0, 1133)
    y = torch.where(torch.arange(8)[:, None] % 2 == 0, x.argmax(1), x.argmin(1))
    return x, y


def ce_inputs(ctx: ReproContext, x: torch.Tensor, y: torch.Tensor) -> Inputs:
    return put(ctx, x=x, y=y)


def nll_inputs(ctx: ReproContext, x: torch.Tensor, y: torch.Tensor) -> Inputs:
    """Example 3's inputs, with class weights in [0.5, 1.5)."""
    return put(ctx, scores=x, labels=y, w=0.5 + torch.rand(10, generator=gen(1132)))


THRESHOLD = "8 x 10 logits (magnitudes 1e-3..3), one row with a wrong class 30 ahead; reference: the cross-entropy of the logits in float64"

REPRO = Repro(
    "TNL113",
    "WV",
    "ce",
    FP32,
    adversarial=lambda ctx: ce_inputs(ctx, *confidently_wrong()),
    benign=lambda ctx: ce_inputs(ctx, *extreme_labels()),
    grad=("x",),
    reference=mean_cross_entropy,
    thresholds={"*": THRESHOLD},
    shapes=(("3-D, the class dim 1 not last", lambda ctx: ce_inputs(ctx, *extreme_positions())),),
)

FURTHER = (
    Repro(
        "TNL113",
        "WV",
        "nll",
        FP32,
        example=2,
        adversarial=lambda ctx: nll_inputs(ctx, *confidently_wrong()),
        benign=lambda ctx: nll_inputs(ctx, *extreme_labels()),
        grad=("scores",),
        reference=weighted_nll_mean,  # nll_loss has no gradient for its weight
        thresholds={"*": THRESHOLD + ", class weights in [0.5, 1.5)"},
    ),
)
