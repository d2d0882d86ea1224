"""TNL103 log-of-softmax: `log(softmax(x))` is -inf (and its gradient NaN) once a logit lies far
enough below the rest of its row for softmax to underflow; log_softmax stays finite."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put, randn

# spread of a 10-wide row (one logit `spread` below the other nine) past which softmax underflows:
# ln(smallest subnormal / 2) + ln 9: 101.8 fp32, 91.3 bf16, 15.1 fp16 (catalogue: 120 fp32, 20 fp16)
LOG_SOFTMAX_SPREAD = {"float32": 120.0, "bfloat16": 100.0, "float16": 20.0}


def adversarial(ctx: ReproContext) -> Inputs:
    logits = torch.randn(4, 10, generator=gen(103))
    logits[0] = 0.0
    logits[0, 0] = -LOG_SOFTMAX_SPREAD[ctx.dtype_name]
    return put(ctx, logits=logits)


def log_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """log p_i = x_i - log sum_j exp(x_j), the sum taken after the row's max is factored out."""
    top = logits.max(-1, keepdim=True).values
    return logits - top - torch.log(torch.exp(logits - top).sum(-1, keepdim=True))


REPRO = Repro(
    "TNL103", "NF", "log_probs", PRECISION,
    adversarial=adversarial, benign=randn("logits", (4, 10), 2.0, 1031), grad=("logits",),
    reference=log_probabilities,
    thresholds={d: f"4 x 10 logits; row 0 has one logit {v:g} below the rest (softmax underflows: "
                   f"log 0 = -inf), rows 1-3 randn" for d, v in LOG_SOFTMAX_SPREAD.items()},
)
