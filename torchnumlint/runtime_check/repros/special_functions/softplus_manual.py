"""TNL108 softplus-manual: `log(1 + exp(rho))` is Inf (gradient NaN) once exp overflows;
`F.softplus(rho)` is finite and equal where the original is finite."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import put, randn

# exp(x) overflows from log(finfo.max): 88.72 in float32 and bfloat16, 11.09 in float16
# (measured on torch 2.13, CPU: log(1 + exp(88.8)) is Inf in float32, at 11.1 in float16).
EXP_OVERFLOW = {"float32": 88.72, "bfloat16": 88.72, "float16": 11.09}


def adversarial(ctx: ReproContext) -> Inputs:
    limit = EXP_OVERFLOW[ctx.dtype_name]
    rho = torch.cat([torch.linspace(-5.0, 5.0, 11), torch.tensor([limit + 0.5, 2 * limit])])
    return put(ctx, rho=rho)


REPRO = Repro(
    "TNL108", "NF", "positive_scale", PRECISION,
    adversarial=adversarial, benign=randn("rho", (64,), 3.0, 1081), grad=("rho",),
    thresholds={d: f"rho in -5..5 plus {v + 0.5:g}, {2 * v:g} (exp overflows from {v:g} in {d})"
                for d, v in EXP_OVERFLOW.items()},
)
