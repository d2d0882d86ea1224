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

float32 only: torch's CPU det has no float16 or bfloat16 kernel."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Repro
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


REPRO = Repro(
    "TNL213", "NF", "log_volume", FP32,
    adversarial=lambda ctx: put(ctx, cov=spd(60, 0.1, 0.05, 2131)),
    benign=lambda ctx: put(ctx, cov=spd(8, 1.0, 1.0, 2132)),
    grad=("cov",), reference=log_determinant,
    thresholds={"float32": "60 x 60 covariance 0.1 * (I + 0.05 M M^T / 60): det 1.5e-59 (measured in float64), 0 in float32 "
                           "(det(0.1 * I) underflows from size 46)"},
)

