"""TNL401 masked-inf-softmax: a query whose every key is masked with -inf is a NaN row of the
softmax, and every entry of grad(V) is NaN; filled with finfo(dtype).min the row is uniform.

The fix is judged against attention by its definition in float64: weights e^(s_ij) over the sum
of e^(s_ik) for the kept keys k, 0 for the masked ones. A query that keeps no key has no such sum;
its weights are taken uniform over all keys, the limit of filling the masked scores with a finite
c as c -> -inf (every score of the row becomes c), which is what a finite fill computes.

Example 2 (`pool`: `logits[pad] = -math.inf` in place, softmax over dim 1, then a weighted sum of
h) is reproduced too. Example 3 is not: the linter offers no fix for it."""

from __future__ import annotations

from typing import Dict

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, spanning


FULLY_MASKED = (
    "a fully masked row attends to nothing: its weights are taken as uniform over every key (the "
    "value a finite fill gives; zero weights would be as defensible) and get no gradient"
)


def attention_weights(scores: torch.Tensor, masked: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """e^(s_ij) / sum_(k kept) e^(s_ik) for kept keys, 0 for masked ones, along `dim`; a row with
    no kept key is uniform over all of them (no score reaches it, so its gradient is 0). The
    exponent is shifted by the row's largest kept score (an identity, hence detached)."""
    kept = ~masked
    kept = kept | ~kept.any(dim, keepdim=True)  # a row with no kept key: every key, each at score 0
    s = torch.where(kept & ~masked, scores, 0.0)
    top = torch.where(kept, s, float("-inf")).amax(dim, keepdim=True).detach()
    e = kept * torch.exp(torch.where(kept, s - top, 0.0))
    return e / e.sum(dim, keepdim=True)


def attention(scores: torch.Tensor, mask: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The attention of each query over its kept keys (mask True: masked) applied to v."""
    return attention_weights(scores, mask) @ v


def pooled(h: torch.Tensor, w: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """sum_t a_bt h_bt, a_b the attention weights of the logits h_b @ w over the positions that
    are not padding (dim 1)."""
    return (attention_weights(h @ w, pad, 1).unsqueeze(-1) * h).sum(1)


def partly_masked(seed: int, shape, full_row: bool) -> torch.Tensor:
    """A random mask (True: masked) whose column 0 is kept, so no row is fully masked, except row 1
    when `full_row` (a query that sees no key: an empty sequence, a left-padded first query)."""
    mask = torch.rand(*shape, generator=gen(seed)) < 0.5
    mask[:, 0] = False
    if full_row:
        mask[1] = True
    return mask


def adversarial(ctx: ReproContext) -> Inputs:
    return put(
        ctx,
        scores=torch.randn(3, 5, generator=gen(401)) * 2.0,
        mask=partly_masked(403, (3, 5), True),
        v=torch.randn(5, 4, generator=gen(402)),
    )


def benign(ctx: ReproContext) -> Inputs:
    """4 x 6 scores of magnitude 1e-3 to 1e3 (either sign), row 2 lowered by 2e4 (a row whose
    every kept score is below -1.9e4, measured), no row fully masked: a finite fill above -2e4
    (0, -1e3, -1e4) outweighs row 2's kept keys and changes the values; finfo.min (-65504 in
    float16) does not."""
    scores = spanning((4, 6), 1e-3, 1e3, 4011)
    scores[2] -= 2e4
    return put(ctx, scores=scores, mask=partly_masked(4013, (4, 6), False), v=torch.randn(6, 4, generator=gen(4012)))


# Example 2's benign row 2 is lowered by 200 in float32 (its logits -201..-199, the others within
# +-2.4, measured): a finite fill above -200 (0, -30, -100) outweighs its positions that are not
# padding and changes the values. Not in bfloat16 and float16: there h of 150 rounds its logits by
# about 1, so the mathematics itself is 4.1 (bf16) and 2.2 (fp16) off in grad w (measured), and
# that error would become the precision check's allowance.
LOWERED = {"float32": 200.0, "bfloat16": 0.0, "float16": 0.0}


def pool_inputs(full_row: bool, seed: int, lowered: float = 0.0) -> Dict[str, torch.Tensor]:
    """h: 3 x 5 x 4, magnitudes 1e-3 to 3 (either sign); w: 4 weights of magnitude 0.1 to 1;
    pad: partly_masked, row 1 all padding when `full_row`. Row 2 of h is moved along w so that its
    logits h @ w are `lowered` below what they were."""
    h, w = spanning((3, 5, 4), 1e-3, 3.0, seed), spanning((4,), 0.1, 1.0, seed + 1)
    h[2] -= lowered * w / (w @ w)
    return dict(h=h, w=w, pad=partly_masked(seed + 2, (3, 5), full_row))


REPRO = Repro(
    "TNL401",
    "NF",
    "attend",
    PRECISION,
    adversarial=adversarial,
    benign=benign,
    grad=("scores", "v"),
    reference=attention,
    shapes=lifted(benign),
    convention=FULLY_MASKED,
    thresholds={"*": "3 x 5 scores, row 1 fully masked with -inf, other rows partly masked (column 0 kept)"},
)

FURTHER = (
    Repro(
        "TNL401",
        "NF",
        "pool",
        PRECISION,
        example=1,
        adversarial=lambda ctx: put(ctx, **pool_inputs(True, 4014)),
        benign=lambda ctx: put(ctx, **pool_inputs(False, 4017, LOWERED[ctx.dtype_name])),
        grad=("h", "w"),
        reference=pooled,
        convention=FULLY_MASKED,
        thresholds={"*": "h 3 x 5 x 4, logits h @ w; row 1 all padding (set to -inf), other rows partly padded"},
    ),
)
