"""TNL212 std-of-size-one: standardising a batch by its std over dim 0 is NaN for a batch of one
sample (N - 1 = 0); with `correction=0` the std is 0 there and the eps keeps the quotient finite.

float32 only: the hazard is the estimator's N - 1, in every dtype.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put

EPS = 1e-5  # the example's
# `correction=0` is the population std: for a batch of one it is 0, the mathematics' own value for
# a single sample's spread (the reference), so the bound there is 0 up to float32 rounding.
POPULATION = Bound(
    "for one sample the population std is 0, the reference's spread of a single value; x - mean is 0 there, so both are 0", abs=1e-6
)


def standardized(x: torch.Tensor) -> torch.Tensor:
    """(x - mean) / (s + eps) per column, s the spread of the batch: the unbiased std for N > 1,
    and 0 for a single sample (nothing to spread; the N - 1 estimator is undefined there)."""
    n = x.shape[0]
    centred = x - x.sum(0) / n
    s = torch.sqrt((centred * centred).sum(0) / (n - 1)) if n > 1 else torch.zeros_like(x[0])
    return centred / (s + EPS)


def one_sample(ctx: ReproContext) -> Inputs:
    """x: a batch of 1 sample x 8 features, randn."""
    return put(ctx, x=torch.randn(1, 8, generator=gen(2121)))


REPRO = Repro(
    "TNL212",
    "NF",
    "standardize_batch",
    FP32,
    adversarial=one_sample,
    grad=("x",),
    reference=standardized,
    bound=POPULATION,
    thresholds={"*": "a batch of one sample (1 x 8): std over dim 0 divides by N - 1 = 0"},
    note="no benign inputs: for N > 1 the fix's population std differs from the unbiased one by "
    "design (sqrt((N - 1) / N)), which is why the fix is unsafe",
)
