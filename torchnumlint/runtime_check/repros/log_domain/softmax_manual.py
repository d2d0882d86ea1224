"""TNL110 softmax-manual: `exp(x) / exp(x).sum(-1, keepdim=True)` is inf / inf = NaN (with a NaN
gradient for the whole row) once one logit makes exp overflow; torch.softmax stays finite.

Example 2 (`e = exp(sim / t); e / e.sum(dim=1, keepdim=True)`, a contrastive softmax at a low
temperature) is reproduced too. Example 3 (Sinkhorn) is not: the linter offers no fix for it."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning
from torchnumlint.runtime_check.repros.log_domain.logsumexp_manual import EXP_OVERFLOW, log_sum_exp

# example 2: cosine similarities (at most 1) over a temperature of 0.01 reach 100, past every overflow
COLD, WARM = 0.01, 0.5


def probabilities(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """p_i = e^(x_i) / sum_j e^(x_j) along `dim`, as e^(x_i - ln sum_j e^(x_j))."""
    return torch.exp(scores - log_sum_exp(scores, dim, keepdim=True))


def contrastive(sim: torch.Tensor, t: float) -> torch.Tensor:
    """The softmax over dim 1 of similarities over a temperature."""
    return probabilities(sim / t, 1)


def adversarial(ctx: ReproContext) -> Inputs:
    """4 x 10 scores, randn; row 0 is randn plus the overflow logit: about half of its exps are inf.
    Its softmax is spread over several entries, so its gradient is of order 0.1 (one score alone
    that high would make the row one-hot and its gradient e^-88: nothing but rounding to compare)."""
    scores = torch.randn(4, 10, generator=gen(110))
    scores[0] += EXP_OVERFLOW[ctx.dtype_name]
    return put(ctx, scores=scores)


def benign(ctx: ReproContext) -> Inputs:
    """Scores of magnitude 1e-3 to 5, either sign, rows shifted by -5, 0, 0, +5: row sums of
    exponentials from 1.2 to 5.3e3 (finite in float16), where an eps in the divisor or a clamp of
    the scores changes the values."""
    shift = torch.tensor([-5.0, 0.0, 0.0, 5.0])[:, None]
    return put(ctx, scores=spanning((4, 10), 1e-3, 5.0, 1101) + shift)


def similarities(seed: int) -> torch.Tensor:
    """8 x 8 cosine similarities of two views each of 4 random 16-d embeddings (noise 0.05): the
    diagonal is 1, a view's pair ~0.96 and other pairs ~0; over t = 0.01 a row's two largest
    differ by a few units, so its softmax is not one-hot."""
    g = gen(seed)
    centres = torch.randn(4, 16, generator=g).repeat_interleave(2, 0)
    v = torch.nn.functional.normalize(centres + 0.05 * torch.randn(8, 16, generator=g), dim=1)
    return v @ v.t()


REPRO = Repro(
    "TNL110",
    "NF",
    "attention_weights",
    PRECISION,
    adversarial=adversarial,
    benign=benign,
    grad=("scores",),
    reference=probabilities,
    shapes=lifted(benign) + rescaled(benign, 1e-3),
    thresholds={d: f"4 x 10 scores, randn; row 0 randn + {v:g} (exp is inf from {v:g})" for d, v in EXP_OVERFLOW.items()},
)

FURTHER = (
    Repro(
        "TNL110",
        "NF",
        "contrastive_probs",
        PRECISION,
        example=1,
        adversarial=lambda ctx: {**put(ctx, sim=similarities(1102)), "t": COLD},
        benign=lambda ctx: {**put(ctx, sim=similarities(1103)), "t": WARM},
        grad=("sim",),
        reference=contrastive,
        shapes=lifted(lambda ctx: {**put(ctx, sim=similarities(1104)), "t": WARM}),  # dim 1 is then not last
        thresholds={
            "*": f"8 x 8 cosine similarities, t = {COLD:g}: the diagonal's 1 / t = {1 / COLD:g} overflows exp "
            f"in every dtype (benign: t = {WARM:g})"
        },
    ),
)
