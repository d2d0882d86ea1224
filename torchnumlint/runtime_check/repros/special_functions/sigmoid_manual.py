"""TNL111 sigmoid-manual: the gradient of `1 / (1 + exp(-x))` is NaN once exp(-x) overflows;
`torch.sigmoid(x)` is finite and gives the same values."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import put, randn

# exp(-x) is Inf, and the gradient NaN, from x <= -88.723 float32, -89 bfloat16, -11.094 float16
# (measured on torch 2.13, CPU)
EXP_OVERFLOW = {"float32": -88.723, "bfloat16": -89.0, "float16": -11.094}


def adversarial(ctx: ReproContext) -> Inputs:
    limit = EXP_OVERFLOW[ctx.dtype_name]
    x = torch.cat([torch.linspace(-6.0, 6.0, 13), torch.tensor([limit - 1.0, 2 * limit, -120.0])])
    return put(ctx, x=x)


REPRO = Repro(
    "TNL111", "NF", "gate", PRECISION,
    adversarial=adversarial, benign=randn("x", (64,), 3.0, 1111), grad=("x",),
    thresholds={d: f"x in -6..6 plus {v - 1.0:g}, {2 * v:g}, -120 (exp(-x) overflows from x = {v:g} in {d})"
                for d, v in EXP_OVERFLOW.items()},
)
