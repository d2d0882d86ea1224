"""TNL107 exp-minus-one: `(exp(h) - 1) / h` is 0 instead of 1 for small steps h; `expm1(h) / h`
is right against a float64 reference."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import put, randn

# Measured on torch 2.13 (CPU): exp(h) rounds to 1, and exp(h) - 1 to 0, below half an ulp of 1:
# 2^-24 = 6e-8 in float32, 2^-11 = 4.9e-4 in float16, 2^-8 = 3.9e-3 in bfloat16.
ROUNDS_TO_ONE = {"float32": 6e-8, "float16": 4.9e-4, "bfloat16": 3.9e-3}


def adversarial(ctx: ReproContext) -> Inputs:
    """Steps from 1e-3 of the threshold to just below it: `exp(h) - 1` is 0 for each."""
    limit = ROUNDS_TO_ONE[ctx.dtype_name]
    return put(ctx, h=torch.logspace(-3, 0, 10) * 0.99 * limit)


REPRO = Repro(
    "TNL107", "WV", "phi_1", PRECISION,
    adversarial=adversarial, benign=randn("h", (64,), 1.0, 1071),
    thresholds={d: f"h from {v * 1e-3:.1e} to {v * 0.99:.1e} (exp(h) rounds to 1 below {v:g} in {d})"
                for d, v in ROUNDS_TO_ONE.items()},
)
