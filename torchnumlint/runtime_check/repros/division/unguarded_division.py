"""TNL201 unguarded-division: standardising by a row's std is 0/0 = NaN on a constant row.

Example 2 (a masked mean, divided by the count of its validity flags) and example 3 (a loss divided
by the count of positive labels) are reproduced too: a row with no valid entry, a batch with no
positive.
Example 4 (`Scaled.forward`) is not: it is a method of an nn.Module, and a reproduction runs a
function the example defines.

float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import constant_row, gen, put, rows_spanning

# clamp_min(1e-12) (examples 1, 2) acts only on a divisor below 1e-12: on these inputs only the
# zero one (a constant row's std, an empty row's count), whose numerator is exactly 0, so the fix's
# forward there is 0 / 1e-12 = 0, the reference's value; every other divisor is >= 0.68 (std) or
# 1 (count) and unchanged. Measured: the fix equals the reference to 1e-9 in float64 everywhere
# the reference is defined.
UNCHANGED = Bound("clamp_min(1e-12) raises only the zero divisors (numerator exactly 0: the quotient stays 0); "
                  "every other divisor here is >= 0.68 and unchanged", abs=0.0, rel=0.0)


def standard_scores(x: torch.Tensor) -> torch.Tensor:
    """z = (x - mean) / s with s the sample standard deviation (n - 1), by its definition (two-pass
    sum of squared deviations). A constant row has no deviation: its every z is 0 (the
    convention of a StandardScaler: nothing to rescale); its derivative there does not exist (along
    x + t v, z jumps from -z(v) to z(v) at t = 0), and the 0/0 of the backward says so: NaN, not
    compared."""
    dev = x - x.sum(-1, keepdim=True) / x.shape[-1]
    s = torch.sqrt((dev * dev).sum(-1, keepdim=True) / (x.shape[-1] - 1))
    return torch.where(s > 0, dev / s, torch.zeros_like(dev))


def masked_average(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum_j h_ij m_ij / sum_j m_ij, the mean of each row's selected entries; a row with none
    selected pools to 0 (the empty sum; the convention of masked pooling), and no h reaches it, so
    its gradient is 0."""
    m = mask.to(h.dtype)
    count = m.sum(1, keepdim=True)
    some = count > 0
    return torch.where(some, (h * m).sum(1, keepdim=True) / torch.where(some, count, torch.ones_like(count)), 0.0)


def per_positive_loss(losses: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The batch's summed loss per positive label (labels > 0); a batch with no positive has
    nothing to average over: its loss is its sum as it stands (0 where background samples carry
    no loss) and so is its gradient."""
    counted = int((labels > 0).sum())
    total = losses.sum()
    return total / counted if counted else total


def standardize_benign(ctx: ReproContext) -> Inputs:
    """8 rows whose stds span 1e-3 .. 1e3: a clamp or eps of the divisor above 1e-3 changes them."""
    return put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2011))


def masked_rows(empty: bool, seed: int) -> Builder:
    """h: 8 x 16 entries of magnitude 1e-3 .. 1e3 (rows_spanning); mask: row i selects its first
    i + 1 entries (counts 1 .. 8: a clamp of the count above 1 changes them), or, `empty`, row 1
    selects none (count 0: 0/0 = NaN)."""

    def build(ctx: ReproContext) -> Inputs:
        mask = torch.arange(16)[None, :] <= torch.arange(8)[:, None]
        if empty:
            mask[1] = False
        return put(ctx, h=rows_spanning(8, 16, 1e-3, 1e3, seed), mask=mask)

    return build


def labelled_losses(no_positive: bool, seed: int) -> Builder:
    """64 per-sample losses (0 for background, label 0), labels 0 or a class 1..9; `no_positive`:
    every label background (0 positives: 0/0 = NaN), else 5 positives (a count clamped above 5
    changes it)."""

    def build(ctx: ReproContext) -> Inputs:
        g = gen(seed)
        labels = torch.randint(1, 10, (64,), generator=g)
        labels[5:] = 0
        if no_positive:
            labels[:5] = 0
        losses = torch.rand(64, generator=g) * 5 * (labels > 0)
        return put(ctx, losses=losses, labels=labels)

    return build


REPRO = Repro(
    "TNL201", "NF", "standardize", FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(201, 3.0)), benign=standardize_benign, grad=("x",),
    reference=standard_scores, bound=UNCHANGED,
    thresholds={"*": "4 x 16, row 1 constant (std 0: 0/0 = NaN), other rows randn"},
)

FURTHER = (
    Repro(
        "TNL201", "NF", "masked_mean", FP32, example=1,
        adversarial=masked_rows(True, 2012), benign=masked_rows(False, 2013), grad=("h",),
        reference=masked_average, bound=UNCHANGED,
        thresholds={"*": "h 8 x 16, mask row i selects i + 1 entries, row 1 none (count 0: 0/0 = NaN)"},
    ),
    Repro(
        "TNL201", "NF", "positive_loss", FP32, example=2,
        adversarial=labelled_losses(True, 2014), benign=labelled_losses(False, 2015), grad=("losses",),
        reference=per_positive_loss,
        thresholds={"*": "64 sample losses, every label background (0 positives: 0/0 = NaN)"},
    ),
)
