"""TNL211 exp-unbounded: a VAE's KL term with a log-variance past 88.72 is inf in float32 (and the
log-variance's gradient inf); with the exponent clamped at 80 both are finite.

float32 only: the clamp at 80 is the float32 fix (float16 overflows from 11.09, where a clamp at 80
does nothing).

Further: 3-D and 4-D (leading batch dims; the example's `.sum(-1)` fixes the summed dim last),
the means times 1e-3 and 1e3, and both inputs times 1e-3. The log-variances are not scaled up:
they are logs, benign only below exp's overflow at 88.72, and -20 .. 60 already spans exp from
2e-9 to 1.1e26 (times 1e3 they would be the hazard itself).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled

# Where the clamp acts (logvar > 80) exp(logvar) is replaced by exp(80) < exp(logvar): the KL term
# -0.5 (1 + v - mu^2 - e^v) moves toward 0 by 0.5 (e^v - e^80), less than its own size: |fix -
# reference| <= |reference| (the reference is 4.5e38 and more there, beyond float32).
LOWER = Bound(
    "clamp(max=80.0) lowers exp(logvar) to exp(80) = 5.5e34 where logvar > 80: the KL moves toward 0 by less than its own size", rel=1.0
)


def kl_to_standard_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, sigma^2) || N(0, 1)) summed over the last dimension, sigma^2 = e^logvar:
    0.5 sum(sigma^2 + mu^2 - 1 - log sigma^2)."""
    return 0.5 * (torch.exp(logvar) + mu * mu - 1 - logvar).sum(-1)


def exploded(ctx: ReproContext) -> Inputs:
    """mu, logvar: 4 x 8 randn; logvar[0, 3] = 90 and logvar[2, 5] = 100 (past 88.72: exp is inf)."""
    logvar = torch.randn(4, 8, generator=gen(2111))
    logvar[0, 3], logvar[2, 5] = 90.0, 100.0
    return put(ctx, mu=torch.randn(4, 8, generator=gen(2112)), logvar=logvar)


def ordinary(ctx: ReproContext) -> Inputs:
    """logvar from -20 to 60 (exp from 2e-9 to 1.1e26), mu randn: a wrong ceiling below 60 shows."""
    logvar = torch.linspace(-20, 60, 32).reshape(4, 8)
    return put(ctx, mu=torch.randn(4, 8, generator=gen(2113)), logvar=logvar)


REPRO = Repro(
    "TNL211",
    "NF",
    "gaussian_kl",
    FP32,
    adversarial=exploded,
    benign=ordinary,
    grad=("mu", "logvar"),
    reference=kl_to_standard_normal,
    bound=LOWER,
    shapes=lifted(ordinary) + rescaled(ordinary, 1e-3, 1e3, only=("mu",)) + rescaled(ordinary, 1e-3),
    thresholds={"*": "4 x 8, two log-variances at 90 and 100 (exp overflows past 88.72 in float32); benign: log-variances -20 .. 60"},
)
