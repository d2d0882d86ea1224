"""TNL107 exp-minus-one: `(exp(h) - 1) / h` is 0 instead of 1 for small steps h; `expm1(h) / h`
is right against a float64 reference.

Example 2 (`log(exp(y) - 1)`, an inverse softplus) is reproduced as NF: below the rounding
threshold `exp(y) - 1` is exactly 0 and its log -inf, where `log(expm1(y))` is ln y.

Example 1 checks the values only: the gradient of any quotient by h, autograd's
e^h / h - (e^h - 1) / h^2, subtracts two terms of size 1 / h to get ~1/2. The fix's gradient is
that too: against d/dh phi_1 = 1/2 + h/3 + ... it is off by 63.7 (rel 58) in bfloat16 on these
steps, and by 9.5e-7 even in float64 on the float32 steps (the reference's by 2.3e-9; measured,
torch 2.13 CPU): a hazard of the division by h, not of `exp(h) - 1`."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import ROUNDS_TO_ONE, below_rounding, lifted, put, rescaled, spanning


def exp_minus_one(x: torch.Tensor) -> torch.Tensor:
    """e^x - 1 by the identity e^x - 1 = 2 e^(x/2) sinh(x/2): no difference of nearly equal numbers
    is taken, so it keeps full float64 precision down to the smallest x."""
    return 2 * torch.exp(x / 2) * torch.sinh(x / 2)


def phi_one(h: torch.Tensor) -> torch.Tensor:
    """phi_1(h) = (e^h - 1) / h, the first exponential-integrator function (1 as h -> 0)."""
    return exp_minus_one(h) / h


def inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    """ln(e^y - 1) for y > 0: the x with softplus(x) = y."""
    return torch.log(exp_minus_one(y))


def benign_step(ctx: ReproContext) -> Inputs:
    """Steps of magnitude 1e-3 to 8, either sign: an eps or a clamp in the fix changes them."""
    return put(ctx, h=spanning((64,), 1e-3, 8.0, 1071))


def small_softplus(ctx: ReproContext) -> Inputs:
    """y from 5 % of the rounding threshold to just below it: exp(y) - 1 is 0 there, and the
    gradient of the mathematics, 1 / (1 - e^-y) ~ 1 / y, stays below 2e4, inside float16's range
    (from 1e-3 of the threshold it would be 2e6: Inf in float16 whatever the formula)."""
    return put(ctx, y=torch.logspace(-1.3, 0, 10) * 0.99 * ROUNDS_TO_ONE[ctx.dtype_name])


def benign_softplus(ctx: ReproContext) -> Inputs:
    """y from 10 times the rounding threshold (where exp(y) - 1 is no longer 0) to 8."""
    return put(ctx, y=spanning((64,), 10 * ROUNDS_TO_ONE[ctx.dtype_name], 8.0, 1072, signed=False))


REPRO = Repro(
    "TNL107",
    "WV",
    "phi_1",
    PRECISION,
    adversarial=below_rounding("h"),
    benign=benign_step,
    reference=phi_one,
    shapes=lifted(benign_step) + rescaled(benign_step, 1e-3),
    thresholds={d: f"h from {v * 1e-3:.1e} to {v * 0.99:.1e} (exp(h) rounds to 1 below {v:g} in {d})" for d, v in ROUNDS_TO_ONE.items()},
)

FURTHER = (
    Repro(
        "TNL107",
        "NF",
        "inverse_softplus",
        PRECISION,
        example=1,
        adversarial=small_softplus,
        benign=benign_softplus,
        grad=("y",),
        reference=inverse_softplus,
        shapes=lifted(benign_softplus),
        thresholds={
            d: f"y from {v * 0.05:.1e} to {v * 0.99:.1e} (exp(y) - 1 is 0, its log -inf, below {v:g} in {d})"
            for d, v in ROUNDS_TO_ONE.items()
        },
    ),
)
