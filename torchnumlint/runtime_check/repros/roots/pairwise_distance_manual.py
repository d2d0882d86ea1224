"""TNL205 pairwise-distance-manual: the distance matrix of points to themselves by broadcasting
has a 0 diagonal, where the root's gradient is NaN (and with it every point's); cdist's is 0.

float32 only: cdist's direct mode is what the fix pins; the hazard (sqrt at 0) is the same in
every dtype. No benign inputs: every matrix of self-distances has its 0 diagonal, so the original's
gradient is NaN for all of them; its forward is compared with the fix's on the adversarial run.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def repulsion(points: torch.Tensor) -> torch.Tensor:
    """mean exp(-|p_i - p_j|) over all pairs, |.| the Euclidean distance, whose derivative at a
    coincident pair is taken as 0 (the subgradient of the norm)."""
    squared = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    apart = squared > 0
    dist = torch.where(apart, squared, torch.ones_like(squared)).sqrt() * apart
    return torch.exp(-dist).mean()


def cloud(ctx: ReproContext) -> Inputs:
    """points: 6 x 3 randn (the diagonal of their distance matrix is 0: every gradient entry NaN)."""
    return put(ctx, points=torch.randn(6, 3, generator=gen(2051)))


REPRO = Repro(
    "TNL205",
    "NF",
    "repulsion_loss",
    FP32,
    adversarial=cloud,
    grad=("points",),
    reference=repulsion,
    thresholds={"*": "6 points in 3-D, randn (self-distances 0 on the diagonal: gradient NaN)"},
)
