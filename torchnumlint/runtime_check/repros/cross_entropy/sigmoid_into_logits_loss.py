"""TNL115 sigmoid-into-logits-loss: `F.binary_cross_entropy_with_logits(torch.sigmoid(z), y)` is
finite but wrong everywhere: the loss applies a second sigmoid, squeezing every loss into
[0.31, 1.31]. The fix (the logits passed) is judged against the binary cross entropy of the
logits by its definition, -(y ln s + (1 - y) ln(1 - s)) with s = 1 / (1 + e^-z) (TNL105's
reference, `bce_on_sigmoid.binary_cross_entropy`, written with log-sigmoids). The original is wrong everywhere, so
the fix has no guarded region and no bound: it must equal the mathematics on every input.

Example 3 (`pos_weight`, `reduction="sum"`, beside the mask `obj > 0.5`) is reproduced too,
against the weighted sum. Example
2 is not: the sigmoid is made by a model and the linter offers no fix.

Both run further at 3-D and 4-D (leading batch dims: the loss is entry by entry and reduces the
whole, and example 3's per-column weights, kept 1-D, broadcast along the last dim at every shape)
and with the logits times 1e-3 and 1e3 (|z| up to 2e4, within float16's range; the labels, the
logits' signs, have no scale)."""

from __future__ import annotations

from typing import Tuple

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.cross_entropy.bce_on_sigmoid import binary_cross_entropy, mean_bce
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning


def weighted_bce_sum_and_mask(obj_logits: torch.Tensor, obj_target: torch.Tensor, pos_w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """sum(-(pos_w y ln s(z) + (1 - y) ln(1 - s(z)))), positives weighted per column, and the
    mask s(z) > 1/2, that is z > 0."""
    positives = obj_target * binary_cross_entropy(obj_logits, torch.ones_like(obj_logits))
    negatives = (1 - obj_target) * binary_cross_entropy(obj_logits, torch.zeros_like(obj_logits))
    return (pos_w * positives + negatives).sum(), obj_logits > 0


def confident_mistakes() -> Tuple[torch.Tensor, torch.Tensor]:
    """8 x 4 logits of magnitude 1e-3 to 5, random 0/1 labels; row 0 holds positives at z = -30
    and negatives at z = +30 (measured in float32: the original's loss there is 0.693 where the
    right one is 30, its gradient 4.7e-14 where the right one is 1)."""
    z = spanning((8, 4), 1e-3, 5.0, 1151)
    y = (torch.rand(8, 4, generator=gen(1152)) < 0.5).float()
    z[0] = torch.where(y[0] > 0, -30.0, 30.0)
    return z, y


def well_classified() -> Tuple[torch.Tensor, torch.Tensor]:
    """8 x 4 logits of magnitude 1e-3 to 20 (log-uniform), labelled by their sign: losses from
    2e-9 to 0.69, where any clamp or eps of the logits would show."""
    z = spanning((8, 4), 1e-3, 20.0, 1153)
    return z, (z > 0).float()


def objectness_inputs(ctx: ReproContext, z: torch.Tensor, y: torch.Tensor) -> Inputs:
    """Example 3's inputs, with a positive weight in [1, 3) per column."""
    return put(ctx, obj_logits=z, obj_target=y, pos_w=1.0 + 2.0 * torch.rand(4, generator=gen(1154)))


def pair_inputs(ctx: ReproContext) -> Inputs:
    return put(ctx, **dict(zip("zy", well_classified())))


def objectness_benign(ctx: ReproContext) -> Inputs:
    return objectness_inputs(ctx, *well_classified())


THRESHOLD = (
    "8 x 4 logits (magnitudes 1e-3..5), row 0 confidently wrong at |z| = 30; reference: the binary cross entropy of the logits in float64"
)

REPRO = Repro(
    "TNL115",
    "WV",
    "multilabel_loss",
    PRECISION,
    adversarial=lambda ctx: put(ctx, **dict(zip("zy", confident_mistakes()))),
    benign=pair_inputs,
    grad=("z",),
    reference=mean_bce,
    thresholds={"*": THRESHOLD},
    shapes=lifted(pair_inputs) + rescaled(pair_inputs, 1e-3, 1e3, only=("z",)),
)

FURTHER = (
    Repro(
        "TNL115",
        "WV",
        "objectness_loss",
        PRECISION,
        example=2,
        adversarial=lambda ctx: objectness_inputs(ctx, *confident_mistakes()),
        benign=objectness_benign,
        grad=("obj_logits",),
        reference=weighted_bce_sum_and_mask,
        thresholds={"*": THRESHOLD + ", positive weights in [1, 3)"},
        shapes=lifted(objectness_benign, keep=("pos_w",)) + rescaled(objectness_benign, 1e-3, 1e3, only=("obj_logits",)),
    ),
)
