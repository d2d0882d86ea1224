"""TNL101 kl-div-prob-target: the target is a softmax of live logits, so one logit far enough
below the rest of its row makes that target entry exactly 0; the loss's gradient there is NaN, and
softmax's backward spreads it over the whole row (measured: all 32000 entries of s2's gradient)."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put

VOCAB = 32000
# Spread (max - min logit) of a 32000-wide row beyond which softmax underflows to exactly 0:
# ln(2^-150 * 32000) etc. for the smallest subnormal of each format (catalogue: 93.6 fp32, 83 bf16,
# 7.0 fp16). The adversarial row sits just past it.
KL_SPREAD = {"float32": 94.0, "bfloat16": 84.0, "float16": 8.0, "autocast": 8.0}
KL_THRESHOLD = {"float32": 93.6, "bfloat16": 83.0, "float16": 7.0, "autocast": 7.0}


def adversarial(ctx: ReproContext) -> Inputs:
    g = gen(101)
    s1 = torch.randn(2, VOCAB, generator=g)
    s2 = torch.zeros(2, VOCAB)
    s2[0, 0] = -KL_SPREAD[ctx.dtype_name]  # row 0: one logit `spread` below the other 31999
    s2[1] = torch.randn(VOCAB, generator=g)  # row 1: an ordinary row, finite in both
    return put(ctx, s1=s1, s2=s2)


def benign(ctx: ReproContext) -> Inputs:
    # logit spread well below the dtype's threshold: about 27 (randn x 3), 4.5 in float16
    scale = 0.5 if ctx.compute_dtype == torch.float16 else 3.0
    g = gen(1011)
    return put(ctx, s1=torch.randn(4, VOCAB, generator=g) * scale, s2=torch.randn(4, VOCAB, generator=g) * scale)


REPRO = Repro(
    "TNL101", "NF", "distill_loss", PRECISION,
    adversarial=adversarial, benign=benign, grad=("s1", "s2"),
    thresholds={d: f"2 rows x {VOCAB}; row 0 spread {KL_SPREAD[d]:g} (softmax underflows past "
                   f"{KL_THRESHOLD[d]:g} in {d}), row 1 randn" for d in KL_SPREAD},
)
