"""TNL105 bce-on-sigmoid: `F.binary_cross_entropy(torch.sigmoid(z), y)` is finite but wrong once
the sigmoid saturates: the loss capped at 100 (z = 20, label 0: true 20), the gradient 0 where it
should be 1, and -0.094 instead of -1 at z = -30 with label 1. The reference is the fix
(`binary_cross_entropy_with_logits`) in float64. Float16 is not run: there the original's
gradient is NaN (measured), which a WV check does not ask about."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Inputs, ReproContext, Repro
from torchnumlint.runtime_check.repros.inputs import gen, put

# 1 - sigmoid(z) == 0 from z >= 16.64 fp32, 6.25 bf16 (measured, torch 2.13 CPU)
SIGMOID_SATURATION = {"float32": 16.64, "bfloat16": 6.25}


def adversarial(ctx: ReproContext) -> Inputs:
    """Logits -4..4 with random labels, then saturated and confidently wrong ones: past the
    saturation with label 0, and -30 with label 1."""
    limit = SIGMOID_SATURATION[ctx.dtype_name]
    g = gen(105)
    z = torch.cat([torch.linspace(-4.0, 4.0, 9), torch.tensor([limit + 0.5, 2 * limit, -30.0])])
    y = torch.cat([torch.randint(0, 2, (9,), generator=g).float(), torch.tensor([0.0, 0.0, 1.0])])
    return put(ctx, z=z, y=y)


def benign(ctx: ReproContext) -> Inputs:
    g = gen(1051)
    return put(ctx, z=torch.randn(64, generator=g) * 2.0, y=torch.randint(0, 2, (64,), generator=g).float())


REPRO = Repro(
    "TNL105", "WV", "bce", ("float32", "bfloat16"),
    adversarial=adversarial, benign=benign, grad=("z",),
    thresholds={d: f"z in -4..4 plus {v + 0.5:g}, {2 * v:g} (label 0) and -30 (label 1); the sigmoid rounds "
                   f"to 1 from z = {v:g} in {d}; reference: the fix in float64" for d, v in SIGMOID_SATURATION.items()},
)
