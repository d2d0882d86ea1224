"""TNL201 unguarded-division: standardising relu features by a row's std is 0/0 = NaN on a row
the relu makes constant (all 0: a dead unit's row).

Example 2 (a masked mean, divided by the count of its validity flags) and example 3 (a loss divided
by the count of positive labels) are reproduced too: a row with no valid entry, a batch with no
positive.
Example 4 (`Scaled.forward`, a method of an nn.Module: a norm, a column's std and a row's absolute
sum as divisors) is reproduced on an instance of `Scaled`: a constant column of `a` (std 0).

float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory).
"""

from __future__ import annotations

from typing import Tuple

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, rows_spanning, spanning

# clamp_min(1e-12) (examples 1, 2) acts only on a divisor below 1e-12: on these inputs only the
# zero one (a constant row's std, an empty row's count), whose numerator is exactly 0, so the fix's
# forward there is 0 / 1e-12 = 0, the reference's value; every other divisor is >= 0.68 (std) or
# 1 (count) and unchanged. Measured: the fix equals the reference to 1e-9 in float64 everywhere
# the reference is defined.
UNCHANGED = Bound(
    "clamp_min(1e-12) raises only the zero divisors (numerator exactly 0: the quotient stays 0); "
    "every other divisor here is >= 0.68 and unchanged",
    abs=0.0,
    rel=0.0,
)


CONSTANT_ROW = (
    "a constant row has no spread (0/0): its standard scores are taken as 0 (a StandardScaler's "
    "convention) and their derivative, which does not exist there, is not compared"
)


def standard_scores(x: torch.Tensor) -> torch.Tensor:
    """z = (x - mean) / s with s the sample standard deviation (n - 1), by its definition (two-pass
    sum of squared deviations). A constant row has no deviation: its every z is 0 (the
    convention of a StandardScaler: nothing to rescale); its derivative there does not exist (along
    x + t v, z jumps from -z(v) to z(v) at t = 0), and the 0/0 of the backward says so: NaN, not
    compared."""
    dev = x - x.sum(-1, keepdim=True) / x.shape[-1]
    s = torch.sqrt((dev * dev).sum(-1, keepdim=True) / (x.shape[-1] - 1))
    return torch.where(s > 0, dev / s, torch.zeros_like(dev))


def scaled_scores(x: torch.Tensor, w: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """x / ||w||_2 times the standard scores of `a` along dim 0 (`standard_scores`' convention at a
    constant column: 0), over each row's sum of |w| (w's last dim)."""
    z = standard_scores(a.transpose(0, -1)).transpose(0, -1)
    return x / torch.sqrt((w * w).sum()) * z / w.abs().sum(-1, keepdim=True)


def scaled_inputs(constant_column: bool, seed: int, shape: Tuple[int, ...] = (4, 6)) -> Builder:
    """x, w, a: 4 x 6 (or `shape`: dim 0 is the one `a` is standardised along) of magnitude 1e-3 ..
    1e3 (either sign; |w| row sums >= 0.1); `constant_column`: a's column 2 all 3.0 (its std is 0:
    0/0 = NaN)."""

    def build(ctx: ReproContext) -> Inputs:
        x, w, a = (spanning(shape, 1e-3, 1e3, seed + i) for i in range(3))
        w[..., 0] = w[..., 0].sign() * (w[..., 0].abs() + 0.1)
        if constant_column:
            a[..., 2] = 3.0
        return put(ctx, x=x, w=w, a=a)

    return build


def masked_positions(ctx: ReproContext) -> Inputs:
    """h: 4 x 8 x 3 (the reduced dim 1 not last), magnitudes 1e-3 .. 1e3; mask 4 x 8 x 1: sample i
    selects its first 2i + 1 positions (counts 1 .. 7)."""
    mask = (torch.arange(8)[None, :] <= 2 * torch.arange(4)[:, None])[..., None]
    return put(ctx, h=spanning((4, 8, 3), 1e-3, 1e3, 2016), mask=mask)


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


def relu_standard_scores(h: torch.Tensor) -> torch.Tensor:
    """`standard_scores` of relu(h), relu written by its definition (max(h, 0))."""
    return standard_scores(torch.where(h > 0, h, torch.zeros_like(h)))


def dead_row(ctx: ReproContext) -> Inputs:
    """4 x 16 randn, row 1 all negative: relu makes it all 0 (std 0: 0/0 = NaN)."""
    h = torch.randn(4, 16, generator=gen(201))
    h[1] = -h[1].abs() - 0.5
    return put(ctx, h=h)


def standardize_benign(ctx: ReproContext) -> Inputs:
    """8 rows whose stds span 1e-3 .. 1e3: a clamp or eps of the divisor above 1e-3 changes them."""
    return put(ctx, h=rows_spanning(8, 16, 1e-3, 1e3, 2011))


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
    "TNL201",
    "NF",
    "standardize",
    FP32,
    adversarial=dead_row,
    benign=standardize_benign,
    grad=("h",),
    reference=relu_standard_scores,
    bound=UNCHANGED,
    convention=CONSTANT_ROW,
    shapes=lifted(standardize_benign) + rescaled(standardize_benign, 1e-3, 1e3),
    thresholds={"*": "4 x 16 randn, row 1 all negative: all 0 after relu (std 0: 0/0 = NaN)"},
)

FURTHER = (
    Repro(
        "TNL201",
        "NF",
        "masked_mean",
        FP32,
        example=1,
        adversarial=masked_rows(True, 2012),
        benign=masked_rows(False, 2013),
        grad=("h",),
        reference=masked_average,
        bound=UNCHANGED,
        convention="a row with nothing selected (0/0) pools to 0, the empty sum, and gets no gradient",
        shapes=(("3-D, the reduced dim 1 not last", masked_positions),) + rescaled(masked_rows(False, 2013), 1e-3, 1e3),
        thresholds={"*": "h 8 x 16, mask row i selects i + 1 entries, row 1 none (count 0: 0/0 = NaN)"},
    ),
    Repro(
        "TNL201",
        "NF",
        "positive_loss",
        FP32,
        example=2,
        adversarial=labelled_losses(True, 2014),
        benign=labelled_losses(False, 2015),
        grad=("losses",),
        reference=per_positive_loss,
        convention="a batch with no positive (0/0) keeps its summed loss (0 where background samples carry none)",
        shapes=lifted(labelled_losses(False, 2015)) + rescaled(labelled_losses(False, 2015), 1e-3, 1e3),
        thresholds={"*": "64 sample losses, every label background (0 positives: 0/0 = NaN)"},
    ),
    Repro(
        "TNL201",
        "NF",
        "Scaled.forward",
        FP32,
        example=3,
        adversarial=scaled_inputs(True, 2017),
        benign=scaled_inputs(False, 2020),
        grad=("x", "w", "a"),
        reference=scaled_scores,
        bound=UNCHANGED,
        convention=CONSTANT_ROW.replace("row", "column"),
        shapes=(("3-D", scaled_inputs(False, 2023, (4, 3, 6))), ("4-D", scaled_inputs(False, 2026, (4, 2, 3, 6))))
        + rescaled(scaled_inputs(False, 2020), 1e-3),
        thresholds={"*": "Scaled(): x, w, a 4 x 6 of magnitudes 1e-3..1e3; a's column 2 constant (std 0: 0/0 = NaN)"},
    ),
)
