"""TNL104 log-of-sigmoid: `log(1 - sigmoid(z))` is -inf once sigmoid rounds to 1; logsigmoid(-z)
stays finite.

Examples 2 (`(1.0 - (a - b).sigmoid()).log()` beside `.sigmoid().log()`, the method forms of a
pairwise loss) and 3 (`log(expit(h @ w))`: the sigmoid underflows to 0) are reproduced too."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning
from torchnumlint.runtime_check.repros.special_functions.softplus_manual import softplus

# 1 - sigmoid(z) == 0 from z >= 16.64 fp32, 8.32 fp16, 6.25 bf16 (catalogue)
SIGMOID_SATURATION = {"float32": 16.64, "bfloat16": 6.25, "float16": 8.32}
# torch.sigmoid(x) == 0 from x <= -88.75 fp32, -89.0 bf16, -17.34 fp16 (measured, torch 2.13 CPU)
SIGMOID_UNDERFLOW = {"float32": 88.75, "bfloat16": 89.0, "float16": 17.34}


def log_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """ln sigmoid(x) = -ln(1 + e^-x) = -softplus(-x)."""
    return -softplus(-x)


def log_not(z: torch.Tensor) -> torch.Tensor:
    """ln(1 - sigmoid(z)) = ln sigmoid(-z)."""
    return log_sigmoid(-z)


def pair_loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """-mean(ln sigmoid(a . b) + ln(1 - sigmoid(a - b))), broadcast as the example broadcasts."""
    return -(log_sigmoid((a * b).sum(-1)) + log_sigmoid(-(a - b))).mean()


def gated(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """h * ln sigmoid(h @ w)."""
    return h * log_sigmoid(h @ w)


def adversarial(ctx: ReproContext) -> Inputs:
    limit = SIGMOID_SATURATION[ctx.dtype_name]
    z = torch.cat([torch.linspace(-6.0, 4.0, 11), torch.tensor([limit + 0.5, 2 * limit, 40.0])])
    return put(ctx, z=z)


def benign_z(ctx: ReproContext) -> Inputs:
    """z of magnitude 1e-3 to 0.9 of the saturation, either sign: 1 - sigmoid(z) from ~0.5 to its
    smallest nonzero values, where an eps added to it or a clamp changes the values."""
    return put(ctx, z=spanning((64,), 1e-3, 0.9 * SIGMOID_SATURATION[ctx.dtype_name], 1041))


def saturated_pair(ctx: ReproContext) -> Inputs:
    """16-dimensional a, b, randn; a[0] - b[0] past the saturation, so 1 - sigmoid(a - b) is 0 there."""
    a, b = torch.randn(16, generator=gen(1042)), torch.randn(16, generator=gen(1043))
    a[0] = b[0] + SIGMOID_SATURATION[ctx.dtype_name] + 0.5
    return put(ctx, a=a, b=b)


def benign_pair(ctx: ReproContext) -> Inputs:
    """a, b of magnitude 1e-3 to 2, either sign: differences up to 4, inside every dtype's range."""
    return put(ctx, a=spanning((16,), 1e-3, 2.0, 1044), b=spanning((16,), 1e-3, 2.0, 1045))


def underflowing_gate(ctx: ReproContext) -> Inputs:
    """h 4 x 8 randn, w 8 x 8 randn * 0.3 but column 0 set so (h @ w)[0, 0] is 1.2 times past the
    underflow of sigmoid (its log is -inf there)."""
    h, w = torch.randn(4, 8, generator=gen(1046)), 0.3 * torch.randn(8, 8, generator=gen(1047))
    w[:, 0] = -1.2 * SIGMOID_UNDERFLOW[ctx.dtype_name] * h[0] / h[0].pow(2).sum()
    return put(ctx, h=h, w=w)


def benign_gate(ctx: ReproContext) -> Inputs:
    """h of magnitude 1e-3 to 3, w randn * 0.5: h @ w of a few units, sigmoids far from 0."""
    return put(ctx, h=spanning((4, 8), 1e-3, 3.0, 1048), w=0.5 * torch.randn(8, 8, generator=gen(1049)))


REPRO = Repro(
    "TNL104",
    "NF",
    "log_not",
    PRECISION,
    adversarial=adversarial,
    benign=benign_z,
    grad=("z",),
    reference=log_not,
    shapes=lifted(benign_z) + rescaled(benign_z, 1e-3),
    thresholds={
        d: f"z in -6..4 plus {v + 0.5:g}, {2 * v:g}, 40 (1 - sigmoid(z) is 0 from z >= {v:g} in {d})" for d, v in SIGMOID_SATURATION.items()
    },
)

FURTHER = (
    Repro(
        "TNL104",
        "NF",
        "pair",
        PRECISION,
        example=1,
        adversarial=saturated_pair,
        benign=benign_pair,
        grad=("a", "b"),
        reference=pair_loss,
        # (a * b).sum(-1) + (a - b) broadcasts only for 1-D a, b (a row's sum against its entries)
        shapes=rescaled(benign_pair, 1e-3),
        thresholds={
            d: f"a, b randn (16); a[0] - b[0] = {v + 0.5:g} (1 - sigmoid is 0 from {v:g} in {d})" for d, v in SIGMOID_SATURATION.items()
        },
    ),
    Repro(
        "TNL104",
        "NF",
        "gate",
        PRECISION,
        example=2,
        adversarial=underflowing_gate,
        benign=benign_gate,
        grad=("h", "w"),
        reference=gated,
        shapes=lifted(benign_gate) + rescaled(benign_gate, 1e-3),
        thresholds={
            d: f"h 4 x 8 randn, w 8 x 8; (h @ w)[0, 0] = {-1.2 * v:g} (sigmoid is 0 from {-v:g} in {d})"
            for d, v in SIGMOID_UNDERFLOW.items()
        },
    ),
)
