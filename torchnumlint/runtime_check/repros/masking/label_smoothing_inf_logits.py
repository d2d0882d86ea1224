"""TNL402 label-smoothing-inf-logits: cross entropy with label_smoothing=0.1 on logits with some
classes filled with -inf is inf (smoothing reads -log p of every class). The rule is a GUIDE: its
first good snippet, smoothing over the valid classes only, is run as the fix and judged against
label-smoothed cross entropy by its definition in float64: the target distribution
q = 0.9 onehot(y) + 0.1 uniform over the row's valid classes, the loss -sum_j q_j ln p_j with p the
softmax over the valid classes, averaged over the rows. Where no class is masked (the benign
inputs) that is F.cross_entropy's label smoothing.

Example 2 (`ActionHead.forward`) is not reproduced: it is a method of an nn.Module, and the rule
offers no fix for it."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put, spanning

SMOOTHING = 0.1  # the example's label_smoothing
CLASSES = 10
# Invalid classes per row in the adversarial inputs: rows of 0, 1, 3 and 6, so a smoothing that
# divides by the number of classes, or by another row's count, is wrong.
INVALID = (0, 1, 3, 6)

EXACT = Bound(
    "the good snippet leaves the invalid classes out of the log-softmax and of the smoothing: no change to the mathematics anywhere",
    abs=0.0,
    rel=0.0,
)


def smoothed_cross_entropy(logits: torch.Tensor, invalid: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """mean_i -sum_j q_ij ln p_ij: p_i the softmax of row i over its valid classes (ln p_ij =
    x_ij - ln sum_(k valid) e^(x_ik), shifted by the row's largest valid logit), q_i the smoothed
    target (1 - SMOOTHING) [j = y_i] + SMOOTHING [j valid] / #valid. An invalid class has q = 0 and
    no logit of it reaches the loss."""
    valid = ~invalid
    x = torch.where(valid, logits, 0.0)
    top = torch.where(valid, x, float("-inf")).amax(-1, keepdim=True).detach()
    log_z = top + torch.log((valid * torch.exp(x - top)).sum(-1, keepdim=True))
    onehot = torch.nn.functional.one_hot(target, logits.shape[-1]).to(logits.dtype)
    share = valid.to(logits.dtype) / valid.sum(-1, keepdim=True)  # a bool times a float would be float32
    q = (1 - SMOOTHING) * onehot + SMOOTHING * share
    return -(q * (x - log_z)).sum(-1).mean()


def adversarial(ctx: ReproContext) -> Inputs:
    """4 x 10 logits, randn x 2; row i's last INVALID[i] classes invalid, its target a valid one."""
    invalid = torch.arange(CLASSES)[None, :] >= CLASSES - torch.tensor(INVALID)[:, None]
    target = (torch.rand(4, generator=gen(403)) * (CLASSES - torch.tensor(INVALID))).long()
    return put(ctx, logits=torch.randn(4, CLASSES, generator=gen(402)) * 2.0, invalid=invalid, target=target)


def benign(ctx: ReproContext) -> Inputs:
    """No invalid class (the original is finite only then); logits of magnitude 1e-3 to 30 (either
    sign), each even row's target its largest logit, each odd row's its smallest: the targets'
    probabilities from 9.5e-10 to 0.99971 (measured), where a clamp or an eps of the probabilities
    changes the loss."""
    logits = spanning((4, CLASSES), 1e-3, 30.0, 4022)
    target = torch.where(torch.arange(4) % 2 == 0, logits.argmax(1), logits.argmin(1))
    return put(ctx, logits=logits, invalid=torch.zeros(4, CLASSES, dtype=torch.bool), target=target)


REPRO = Repro(
    "TNL402",
    "NF",
    "masked_ce",
    PRECISION,
    adversarial=adversarial,
    benign=benign,
    grad=("logits",),
    reference=smoothed_cross_entropy,
    bound=EXACT,
    thresholds={
        "*": f"4 x {CLASSES} logits, {', '.join(map(str, INVALID))} classes of the rows filled with -inf, label_smoothing={SMOOTHING:g}"
    },
    fixed_from="good",
)
