"""TNL114 kl-div-mean-reduction: `F.kl_div` with its default `reduction="mean"` divides the
summed KL by batch x classes; the reference is the KL per sample (the rule's first good snippet,
`sum(p * (log p - log q), -1).mean()`) in float64. Measured with torch 2.13 on the CPU: the
original is exactly 1/classes of it (1/10 here), in the loss and in the gradient."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put

BATCH, CLASSES = 8, 10


def _student_and_teacher(seed: int, classes: int, scale: float) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        g = gen(seed)
        student_logits = torch.randn(BATCH, classes, generator=g) * scale
        teacher_probs = torch.softmax(torch.randn(BATCH, classes, generator=g) * scale, -1)
        return put(ctx, student_logits=student_logits, teacher_probs=teacher_probs)

    return build


REPRO = Repro(
    "TNL114", "WV", "distill_loss", FP32,
    # any number of classes above 1 scales the loss by 1/classes; 10 makes the original 90 % off
    adversarial=_student_and_teacher(114, CLASSES, 2.0),
    # one class: "mean" and "batchmean" divide by the same count (a degenerate distribution)
    benign=_student_and_teacher(1141, 1, 1.0),
    grad=("student_logits",),
    thresholds={"*": f"{BATCH} x {CLASSES} logits (randn x 2) against a softmax target: 'mean' divides by "
                     f"{BATCH * CLASSES}, the KL per sample by {BATCH}; reference: the KL per sample in float64"},
)
