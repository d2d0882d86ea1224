"""TNL206 unguarded-sqrt-or-pow: rsqrt of a constant row's variance is rsqrt(0) = inf.

Example 2 (`spread_loss`: the root of E[x^2] - mean^2, which rounds below 0 on a constant row of
0.1 (-9.3e-10 in float32), of 1 - cos^2 at cos = +-1, and `.pow(0.5)` of a mean square that is 0)
is reproduced too.

float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.oracles import tolerance
from torchnumlint.runtime_check.repros.inputs import constant_row, lifted, put, rescaled, rows_spanning
from torchnumlint.runtime_check.repros.roots.sqrt_of_sum_of_squares import euclidean_norm

# Example 1: clamp_min(1e-12) acts only where the variance is below 1e-12: on these inputs only the
# constant row (variance 0), where 1 / sqrt(0) is +inf, the mathematics' own value (not compared);
# the other variances (0.57 .. 1.01, measured) are unchanged.
VARIANCE_UNCHANGED = Bound(
    "clamp_min(1e-12) acts only on the constant row's variance 0, where the "
    "mathematics is +inf (not compared); variances 0.57 .. 1.01 are unchanged"
)
# Example 2: each of its three clamps raises a radicand below 1e-12 to 1e-12, so its root rises from
# sqrt(max(v, 0)) <= 1e-6 to 1e-6: by at most 1e-6, and an entry of the sum by at most 3e-6, plus
# float32's rounding of 1e-12, of the roots and of their sum (a few ulps). Measured: 3e-6 on row 1
# (constant, cos = 1: all three clamps act; 3.0000001e-6 in float32), 1e-6 on row 2 (cos = -1).
THREE_ROOTS = Bound(
    "three clamp_min(1e-12) each lift a root of a radicand below 1e-12 to 1e-6: at most 3e-6 per entry (and float32's rounding of it)",
    abs=3e-6 * (1 + tolerance("float32")),
)


def inverse_std(x: torch.Tensor) -> torch.Tensor:
    """1 / s per row, s the sample standard deviation (n - 1) from its definition (two-pass): +inf
    on a constant row, where its gradient (inf * 0) is undefined."""
    dev = x - x.sum(-1, keepdim=True) / x.shape[-1]
    return 1 / torch.sqrt((dev * dev).sum(-1, keepdim=True) / (x.shape[-1] - 1))


def spread_and_sine(x: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """2 sigma(x) + sin(arccos(cos)) per row: the example's `sd` and `rms` are both the population
    standard deviation sigma = ||x - mean|| / sqrt(n) (sd written as E[x^2] - mean^2, rms two-pass),
    its subgradient 0 taken at a constant row (the norm's); sqrt(1 - cos^2) is written
    sqrt((1 - cos)(1 + cos)), with no cancellation near +-1, where its slope is infinite
    (undefined, not compared)."""
    sigma = euclidean_norm(x - x.mean(-1, keepdim=True), -1) / x.shape[-1] ** 0.5
    return 2 * sigma + torch.sqrt((1 - cos) * (1 + cos))


def flat_and_aligned(ctx: ReproContext) -> Inputs:
    """x: 4 x 16 randn, row 1 all 0.1 (E[x^2] - mean^2 = -9.3e-10 in float32); cos: 1 and -1 in
    entries 1 and 2 (1 - cos^2 = 0)."""
    return put(ctx, x=constant_row(2062, 0.1), cos=torch.tensor([0.6, 1.0, -1.0, 0.0]))


def spread_and_near_aligned(ctx: ReproContext) -> Inputs:
    """x: 8 rows of std 1e-3 .. 1e3; cos: +-(1 - d), d from 1e-6 to 1 (1 - cos^2 from 2e-6 to 1):
    a clamp of a radicand above 1e-6 changes them."""
    d = torch.logspace(-6, 0, 8)
    signs = torch.tensor([1.0, -1.0] * 4)
    return put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2063), cos=signs * (1 - d))


REPRO = Repro(
    "TNL206",
    "NF",
    "inv_std",
    FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(206, 3.0)),
    benign=lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2061)),
    grad=("x",),
    reference=inverse_std,
    bound=VARIANCE_UNCHANGED,
    convention="1 / std of a constant row is +inf and its derivative undefined: neither is compared",
    shapes=lifted(lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2061)))
    + rescaled(lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2064)), 1e-3, 1e3),
    thresholds={
        "*": "4 x 16, row 1 constant (var 0: rsqrt(0) = inf), other rows randn; benign: 8 rows of std 1e-3 .. 1e3 (variance 1e-6 .. 1e6)"
    },
)

FURTHER = (
    Repro(
        "TNL206",
        "NF",
        "spread_loss",
        FP32,
        example=1,
        adversarial=flat_and_aligned,
        benign=spread_and_near_aligned,
        grad=("x", "cos"),
        reference=spread_and_sine,
        bound=THREE_ROOTS,
        convention="a constant row's spread takes the norm's subgradient 0 at 0; the slope of sqrt(1 - cos^2) at "
        "cos = +-1 is infinite and not compared",
        shapes=lifted(spread_and_near_aligned),
        thresholds={"*": "x 4 x 16 randn, row 1 all 0.1 (E[x^2] - mean^2 < 0: sqrt NaN); cos 1 and -1 (gradient of the root at 0: inf)"},
    ),
)
