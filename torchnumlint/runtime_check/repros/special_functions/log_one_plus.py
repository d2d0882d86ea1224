"""TNL106 log-one-plus: `log(1 + x)` rounds `1 + x` first and is 0 for small x; `log1p(x)` is
right against a float64 reference.

Example 2 (`log(hazard + 1) + log(1 - dropout)`, the method form and the `1 - x` form) is
reproduced too: both of its terms are 0 below the rounding threshold."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import ROUNDS_TO_ONE, below_rounding, lifted, put, rescaled, spanning


def log_one_plus(x: torch.Tensor) -> torch.Tensor:
    """ln(1 + x) for x > -1 by the identity ln(1 + x) = 2 atanh(x / (2 + x)): no `1 + x` is rounded,
    so it keeps full float64 precision for |x| down to the smallest inputs (its derivative is
    4 / ((2 + x)^2 - x^2) = 1 / (1 + x))."""
    return 2 * torch.atanh(x / (2 + x))


def survival_log(hazard: torch.Tensor, dropout: torch.Tensor) -> torch.Tensor:
    """ln(1 + hazard) + ln(1 - dropout): the log-probability of surviving both."""
    return log_one_plus(hazard) + log_one_plus(-dropout)


def benign_rate(ctx: ReproContext) -> Inputs:
    """Rates of magnitude 1e-3 to 0.9, either sign: an eps or a clamp in the fix changes them."""
    return put(ctx, rate=spanning((64,), 1e-3, 0.9, 1061))


def small_survival(ctx: ReproContext) -> Inputs:
    """Hazards and dropouts below the rounding threshold, in opposite orders."""
    small = below_rounding("hazard")(ctx)["hazard"]
    assert isinstance(small, torch.Tensor)
    return {"hazard": small, "dropout": small.flip(0)}


def benign_survival(ctx: ReproContext) -> Inputs:
    """Hazards and dropouts of magnitude 1e-3 to 0.9, either sign."""
    return put(ctx, hazard=spanning((64,), 1e-3, 0.9, 1062), dropout=spanning((64,), 1e-3, 0.9, 1063))


REPRO = Repro(
    "TNL106",
    "WV",
    "log_growth",
    PRECISION,
    adversarial=below_rounding("rate"),
    benign=benign_rate,
    grad=("rate",),
    reference=log_one_plus,
    shapes=lifted(benign_rate) + rescaled(benign_rate, 1e-3),
    thresholds={
        d: f"rate from {v * 1e-3:.1e} to {v * 0.99:.1e} (1 + rate rounds to 1 below {v:g} in {d})" for d, v in ROUNDS_TO_ONE.items()
    },
)

FURTHER = (
    Repro(
        "TNL106",
        "WV",
        "survival",
        PRECISION,
        example=1,
        adversarial=small_survival,
        benign=benign_survival,
        grad=("hazard", "dropout"),
        reference=survival_log,
        shapes=lifted(benign_survival) + rescaled(benign_survival, 1e-3),
        thresholds={
            d: f"hazard and dropout from {v * 1e-3:.1e} to {v * 0.99:.1e} (1 +- x rounds to 1 below {v:g} in {d})"
            for d, v in ROUNDS_TO_ONE.items()
        },
    ),
)
