"""TNL112 logit-manual: `log(p / (1 - p))` of a sigmoid is +-Inf with a NaN gradient once the
sigmoid rounds to 0 or 1; `torch.logit(p, eps=1e-6)` stays finite. float32 only: the fix's
eps of 1e-6 is below what float16 (3e-4) and bfloat16 (2e-3) can keep away from 1 (measured).

The fix is UNSAFE: it clamps p into [1e-6, 1 - 1e-6], so the log-odds it returns are capped at
+-logit(1 - 1e-6) = +-13.8155 (13.8023 above in float32) and the clamped entries get no gradient;
`BOUND` states that change. Benign inputs keep |log-odds| below 13, where the clamp does not act and
a larger eps would.

Example 2 (`softmax(scores).logit()`, fixed to `.logit(eps=1e-6)`) is reproduced too: a class whose
probability rounds to 1 (+Inf) or to 0 (-Inf)."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning
from torchnumlint.runtime_check.repros.log_domain.log_of_sigmoid import log_sigmoid
from torchnumlint.runtime_check.repros.log_domain.log_of_softmax import log_probabilities
from torchnumlint.runtime_check.repros.log_domain.logsumexp_manual import log_sum_exp

# sigmoid(z) == 1 from z = 16.64 and == 0 below z = -88.72 in float32 (measured, torch 2.13 CPU)
SIGMOID_ONE, SIGMOID_ZERO = 16.64, -88.72


def log_odds(z: torch.Tensor) -> torch.Tensor:
    """ln p - ln(1 - p) of p = sigmoid(z): ln sigmoid(z) - ln sigmoid(-z) (= z)."""
    return log_sigmoid(z) - log_sigmoid(-z)


def class_log_odds(scores: torch.Tensor) -> torch.Tensor:
    """ln p_i - ln(1 - p_i) of p = softmax(scores) over the last dimension, where
    1 - p_i = sum_{j != i} e^(x_j) / sum_j e^(x_j): ln(1 - p_i) is the log-sum-exp of the other
    scores less that of all."""
    n = scores.shape[-1]
    others = scores.unsqueeze(-2).expand(*scores.shape, n).masked_fill(torch.eye(n, dtype=torch.bool), float("-inf"))
    log_not_p = log_sum_exp(others, -1) - log_sum_exp(scores, -1, keepdim=True)
    return log_probabilities(scores) - log_not_p


def adversarial(ctx: ReproContext) -> Inputs:
    z = torch.cat([torch.linspace(-6.0, 6.0, 13), torch.tensor([SIGMOID_ONE + 0.5, 40.0, SIGMOID_ZERO - 1.0])])
    return put(ctx, z=z)


def benign_z(ctx: ReproContext) -> Inputs:
    """z of magnitude 1e-3 to 13, either sign: p from 2.3e-6 to 1 - 2.3e-6, inside the clamp."""
    return put(ctx, z=spanning((64,), 1e-3, 13.0, 1112))


def saturated_classes(ctx: ReproContext) -> Inputs:
    """4 x 10 scores, randn; row 0's score 0 raised by 30 (its p rounds to 1), row 1's lowered by
    120 (its p underflows to 0)."""
    scores = torch.randn(4, 10, generator=gen(1113))
    scores[0, 0] += 30.0
    scores[1, 0] -= 120.0
    return put(ctx, scores=scores)


def benign_classes(ctx: ReproContext) -> Inputs:
    """Scores of magnitude 1e-3 to 4, either sign, plus row 0's score 0 raised by 8: class log-odds
    from -8.2 to 4.9 (p from 2.7e-4 to 0.993), inside the clamp."""
    scores = spanning((4, 10), 1e-3, 4.0, 1114)
    scores[0, 0] += 8.0
    return put(ctx, scores=scores)


CLAMP = (
    "torch.logit(p, eps=1e-6) clamps p into [1e-6, 1 - 1e-6]: a clamped entry's log-odds become +-13.8 "
    "(off by |reference| - 13.8) and its gradient path is cut"
)
BOUND = Bound(CLAMP + " (off by all of its gradient), so |fix - reference| <= |reference|", rel=1.0)
# Through a softmax the cut path of a clamped p_i moved every score of its row by w_i d logit_i / d x_k,
# |d logit_i / d x_k| <= 1, w the upstream gradient: measured in float64 at most 2.54 here (row 0,
# where p_0 rounds to 1 and so all ten p are clamped and the row gets no gradient at all).
SOFTMAX_BOUND = Bound(CLAMP + " through the softmax: |fix - reference| <= |reference| + 2.6", abs=2.6, rel=1.0)

REPRO = Repro(
    "TNL112",
    "NF",
    "log_odds",
    FP32,
    adversarial=adversarial,
    benign=benign_z,
    grad=("z",),
    reference=log_odds,
    bound=BOUND,
    shapes=lifted(benign_z) + rescaled(benign_z, 1e-3),
    thresholds={
        "float32": f"z in -6..6 plus {SIGMOID_ONE + 0.5:g}, 40, {SIGMOID_ZERO - 1.0:g} (sigmoid(z) is 1 "
        f"from z = {SIGMOID_ONE:g}, 0 below {SIGMOID_ZERO:g})"
    },
)

FURTHER = (
    Repro(
        "TNL112",
        "NF",
        "class_odds",
        FP32,
        example=1,
        adversarial=saturated_classes,
        benign=benign_classes,
        grad=("scores",),
        reference=class_log_odds,
        bound=SOFTMAX_BOUND,
        shapes=lifted(benign_classes),
        thresholds={"float32": "4 x 10 scores, randn; row 0's score 0 + 30 (p rounds to 1), row 1's - 120 (p is 0)"},
    ),
)
