"""TNL104 log-of-sigmoid: `log(1 - sigmoid(z))` is -inf once sigmoid rounds to 1; logsigmoid(-z)
stays finite."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import put, randn

# 1 - sigmoid(z) == 0 from z >= 16.64 fp32, 8.32 fp16, 6.25 bf16 (catalogue)
SIGMOID_SATURATION = {"float32": 16.64, "bfloat16": 6.25, "float16": 8.32}


def adversarial(ctx: ReproContext) -> Inputs:
    limit = SIGMOID_SATURATION[ctx.dtype_name]
    z = torch.cat([torch.linspace(-6.0, 4.0, 11), torch.tensor([limit + 0.5, 2 * limit, 40.0])])
    return put(ctx, z=z)


REPRO = Repro(
    "TNL104", "NF", "log_not", PRECISION,
    adversarial=adversarial, benign=randn("z", (64,), 2.0, 1041), grad=("z",),
    thresholds={d: f"z in -6..4 plus {v + 0.5:g}, {2 * v:g}, 40 (1 - sigmoid(z) is 0 from z >= {v:g} "
                   f"in {d})" for d, v in SIGMOID_SATURATION.items()},
)
