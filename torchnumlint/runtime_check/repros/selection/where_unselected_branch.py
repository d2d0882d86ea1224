"""TNL209 where-unselected-branch: `torch.where(depth > 0, torch.log(depth), 0)` has a finite
forward, but its gradient is NaN at every depth of exactly 0 (0 * 1/0); the double where's is 0
there and the same elsewhere.

Example 2 (`(1 / scale).masked_fill(scale == 0, 0.0)`: the gradient of pred's loss is finite,
scale's is NaN at scale = 0) is reproduced too.

Both run further at 3-D and 4-D (leading batch dims: entry by entry, then the mean of all) and
with the depths (the scales) times 1e-3 and 1e3: depths 1e-7 .. 1e7 and scales 1e-6 .. 1e6 stay
positive and non-zero, in float32's range; the targets and predictions keep their scale (a depth's
log moves by a constant, the quotient by the factor).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning


def log_depth_l1(depth: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """mean |[depth > 0] log(depth) - gt|, the log taken of positive depths only (its value and
    derivative elsewhere are 0, the indicator's)."""
    positive = depth > 0
    safe = torch.where(positive, depth, torch.full_like(depth, torch.e))  # log e = 1, times the 0 indicator
    return (positive * torch.log(safe) - gt).abs().mean()


def scaled_square(pred: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """mean (pred / scale)^2 over the entries with scale != 0 (counted as 0 elsewhere), written
    as a quotient of the nonzero scales only."""
    nonzero = scale != 0
    quotient = torch.zeros_like(pred)
    quotient[nonzero] = pred[nonzero] / scale[nonzero]
    return (quotient**2).mean()


def zero_depths(ctx: ReproContext) -> Inputs:
    """depth: 4 x 8, |randn| + 0.1, with 3 entries exactly 0 and 2 negative (invalid pixels)."""
    depth = torch.randn(4, 8, generator=gen(2091)).abs() + 0.1
    depth[0, 0] = depth[1, 3] = depth[2, 5] = 0.0
    depth[3, 1], depth[3, 2] = -1.0, -0.5
    return put(ctx, depth=depth, gt=torch.randn(4, 8, generator=gen(2092)))


def positive_depths(ctx: ReproContext) -> Inputs:
    """depth: positive, 1e-4 .. 1e4 (a wrong fill value or eps would move the logs)."""
    return put(ctx, depth=spanning((4, 8), 1e-4, 1e4, 2093, signed=False), gt=torch.randn(4, 8, generator=gen(2094)))


def zero_scales(ctx: ReproContext) -> Inputs:
    """scale: 4 x 8 randn with 4 entries exactly 0; pred randn."""
    scale = torch.randn(4, 8, generator=gen(2095))
    scale[0, 1] = scale[1, 1] = scale[2, 6] = scale[3, 0] = 0.0
    return put(ctx, pred=torch.randn(4, 8, generator=gen(2096)), scale=scale)


def spread_scales(ctx: ReproContext) -> Inputs:
    """scale: magnitudes 1e-3 .. 1e3, either sign; pred randn."""
    return put(ctx, pred=torch.randn(4, 8, generator=gen(2097)), scale=spanning((4, 8), 1e-3, 1e3, 2098))


REPRO = Repro(
    "TNL209",
    "NF",
    "log_depth_loss",
    FP32,
    adversarial=zero_depths,
    benign=positive_depths,
    grad=("depth",),
    reference=log_depth_l1,
    shapes=lifted(positive_depths) + rescaled(positive_depths, 1e-3, 1e3, only=("depth",)),
    thresholds={"*": "4 x 8 depths, 3 exactly 0 and 2 negative (the where drops them: gradient 0 * inf = NaN); benign: depths 1e-4 .. 1e4"},
)

FURTHER = (
    Repro(
        "TNL209",
        "NF",
        "inverse_scale_loss",
        FP32,
        example=1,
        adversarial=zero_scales,
        benign=spread_scales,
        grad=("pred", "scale"),
        reference=scaled_square,
        shapes=lifted(spread_scales) + rescaled(spread_scales, 1e-3, 1e3, only=("scale",)),
        thresholds={"*": "4 x 8 scales, 4 exactly 0 (masked_fill drops 1 / 0: gradient NaN); benign: scales 1e-3 .. 1e3 of either sign"},
    ),
)
