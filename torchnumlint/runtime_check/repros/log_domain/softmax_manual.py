"""TNL110 softmax-manual: `exp(x) / exp(x).sum(-1, keepdim=True)` is inf / inf = NaN (with a NaN
gradient for the whole row) once one logit makes exp overflow; torch.softmax stays finite."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put, randn

# the logit from which exp is inf, measured on torch 2.13 (CPU): 88.73 fp32, 89.0 bf16, 11.09 fp16
OVERFLOW_LOGIT = {"float32": 88.75, "bfloat16": 89.0, "float16": 11.1}


def adversarial(ctx: ReproContext) -> Inputs:
    scores = torch.randn(4, 10, generator=gen(110))
    scores[0, 0] = OVERFLOW_LOGIT[ctx.dtype_name]
    return put(ctx, scores=scores)


REPRO = Repro(
    "TNL110", "NF", "attention_weights", PRECISION,
    adversarial=adversarial, benign=randn("scores", (4, 10), 2.0, 1101), grad=("scores",),
    thresholds={d: f"4 x 10 scores, randn; row 0 has one score of {v:g} (exp is inf there)"
                for d, v in OVERFLOW_LOGIT.items()},
)
