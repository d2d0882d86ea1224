"""TNL208 acos-asin-unclamped: `torch.acos(F.cosine_similarity(pred, target))` of a prediction
equal to its target is NaN (the cosine rounds past 1) or has an infinite gradient (exactly 1).

The fix (clamp to +-(1 - eps) of the value's dtype) is judged against the angle between the two
vectors by a formula that never takes an acos, 2 atan2(|u - v|, |u + v|) of the unit vectors u, v
(Kahan's), in float64. Where the vectors coincide the angle is 0 and its gradient undefined (a
cone's tip: not compared); the clamp moves the angle there from 0 to acos(1 - eps), 4.9e-4 in
float32 and 2.1e-8 in float64: the bound.

float32 only: in float16 and bfloat16 the eps of the dtype moves acos(1) to 0.044 and 0.125, which
those dtypes' own rounding of a cosine near 1 is of the same order as (measured in the rule's
rationale). Examples 2 and 3 are not reproduced here: their fix is example 1's clamp.

Further: 3-D and 4-D (leading batch dims; the example's `dim=-1` fixes the reduced dim last, and
its `.mean()` averages every angle) and both inputs times 1e-3 and 1e3 (an angle is scale-free)."""

from __future__ import annotations

import math

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled

# acos(1 - eps) for float32's eps (2**-23): the most the clamp moves an angle (at a cosine of 1)
EDGE_ANGLE = Bound("the clamp to 1 - eps(float32) moves an angle of 0 to acos(1 - 2**-23) = 4.9e-4", abs=math.acos(1 - 2.0**-23) * 1.01)


def mean_angle(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean over rows of the angle between pred_i and target_i, 2 atan2(|u - v|, |u + v|) with
    u, v the rows over their 2-norms (sqrt of the sum of squares)."""
    u = pred / torch.sqrt((pred * pred).sum(-1, keepdim=True))
    v = target / torch.sqrt((target * target).sum(-1, keepdim=True))
    gap = torch.sqrt(((u - v) ** 2).sum(-1))
    span = torch.sqrt(((u + v) ** 2).sum(-1))
    return (2 * torch.atan2(gap, span)).mean()


def coinciding(ctx: ReproContext) -> Inputs:
    """16 x 64 randn predictions; the targets of rows 0-7 equal their predictions (measured: their
    float32 cosine similarity is 1.0000001 in 3 rows, exactly 1.0 in one, 0.9999998 to 0.9999999 in
    the others), rows 8-15 randn."""
    pred = torch.randn(16, 64, generator=gen(2081))
    target = torch.randn(16, 64, generator=gen(2082))
    target[:8] = pred[:8]
    return put(ctx, pred=pred, target=target)


def near_edges(ctx: ReproContext) -> Inputs:
    """16 x 64 randn predictions; targets at angles from 3e-3 to 3.1 (cosines from 0.999996 down to
    -0.9995, both edges approached): acos's gradient up to 400, where a clamp at 1 - 1e-4 would bite."""
    pred = torch.randn(16, 64, generator=gen(2083))
    noise = torch.randn(16, 64, generator=gen(2084))
    scale = torch.logspace(-3, 0, 8)
    near = torch.cat([pred[:8] + scale[:, None] * noise[:8], -pred[8:] + scale[:, None] * noise[8:]])
    return put(ctx, pred=pred, target=near)


REPRO = Repro(
    "TNL208",
    "NF",
    "angular_loss",
    FP32,
    adversarial=coinciding,
    benign=near_edges,
    grad=("pred", "target"),
    reference=mean_angle,
    bound=EDGE_ANGLE,
    shapes=lifted(near_edges) + rescaled(near_edges, 1e-3, 1e3),
    thresholds={
        "float32": "16 x 64 randn; rows 0-7 a target equal to its prediction (cosine similarity "
        "1.0000001 in 3 rows: acos NaN; exactly 1.0 in one: gradient -inf)"
    },
)
