"""TNL101 kl-div-prob-target: the target is a softmax of live logits, so one logit far enough
below the rest of its row makes that target entry exactly 0; the loss's gradient there is NaN, and
softmax's backward spreads it over the whole row (measured: all 32000 entries of s2's gradient).

The fix is judged against KL(p || q) = sum_i p_i (ln p_i - ln q_i), p the target's softmax and q
the input's, averaged over the batch, in float64. Example 3 (`mutual`: the KL in both directions,
`kl_div` and `nn.KLDivLoss` with `a.softmax(1)`) is reproduced too, on the 10-class rows of TNL103
whose softmax underflows. Example 2 is not: the linter offers no fix for it."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rows_spanning, spanning
from torchnumlint.runtime_check.repros.log_domain.log_of_softmax import (
    LOG_SOFTMAX_SPREAD,
    log_probabilities,
    underflowing_row,
)

VOCAB = 32000
# Spread (max - min logit) of a 32000-wide row beyond which softmax underflows to exactly 0:
# ln(2^-150 * 32000) etc. for the smallest subnormal of each format (catalogue: 93.6 fp32, 83 bf16,
# 7.0 fp16). The adversarial row sits just past it.
KL_SPREAD = {"float32": 94.0, "bfloat16": 84.0, "float16": 8.0}
KL_THRESHOLD = {"float32": 93.6, "bfloat16": 83.0, "float16": 7.0}


def kl_divergence(p: torch.Tensor, log_q: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """KL(p || q) = sum_i p_i (ln p_i - ln q_i) along `dim`, with p_i ln p_i = 0 at p_i = 0
    (torch.xlogy): the divergence of q from a target distribution p given as probabilities."""
    return (torch.xlogy(p, p) - p * log_q).sum(dim)


def batch_mean(per_sample: torch.Tensor) -> torch.Tensor:
    """The sum over every entry divided by the size of dim 0: kl_div's "batchmean" (the mean over
    rows only when the input is 2-D; a 3-D input's positions are summed, not averaged)."""
    return per_sample.sum() / per_sample.shape[0] if per_sample.dim() else per_sample


def kl_of_softmaxes(target_logits: torch.Tensor, logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """KL(p || q) = sum_i p_i (ln p_i - ln q_i) along `dim` for p, q the softmaxes of
    `target_logits`, `logits`. A softmax is never 0, and ln p_i = x_i - ln sum_j e^(x_j) holds
    exactly, so ln p is taken from the logits: a p that rounds to 0 in a low precision dtype
    contributes 0, not 0 * ln 0."""
    log_p = log_probabilities(target_logits, dim)
    return (torch.exp(log_p) * (log_p - log_probabilities(logits, dim))).sum(dim)


def distillation_kl(s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
    """KL(softmax(s2) || softmax(s1)) over the last dimension, "batchmean" (`batch_mean`)."""
    return batch_mean(kl_of_softmaxes(s2, s1))


def mutual_kl(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """KL(softmax(b) || softmax(a)) + KL(softmax(a) || softmax(b)) over dim 1 (the class dim,
    the last only for 2-D logits), each "batchmean": the symmetric KL of two models' predictions."""
    return batch_mean(kl_of_softmaxes(b, a, 1)) + batch_mean(kl_of_softmaxes(a, b, 1))


def adversarial(ctx: ReproContext) -> Inputs:
    g = gen(101)
    s1 = torch.randn(2, VOCAB, generator=g)
    s2 = torch.zeros(2, VOCAB)
    s2[0, 0] = -KL_SPREAD[ctx.dtype_name]  # row 0: one logit `spread` below the other 31999
    s2[1] = torch.randn(VOCAB, generator=g)  # row 1: an ordinary row, finite in both
    return put(ctx, s1=s1, s2=s2)


def benign(ctx: ReproContext) -> Inputs:
    """Rows of 32000 logits: rows 0-2 randn with stds log-spaced from 1e-3 (a nearly uniform row)
    to 0.09 of the dtype's threshold, row 3 nearly uniform with one logit 0.8 of the threshold above
    the rest. Spreads (max - min) below the threshold, measured at most 74.9 fp32, 66.5 bf16, 5.6
    fp16, so log-probabilities reach -74.9 fp32, -66.5 bf16, -13.4 fp16 (a clamp of ln p or an eps
    in p changes them) and row 3's largest probability is 1 - 9.7e-29 fp32, 1 - 4.2e-25 bf16 (fp16
    cannot hold a probability near 1 among 32000 classes without a spread past its threshold: 0.0084)."""
    limit = KL_THRESHOLD[ctx.dtype_name]
    return put(ctx, s1=rows_spanning(4, VOCAB, 1e-3, 0.09 * limit, 1012), s2=peaked_rows(1011, 0.09 * limit, 0.8 * limit))


def peaked_rows(seed: int, std: float, peak: float) -> torch.Tensor:
    """3 rows with stds log-spaced from 1e-3 to `std`, then a row of std 1e-3 whose logit 0 is
    `peak` above the rest."""
    peaked = torch.randn(1, VOCAB, generator=gen(seed)) * 1e-3
    peaked[0, 0] += peak
    return torch.cat([rows_spanning(3, VOCAB, 1e-3, std, seed), peaked])


def mutual_adversarial(ctx: ReproContext) -> Inputs:
    """a: 4 x 10 randn; b: TNL103's rows, row 0's logit 0 past the underflow of softmax(b)."""
    return put(ctx, a=torch.randn(4, 10, generator=gen(1013)), b=underflowing_row(ctx))


def mutual_benign(ctx: ReproContext) -> Inputs:
    """Logits of magnitude 1e-3 to 6, either sign (spreads below 12, under every threshold)."""
    return put(ctx, a=spanning((4, 10), 1e-3, 6.0, 1014), b=spanning((4, 10), 1e-3, 6.0, 1015))


def positions_benign(ctx: ReproContext) -> Inputs:
    """4 x 10 x 3 logits (3 positions per sample: the class dim 1 is not last), magnitudes 1e-3
    to 6, either sign."""
    return put(ctx, a=spanning((4, 10, 3), 1e-3, 6.0, 1016), b=spanning((4, 10, 3), 1e-3, 6.0, 1017))


REPRO = Repro(
    "TNL101",
    "NF",
    "distill_loss",
    PRECISION,
    adversarial=adversarial,
    benign=benign,
    grad=("s1", "s2"),
    reference=distillation_kl,
    shapes=lifted(lambda ctx: {"s1": mutual_benign(ctx)["a"], "s2": mutual_benign(ctx)["b"]}),
    thresholds={
        d: f"2 rows x {VOCAB}; row 0 spread {KL_SPREAD[d]:g} (softmax underflows past {KL_THRESHOLD[d]:g} in {d}), row 1 randn"
        for d in KL_SPREAD
    },
)

FURTHER = (
    Repro(
        "TNL101",
        "NF",
        "mutual",
        PRECISION,
        example=2,
        adversarial=mutual_adversarial,
        benign=mutual_benign,
        grad=("a", "b"),
        reference=mutual_kl,
        shapes=(("3-D, the class dim 1 not last", positions_benign),),
        thresholds={
            d: f"4 x 10 logits a, b randn; b's row 0 logit 0 {v:g} below the row's largest (softmax(b) is 0 there)"
            for d, v in LOG_SOFTMAX_SPREAD.items()
        },
    ),
)
