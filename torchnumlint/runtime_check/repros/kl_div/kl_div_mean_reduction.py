"""TNL114 kl-div-mean-reduction: `F.kl_div` with its default `reduction="mean"` divides the
summed KL by batch x classes; the mathematics is the KL per sample, sum_i p_i (ln p_i - ln q_i)
averaged over the batch, in float64. Measured with torch 2.13 on the CPU: the original is exactly
1/classes of it (1/10 here), in the loss and in the gradients. The fix changes the values
everywhere, so it has no guarded region and no bound: it must equal the mathematics to the dtype's
precision on every input.

Example 3 (`reduction='mean'` spelled out, the teacher's probabilities first) is reproduced too,
and example 2 (`Distiller.forward`, a method of an nn.Module) on an instance whose student is
`nn.Identity()`: the student's logits are then the input `x` itself, and its class dim is 1."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import lifted, put, spanning
from torchnumlint.runtime_check.repros.kl_div.kl_div_prob_input import logits_and_target
from torchnumlint.runtime_check.repros.kl_div.kl_div_prob_target import batch_mean, kl_divergence, kl_of_softmaxes
from torchnumlint.runtime_check.repros.log_domain.log_of_softmax import log_probabilities

BATCH, CLASSES = 8, 10  # the shape of logits_and_target


def kl_per_sample(student_logits: torch.Tensor, teacher_probs: torch.Tensor) -> torch.Tensor:
    """KL(teacher || softmax(student)) over the last dimension, "batchmean" (summed, over the size
    of dim 0)."""
    return batch_mean(kl_divergence(teacher_probs, log_probabilities(student_logits)))


def consistency_kl(p_clean: torch.Tensor, logits_aug: torch.Tensor) -> torch.Tensor:
    """KL(p_clean || softmax(logits_aug)) over the last dimension, "batchmean"."""
    return kl_per_sample(logits_aug, p_clean)


DISTILLER_T = 4.0  # example 2's default temperature


def distiller_kl(x: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """T^2 KL(softmax(teacher / T) || softmax(x / T)) over the class dim 1, "batchmean": the
    distillation loss of Hinton et al. (x: the logits of the identity student)."""
    return batch_mean(kl_of_softmaxes(teacher_logits / DISTILLER_T, x / DISTILLER_T, 1)) * DISTILLER_T**2


def logits_pair(shape, seed: int) -> Builder:
    """The student's input (logits, through `nn.Identity`) and the teacher's logits, magnitudes
    1e-3 to 30, either sign (over T = 4: probabilities from about 1e-6 to nearly 1)."""

    def build(ctx: ReproContext) -> Inputs:
        return put(ctx, x=spanning(shape, 1e-3, 30.0, seed), teacher_logits=spanning(shape, 1e-3, 30.0, seed + 1))

    return build


def student_and_teacher(seed: int, low: float, high: float) -> Builder:
    """TNL102's logits and target distribution, as the student's logits and the teacher's
    probabilities."""

    def build(ctx: ReproContext) -> Inputs:
        student_logits, teacher_probs = logits_and_target(seed, low, high)
        return put(ctx, student_logits=student_logits, teacher_probs=teacher_probs)

    return build


def swapped(build: Builder) -> Builder:
    """Example 3's argument order: the teacher's probabilities first."""

    def swap(ctx: ReproContext) -> Inputs:
        inputs = build(ctx)
        return {"p_clean": inputs["teacher_probs"], "logits_aug": inputs["student_logits"]}

    return swap


# Any number of classes above 1 scales the loss by 1/classes; 10 makes the original 90 % off on
# every input. Magnitudes 1e-3 to 3 (adversarial) and 1e-3 to 10 (benign: probabilities from 8.9e-8
# to 0.9989 predicted, 1.1e-6 to 0.995 for the teacher, measured), where a clamp or an eps of either
# would change the values.
ADVERSARIAL = student_and_teacher(114, 1e-3, 3.0)
BENIGN = student_and_teacher(1021, 1e-3, 10.0)
THRESHOLD = (
    f"{BATCH} x {CLASSES} logits against a softmax target: 'mean' divides by {BATCH * CLASSES}, the "
    f"KL per sample by {BATCH}; reference: the KL per sample in float64"
)

REPRO = Repro(
    "TNL114",
    "WV",
    "distill_loss",
    FP32,
    adversarial=ADVERSARIAL,
    benign=BENIGN,
    grad=("student_logits", "teacher_probs"),
    reference=kl_per_sample,
    shapes=lifted(BENIGN),
    thresholds={"*": THRESHOLD},
)

FURTHER = (
    Repro(
        "TNL114",
        "WV",
        "consistency",
        FP32,
        example=2,
        adversarial=swapped(ADVERSARIAL),
        benign=swapped(BENIGN),
        grad=("p_clean", "logits_aug"),
        reference=consistency_kl,
        thresholds={"*": THRESHOLD},
        shapes=lifted(swapped(BENIGN)),
    ),
    Repro(
        "TNL114",
        "WV",
        "Distiller.forward",
        FP32,
        example=1,
        instance=lambda cls: cls(torch.nn.Identity()),
        adversarial=logits_pair((BATCH, CLASSES), 1141),
        benign=logits_pair((BATCH, CLASSES), 1143),
        grad=("x", "teacher_logits"),
        reference=distiller_kl,
        shapes=(("3-D, the class dim 1 not last", logits_pair((BATCH, CLASSES, 3), 1145)),),
        thresholds={
            "*": f"Distiller(nn.Identity()), T = {DISTILLER_T:g}: {BATCH} x {CLASSES} logits x and teacher "
            f"logits (magnitudes 1e-3..30); 'mean' divides by {BATCH * CLASSES}, the KL per sample by "
            f"{BATCH}; reference: T^2 times the KL per sample in float64"
        },
    ),
)
