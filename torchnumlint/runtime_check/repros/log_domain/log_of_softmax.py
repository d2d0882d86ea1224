"""TNL103 log-of-softmax: `log(softmax(x))` is -inf (and its gradient NaN) once a logit lies far
enough below the rest of its row for softmax to underflow; log_softmax stays finite.

Examples 2 (`nll_loss(log(softmax(x)), y, weight=w, reduction="sum")`, fixed to cross_entropy: the
target's logit underflows) and 3 (the entropy `-(p * p.log()).sum(-1)` of a tempered softmax:
0 * -inf = NaN) are reproduced too. Example 4 is not: the linter offers no fix for it."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning
from torchnumlint.runtime_check.repros.log_domain.logsumexp_manual import log_sum_exp

# spread below a row's largest logit past which softmax underflows to 0: at most ln(smallest
# subnormal / 2) = -103.97 fp32, -92.9 bf16, -17.3 fp16 (exp(-e) is 0 from e = 103.98, 93.0, 17.34,
# measured for TNL109; catalogue: 120 fp32, 20 fp16)
LOG_SOFTMAX_SPREAD = {"float32": 120.0, "bfloat16": 100.0, "float16": 20.0}
TEMPERATURE = 0.5  # example 3's T: the logits are sharpened, so their spread is halved


def underflowing_row(ctx: ReproContext, scale: float = 1.0) -> torch.Tensor:
    """4 x 10 logits, randn; row 0's logit 0 `spread` (times `scale`) below the row's largest. The
    other logits of row 0 differ, so no gradient of the row cancels to 0 (the entropy's does for
    equal logits, leaving only rounding to compare)."""
    logits = torch.randn(4, 10, generator=gen(103))
    logits[0, 0] = logits[0, 1:].max() - LOG_SOFTMAX_SPREAD[ctx.dtype_name] * scale
    return logits


def adversarial(ctx: ReproContext) -> Inputs:
    return put(ctx, logits=underflowing_row(ctx))


def benign(ctx: ReproContext) -> Inputs:
    """Logits of magnitude 1e-3 to 6, either sign: probabilities from 3.6e-4 to 0.66, where an eps
    or a clamp of the probabilities changes the values."""
    return put(ctx, logits=spanning((4, 10), 1e-3, 6.0, 1031))


def log_probabilities(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """log p_i = x_i - log sum_j exp(x_j) along `dim` (the class dim: the last, or 1)."""
    return logits - log_sum_exp(logits, dim, keepdim=True)


def weighted_nll_sum(logits: torch.Tensor, labels: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """-sum_i w[y_i] log p_i[y_i]: the class-weighted negative log-likelihood, summed over every
    sample and position (dim 1 is the class, whatever the number of dims)."""
    picked = log_probabilities(logits, 1).gather(1, labels.unsqueeze(1)).squeeze(1)
    return -(w[labels] * picked).sum()


def entropy(logits: torch.Tensor, T: float) -> torch.Tensor:
    """H = -sum_i p_i log p_i of p = softmax(logits / T) over the last dimension."""
    log_p = log_probabilities(logits / T)
    return -(torch.exp(log_p) * log_p).sum(-1)


def labelled(ctx: ReproContext, logits: torch.Tensor) -> Inputs:
    """`logits` with labels (row 0's the underflowing logit 0) and class weights in [0.5, 1.5)."""
    labels = torch.randint(0, 10, (4,), generator=gen(1032))
    labels[0] = 0
    return put(ctx, logits=logits, labels=labels, w=0.5 + torch.rand(10, generator=gen(1033)))


def labelled_positions(ctx: ReproContext) -> Inputs:
    """4 x 10 x 3 logits (the class dim 1 not last: 3 positions per sample, as a sequence model
    gives them) of magnitude 1e-3 to 6, either sign, labels 4 x 3, class weights in [0.5, 1.5)."""
    labels = torch.randint(0, 10, (4, 3), generator=gen(1036))
    return put(ctx, logits=spanning((4, 10, 3), 1e-3, 6.0, 1037), labels=labels, w=0.5 + torch.rand(10, generator=gen(1033)))


def tempered(ctx: ReproContext, logits: torch.Tensor) -> Inputs:
    return {**put(ctx, logits=logits), "T": TEMPERATURE}


REPRO = Repro(
    "TNL103",
    "NF",
    "log_probs",
    PRECISION,
    adversarial=adversarial,
    benign=benign,
    grad=("logits",),
    reference=log_probabilities,
    shapes=lifted(benign) + rescaled(benign, 1e-3),
    thresholds={
        d: f"4 x 10 logits, randn; row 0's logit 0 is {v:g} below the row's largest (softmax underflows: log 0 = -inf)"
        for d, v in LOG_SOFTMAX_SPREAD.items()
    },
)

FURTHER = (
    Repro(
        "TNL103",
        "NF",
        "loss_fn",
        PRECISION,
        example=1,
        adversarial=lambda ctx: labelled(ctx, underflowing_row(ctx)),
        benign=lambda ctx: labelled(ctx, spanning((4, 10), 1e-3, 6.0, 1034)),
        grad=("logits",),
        reference=weighted_nll_sum,  # nll_loss has no gradient for its weight
        shapes=(("3-D, the class dim 1 not last", labelled_positions),),
        thresholds={
            d: f"4 x 10 logits, randn; row 0's target logit {v:g} below the row's largest (its softmax is 0); class weights in [0.5, 1.5)"
            for d, v in LOG_SOFTMAX_SPREAD.items()
        },
    ),
    Repro(
        "TNL103",
        "NF",
        "entropy",
        PRECISION,
        example=2,
        adversarial=lambda ctx: tempered(ctx, underflowing_row(ctx, TEMPERATURE)),
        benign=lambda ctx: tempered(ctx, spanning((4, 10), 1e-3, 3.0, 1035)),
        grad=("logits",),
        reference=entropy,
        shapes=lifted(lambda ctx: tempered(ctx, spanning((4, 10), 1e-3, 3.0, 1035))),
        thresholds={
            d: f"4 x 10 logits, randn, T = {TEMPERATURE:g}; row 0's logit 0 is {v * TEMPERATURE:g} below "
            f"the row's largest ({v:g} after / T: its p is 0, 0 * log 0 = NaN)"
            for d, v in LOG_SOFTMAX_SPREAD.items()
        },
    ),
)
