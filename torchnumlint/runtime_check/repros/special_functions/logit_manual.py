"""TNL112 logit-manual: `log(p / (1 - p))` of a sigmoid is +-Inf with a NaN gradient once the
sigmoid rounds to 0 or 1; `torch.logit(p, eps=1e-6)` stays finite. float32 only: the fix's
eps of 1e-6 is below what float16 (3e-4) and bfloat16 (2e-3) can keep away from 1 (measured)."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import put, randn

# sigmoid(z) == 1 from z = 16.64 and == 0 below z = -88.72 in float32 (measured, torch 2.13 CPU)
SIGMOID_ONE, SIGMOID_ZERO = 16.64, -88.72


def adversarial(ctx: ReproContext) -> Inputs:
    z = torch.cat([torch.linspace(-6.0, 6.0, 13), torch.tensor([SIGMOID_ONE + 0.5, 40.0, SIGMOID_ZERO - 1.0])])
    return put(ctx, z=z)


REPRO = Repro(
    "TNL112", "NF", "log_odds", FP32,
    adversarial=adversarial, benign=randn("z", (64,), 3.0, 1112), grad=("z",),
    thresholds={"float32": f"z in -6..6 plus {SIGMOID_ONE + 0.5:g}, 40, {SIGMOID_ZERO - 1.0:g} (sigmoid(z) is 1 "
                           f"from z = {SIGMOID_ONE:g}, 0 below {SIGMOID_ZERO:g})"},
)
