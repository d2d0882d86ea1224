"""TNL105 bce-on-sigmoid: `F.binary_cross_entropy(torch.sigmoid(z), y)` is finite but wrong once
the sigmoid saturates: the loss capped at 100 (z = 20, label 0: true 20), the gradient 0 where it
should be 1, and -0.094 instead of -1 at z = -30 with label 1. The fix is judged against the
binary cross-entropy of the logits by its definition, -(y ln sigmoid(z) + (1 - y) ln(1 - sigmoid(z)))
with ln sigmoid(z) = -softplus(-z) written by cases, in float64. Float16 is not run: there the
original's gradient is NaN (measured), which a WV check does not ask about.

Example 3 (`mask_loss`: a weighted, summed loss beside the mask `probs > 0.5`) is reproduced too.
Example 2 is not: the linter offers no fix for it."""

from __future__ import annotations

import math
from typing import Tuple

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put
from torchnumlint.runtime_check.repros.log_domain.log_of_sigmoid import log_sigmoid

# 1 - sigmoid(z) == 0 from z >= 16.64 fp32, 6.25 bf16 (measured, torch 2.13 CPU)
SIGMOID_SATURATION = {"float32": 16.64, "bfloat16": 6.25}
DTYPES = tuple(SIGMOID_SATURATION)


def binary_cross_entropy(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """-(y ln sigmoid(z) + (1 - y) ln(1 - sigmoid(z))) entry by entry, ln(1 - sigmoid(z)) being
    ln sigmoid(-z)."""
    return -(y * log_sigmoid(z) + (1 - y) * log_sigmoid(-z))


def mean_bce(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The binary cross-entropy of logits z against labels y, averaged."""
    return binary_cross_entropy(z, y).mean()


def weighted_bce_and_mask(mask_logits: torch.Tensor, gt: torch.Tensor, w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """sum w * BCE(mask_logits, gt), and the mask sigmoid(z) > 1/2, that is z > 0."""
    return (w * binary_cross_entropy(mask_logits, gt)).sum(), mask_logits > 0


def saturated(ctx: ReproContext) -> Tuple[torch.Tensor, torch.Tensor]:
    """Logits -4..4 with random labels, then saturated and confidently wrong ones: past the
    saturation with label 0, and -30 with label 1."""
    limit = SIGMOID_SATURATION[ctx.dtype_name]
    g = gen(105)
    z = torch.cat([torch.linspace(-4.0, 4.0, 9), torch.tensor([limit + 0.5, 2 * limit, -30.0])])
    y = torch.cat([torch.randint(0, 2, (9,), generator=g).float(), torch.tensor([0.0, 0.0, 1.0])])
    return z, y


def unsaturated(ctx: ReproContext, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """64 logits log-spaced in magnitude from 0.02 to 0.9 of the saturation, random signs and
    labels: 1 - sigmoid(|z|) reaches 3.1e-7 in fp32 (a clamp of the probabilities to 1e-6 changes
    the loss) and 3.6e-3 in bf16; 0.02 keeps sigmoid(z) off 1/2 in bf16 (measured 0.5039), so
    example 3's mask agrees with z > 0."""
    g = gen(seed)
    magnitude = torch.logspace(math.log10(0.02), math.log10(0.9 * SIGMOID_SATURATION[ctx.dtype_name]), 64)
    z = torch.where(torch.rand(64, generator=g) < 0.5, -magnitude, magnitude)
    return z, torch.randint(0, 2, (64,), generator=g).float()


def weights(n: int) -> torch.Tensor:
    """Per-pixel weights in [0.5, 1.5)."""
    return 0.5 + torch.rand(n, generator=gen(1052))


def logits_labels(ctx: ReproContext, z: torch.Tensor, y: torch.Tensor) -> Inputs:
    return put(ctx, z=z, y=y)


def mask_inputs(ctx: ReproContext, z: torch.Tensor, y: torch.Tensor) -> Inputs:
    return put(ctx, mask_logits=z, gt=y, w=weights(z.numel()))


THRESHOLDS = {
    d: f"z in -4..4 plus {v + 0.5:g}, {2 * v:g} (label 0) and -30 (label 1); the sigmoid rounds to 1 "
    f"from z = {v:g} in {d}; reference: the binary cross-entropy of the logits in float64"
    for d, v in SIGMOID_SATURATION.items()
}

REPRO = Repro(
    "TNL105",
    "WV",
    "bce",
    DTYPES,
    adversarial=lambda ctx: logits_labels(ctx, *saturated(ctx)),
    benign=lambda ctx: logits_labels(ctx, *unsaturated(ctx, 1051)),
    grad=("z",),
    reference=mean_bce,
    thresholds=THRESHOLDS,
    shapes=lifted(lambda ctx: logits_labels(ctx, *unsaturated(ctx, 1054))),
)

FURTHER = (
    Repro(
        "TNL105",
        "WV",
        "mask_loss",
        DTYPES,
        example=2,
        adversarial=lambda ctx: mask_inputs(ctx, *saturated(ctx)),
        benign=lambda ctx: mask_inputs(ctx, *unsaturated(ctx, 1053)),
        grad=("mask_logits",),
        reference=weighted_bce_and_mask,
        thresholds=THRESHOLDS,
        shapes=lifted(lambda ctx: mask_inputs(ctx, *unsaturated(ctx, 1055))),
    ),
)
