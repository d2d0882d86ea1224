"""TNL111 sigmoid-manual: the gradient of `1 / (1 + exp(-x))` is NaN once exp(-x) overflows;
`torch.sigmoid(x)` is finite and gives the same values.

Example 3 (`1.2 / (1 + exp(-(1 / 1.6) * x))`, a scaled and stretched sigmoid) is reproduced too,
its overflow 1.6 times further out, and example 2 (`Gated.forward`: a reciprocal form of
sigmoid(z) and `e / (e + 1)` with e = exp(z), z = h @ w, which is inf / inf = NaN once exp(z)
overflows) on an instance of `Gated`."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning

# exp(-x) is Inf, and the gradient NaN, from x <= -88.723 float32, -89 bfloat16, -11.094 float16
# (measured on torch 2.13, CPU); for example 3 from 1.6 times that: -141.96, -142, -17.75.
EXP_OVERFLOW = {"float32": -88.723, "bfloat16": -89.0, "float16": -11.094}
STRETCH = 1.6  # example 3's x / 1.6


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """1 / (1 + e^-x) by cases: as written for x >= 0, e^x / (1 + e^x) for x < 0, so the selected
    exponential never exceeds 1 (the other branch stays finite in float64 for |x| < 709)."""
    return torch.where(x >= 0, 1 / (1 + torch.exp(-x)), torch.exp(x) / (1 + torch.exp(x)))


def shifted_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """1.2 sigmoid(x / 1.6): a sigmoid stretched 1.6 times along x and scaled to (0, 1.2)."""
    return 1.2 * sigmoid(x / STRETCH)


def gated(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sigmoid(h @ w) * h + sigmoid(h @ w)."""
    z = h @ w
    return sigmoid(z) * h + sigmoid(z)


def overflowing_gate(ctx: ReproContext) -> Inputs:
    """h 4 x 8 randn, w 8 x 8 randn * 0.3 with row 0 the unit vector e_0, so that column 0 of
    h @ w is h[:, 0] plus a few units: h[0, 0] twice past exp's overflow (e / (e + 1) = inf /
    inf), h[1, 0] as far on the other side (exp(-z) overflows: the reciprocal's NaN gradient)."""
    h = torch.randn(4, 8, generator=gen(1112))
    h[0, 0] = -2 * EXP_OVERFLOW[ctx.dtype_name]
    h[1, 0] = 2 * EXP_OVERFLOW[ctx.dtype_name]
    w = 0.3 * torch.randn(8, 8, generator=gen(1113))
    w[0] = 0.0
    w[0, 0] = 1.0
    return put(ctx, h=h, w=w)


def benign_gate(ctx: ReproContext) -> Inputs:
    """h of magnitude 1e-3 to 8, either sign (exp(8) is finite in float16), w randn * 0.3."""
    return put(ctx, h=spanning((4, 8), 1e-3, 8.0, 1114), w=0.3 * torch.randn(8, 8, generator=gen(1115)))


def overflowing(stretch: float) -> Builder:
    """x in -6..6 plus three entries past the overflow of exp(-x / stretch)."""

    def build(ctx: ReproContext) -> Inputs:
        limit = EXP_OVERFLOW[ctx.dtype_name]
        x = torch.cat([torch.linspace(-6.0, 6.0, 13), torch.tensor([limit - 1.0, 2 * limit, -120.0])])
        return put(ctx, x=x * stretch)

    return build


def benign(stretch: float) -> Builder:
    """x / stretch of magnitude 1e-3 to 10, either sign (exp(10) is finite in float16): sigmoids
    from 4.5e-5 to 1 - 4.5e-5, where a clamp of x or of the result changes the values."""

    def build(ctx: ReproContext) -> Inputs:
        return put(ctx, x=spanning((64,), 1e-3, 10.0, 1111) * stretch)

    return build


def thresholds(stretch: float) -> dict:
    return {
        d: f"x in {-6 * stretch:g}..{6 * stretch:g} plus {(v - 1.0) * stretch:g}, {2 * v * stretch:g}, "
        f"{-120 * stretch:g} (exp overflows from x = {v * stretch:g} in {d})"
        for d, v in EXP_OVERFLOW.items()
    }


REPRO = Repro(
    "TNL111",
    "NF",
    "gate",
    PRECISION,
    adversarial=overflowing(1.0),
    benign=benign(1.0),
    grad=("x",),
    reference=sigmoid,
    thresholds=thresholds(1.0),
    shapes=lifted(benign(1.0)) + rescaled(benign(1.0), 1e-3),
)

FURTHER = (
    Repro(
        "TNL111",
        "NF",
        "shifted_sigmoid",
        PRECISION,
        example=2,
        adversarial=overflowing(STRETCH),
        benign=benign(STRETCH),
        grad=("x",),
        reference=shifted_sigmoid,
        thresholds=thresholds(STRETCH),
        shapes=lifted(benign(STRETCH)) + rescaled(benign(STRETCH), 1e-3),
    ),
    Repro(
        "TNL111",
        "NF",
        "Gated.forward",
        PRECISION,
        example=1,
        adversarial=overflowing_gate,
        benign=benign_gate,
        grad=("h", "w"),
        reference=gated,
        shapes=lifted(benign_gate) + rescaled(benign_gate, 1e-3),
        thresholds={
            d: f"Gated(): h 4 x 8 randn, h[0, 0] = {-2 * v:g}, h[1, 0] = {2 * v:g} (exp(z) is inf from {-v:g} in {d}); "
            "w 8 x 8 randn * 0.3, row 0 = e_0 (z[:, 0] = h[:, 0] + a few units)"
            for d, v in EXP_OVERFLOW.items()
        },
    ),
)
