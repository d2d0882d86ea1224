"""TNL109 logsumexp-manual: `-log(exp(-e).sum(-1))` is -inf (and its gradient NaN) once every
energy of a row is past the point where exp underflows to 0; torch.logsumexp stays finite."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put, randn

# energies from which exp(-e) is exactly 0, measured on torch 2.13 (CPU): 103.98 fp32, 93.0 bf16,
# 17.34 fp16; row 0 sits just past it (log 0 = -inf there, logsumexp -101.7 / -90.5 / -15.0)
UNDERFLOW_ENERGY = {"float32": 104.0, "bfloat16": 94.0, "float16": 17.5}


def adversarial(ctx: ReproContext) -> Inputs:
    energies = torch.randn(4, 10, generator=gen(109))
    energies[0] = UNDERFLOW_ENERGY[ctx.dtype_name] + torch.rand(10, generator=gen(1090))
    return put(ctx, energies=energies)


REPRO = Repro(
    "TNL109", "NF", "free_energy", PRECISION,
    adversarial=adversarial, benign=randn("energies", (4, 10), 2.0, 1091), grad=("energies",),
    thresholds={d: f"4 x 10 energies, randn; row 0 all in [{v:g}, {v + 1:g}) (every exp(-e) is 0)"
                for d, v in UNDERFLOW_ENERGY.items()},
)
