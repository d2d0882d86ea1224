"""TNL213 inverse-and-det: `torch.log(torch.det(cov))` of a 60 x 60 covariance near 0.1 * I
(det 1.5e-59) is -inf in float32 (the determinant underflows to 0) with every gradient entry NaN;
the fix, `torch.logdet`, is judged against the log-determinant by its definition for a symmetric
positive definite matrix, 2 sum log diag(L) with L its Cholesky factor, in float64.

Example 2 (`torch.inverse(gram) @ (X.T @ y)`) is not reproduced: a WV check demands that the fix be within
float32's tolerance (4.8e-7) of the float64 solution while the original is off by ten times that,
and a float32 system ill-conditioned enough for the inverse to be measurably worse is one that no
float32 solver solves to 4.8e-7 (measured: at condition 1e4 the original's gradient is off by
9.1e-4, `solve`'s by 8.1e-5). The rule's rationale gives the measured accuracy ratio.
Example 3's fix (`slogdet`) is example 1's for |det|.

float32 only: torch's CPU det has no float16 or bfloat16 kernel.

Further: batches of covariances, 3-D (3 x 8 x 8) and 4-D (2 x 3 x 8 x 8), the matrices at scales
1e-3, 1 and 1e3 (det from 1.7e-22 to 1.7e26 on these
matrices, measured: within float32's range). A
determinant reduces the last two dims by definition; only the leading ones can be added. They are
not `inputs.lifted`: a covariance rolled along its rows is no longer symmetric."""

from __future__ import annotations

import math
from typing import Tuple

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def log_determinant(cov: torch.Tensor) -> torch.Tensor:
    """log det(cov) = 2 sum_i log L_ii, L the Cholesky factor of the (SPD) covariance."""
    return 2 * torch.log(torch.diagonal(torch.linalg.cholesky(cov), dim1=-2, dim2=-1)).sum(-1)


def spd(n: int, scale: float, spread: float, seed: int) -> torch.Tensor:
    """scale * (I + spread * M M^T / n), M randn: symmetric positive definite, near scale * I
    (symmetrised after the product, which float32 does not round symmetrically)."""
    m = torch.randn(n, n, generator=gen(seed))
    s = m @ m.T
    return scale * (torch.eye(n) + spread * (s + s.T) / (2 * n))


SCALES = (1e-3, 1.0, 1e3)


def covariance_batch(lead: Tuple[int, ...]) -> Builder:
    """`lead` x 8 x 8 covariances, each scale * (I + M M^T / 8) with its own M, the scales cycling
    through 1e-3, 1 and 1e3 along the last batch dim."""

    def build(ctx: ReproContext) -> Inputs:
        mats = [spd(8, SCALES[i % len(SCALES)], 1.0, 2133 + i) for i in range(math.prod(lead))]
        return put(ctx, cov=torch.stack(mats).reshape(*lead, 8, 8))

    return build


REPRO = Repro(
    "TNL213",
    "NF",
    "log_volume",
    FP32,
    adversarial=lambda ctx: put(ctx, cov=spd(60, 0.1, 0.05, 2131)),
    benign=lambda ctx: put(ctx, cov=spd(8, 1.0, 1.0, 2132)),
    grad=("cov",),
    reference=log_determinant,
    shapes=(
        ("3-D, a batch of covariances at scales 1e-3, 1, 1e3", covariance_batch((3,))),
        ("4-D, a batch of batches", covariance_batch((2, 3))),
    ),
    thresholds={
        "float32": "60 x 60 covariance 0.1 * (I + 0.05 M M^T / 60): det 1.5e-59 (measured in float64), 0 in float32 "
        "(det(0.1 * I) underflows from size 46)"
    },
)
