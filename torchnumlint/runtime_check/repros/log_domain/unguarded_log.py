"""TNL207 unguarded-log: the log prior of class frequencies counted from a batch is -inf for a
class the batch lacks; clamped at 1e-12 it is log(1e-12) = -27.6 there and unchanged elsewhere.

Example 2 (the entropy -sum p log p of a codebook's usage, p = relu(assign).sum(0) normalised:
a code no row uses has p = 0 and 0 * log 0 = NaN; `torch.special.xlogy(p, p)` is 0 there) is
reproduced too. Example 3 (Gumbel noise from `torch.rand_like`) is not: its zero is a draw of
probability 2^-24 per entry, which no input makes happen.

float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16.

Example 1 runs at its own shape only: `bincount` counts 1-D labels (a batch of them is flattened
before counting), and integer labels have no scale; its benign labels already span class
frequencies 1e-4 .. 0.51. Example 2 runs further at 3-D and 4-D (leading batch dims: usage sums
dim 0, not the last) and with the assignments times 1e-3 and 1e3 (p is scale-free).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning

CLASSES = 10  # the example's minlength
# Example 1: with at most 10^4 labels every non-zero frequency is >= 1e-4, far above 1e-12: the
# clamp acts only on the frequency 0 of an absent class, whose log is -inf (not compared).
# The example's `.float()` computes the frequencies in float32 whatever its input, so even its float64
# run carries their rounding: |log(p (1 + d))| - log p| <= 2 * 2^-24 for the count and the quotient
# (measured 5.2e-8 on these inputs).
ABSENT_ONLY = Bound(
    "clamp_min(1e-12) acts only on the frequency 0 of an absent class, whose log is -inf "
    "(not compared); every other frequency is >= 1e-4 and unchanged, up to the float32 "
    "rounding of the example's `.float()` counts (2^-23 in the log)",
    abs=2.0**-23,
)


def log_frequencies(labels: torch.Tensor) -> torch.Tensor:
    """log(n_c / N) for each of the 10 classes, n_c counted one class at a time: -inf for n_c = 0."""
    counts = torch.stack([(labels == c).sum() for c in range(CLASSES)]).to(torch.float64)
    return torch.log(counts / labels.numel())


def usage_entropy(assign: torch.Tensor) -> torch.Tensor:
    """H = -sum_c p_c log p_c over the codes c with p_c > 0 (0 log 0 = 0, the limit), where p is
    the column sums of max(assign, 0) divided by their total."""
    usage = torch.where(assign > 0, assign, torch.zeros_like(assign)).sum(0)
    p = usage / usage.sum()
    used = p[p > 0]
    return -(used * torch.log(used)).sum()


def missing_classes(ctx: ReproContext) -> Inputs:
    """64 labels drawn from classes 0..9 except 3 and 7 (their frequencies are 0)."""
    pool = torch.tensor([0, 1, 2, 4, 5, 6, 8, 9])
    return put(ctx, labels=pool[torch.randint(0, 8, (64,), generator=gen(2071))])


def every_class(ctx: ReproContext) -> Inputs:
    """9,999 labels, class c repeated 1 + 2^c times (and the rest class 0): frequencies from
    1e-4 to 0.51, where a wrong clamp or eps would move them."""
    counts = [1 + 2**c for c in range(CLASSES)]
    counts[0] += 9999 - sum(counts)
    labels = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    return put(ctx, labels=labels[torch.randperm(labels.numel(), generator=gen(2072))])


def unused_code(ctx: ReproContext) -> Inputs:
    """assign: 6 rows x 8 codes, randn; code 2's column all negative (its usage is 0)."""
    assign = torch.randn(6, 8, generator=gen(2073))
    assign[:, 2] = -assign[:, 2].abs() - 0.1
    return put(ctx, assign=assign)


def spread_usage(ctx: ReproContext) -> Inputs:
    """assign: 6 x 8, positive entries of magnitude 1e-4 .. 1e2: usages from tiny to large."""
    return put(ctx, assign=spanning((6, 8), 1e-4, 1e2, 2074, signed=False))


REPRO = Repro(
    "TNL207",
    "NF",
    "class_log_prior",
    FP32,
    adversarial=missing_classes,
    benign=every_class,
    reference=log_frequencies,
    bound=ABSENT_ONLY,
    thresholds={
        "*": "64 labels of 10 classes, classes 3 and 7 absent (frequency 0: log = -inf); benign: 9,999 "
        "labels, class frequencies 1e-4 .. 0.51"
    },
)

FURTHER = (
    Repro(
        "TNL207",
        "NF",
        "code_usage_entropy",
        FP32,
        example=1,
        adversarial=unused_code,
        benign=spread_usage,
        reference=usage_entropy,
        shapes=lifted(spread_usage) + rescaled(spread_usage, 1e-3, 1e3),
        thresholds={
            "*": "6 x 8 assignments, code 2's column all negative (usage 0: 0 * log 0 = NaN); benign: positive entries 1e-4 .. 1e2"
        },
    ),
)
