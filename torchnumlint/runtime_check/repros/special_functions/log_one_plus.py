"""TNL106 log-one-plus: `log(1 + x)` rounds `1 + x` first and is 0 for small x; `log1p(x)` is
right against a float64 reference."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import put, randn

# Measured on torch 2.13 (CPU): `1 + x` rounds to 1 below half an ulp of 1, so log(1 + x) is 0
# from there down: 2^-24 = 6e-8 in float32, 2^-11 = 4.9e-4 in float16, 2^-8 = 3.9e-3 in bfloat16.
ROUNDS_TO_ONE = {"float32": 6e-8, "float16": 4.9e-4, "bfloat16": 3.9e-3}


def adversarial(ctx: ReproContext) -> Inputs:
    """Growth rates from 1e-3 of the threshold to just below it: `1 + rate` is 1 for each."""
    limit = ROUNDS_TO_ONE[ctx.dtype_name]
    return put(ctx, rate=torch.logspace(-3, 0, 10) * 0.99 * limit)


REPRO = Repro(
    "TNL106", "WV", "log_growth", PRECISION,
    adversarial=adversarial, benign=randn("rate", (64,), 0.2, 1061),
    thresholds={d: f"rate from {v * 1e-3:.1e} to {v * 0.99:.1e} (1 + rate rounds to 1 below {v:g} in {d})"
                for d, v in ROUNDS_TO_ONE.items()},
)
