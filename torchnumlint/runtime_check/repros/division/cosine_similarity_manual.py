"""TNL203 cosine-similarity-manual: `(z * peer_z).sum(-1) / (z.norm(-1) * peer_z.norm(-1))` with
`z = relu(z)` is 0/0 = NaN, forward and gradient, for a row whose pre-activations are all
negative. The fix, `F.cosine_similarity`, is judged against the cosine by its definition,
sum(u v) / sqrt(sum(u^2) sum(v^2)), in float64: undefined on the zero row (not compared), equal
elsewhere.

float32 and bfloat16: in float16 cosine_similarity's eps (1e-8) rounds to 0 and its zero row is
NaN too (measured), which TNL303 (eps-below-fp16) is about. Example 2 is not reproduced: the
linter offers no fix for it.

Further: 3-D and 4-D (leading batch dims; the example's `dim=-1` fixes the reduced dim last) and
both inputs times 1e-3 and 1e3 (a cosine is scale-free; the smallest row norm, 5.1e-6 at 1e-3 (measured), stays
far above cosine_similarity's eps 1e-8)."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled

DTYPES = ("float32", "bfloat16")


def relu_cosine(z: torch.Tensor, peer_z: torch.Tensor) -> torch.Tensor:
    """cos(relu(z)_i, peer_z_i) per row: sum(u v) / sqrt(sum(u^2) sum(v^2)), u = max(z, 0)."""
    u = torch.where(z > 0, z, torch.zeros_like(z))
    return (u * peer_z).sum(-1) / torch.sqrt((u * u).sum(-1) * (peer_z * peer_z).sum(-1))


def dead_row(ctx: ReproContext) -> Inputs:
    """8 x 16 randn pre-activations with row 0 all negative (its relu is a zero row), randn peers."""
    z = torch.randn(8, 16, generator=gen(2031))
    z[0] = -z[0].abs() - 0.1
    return put(ctx, z=z, peer_z=torch.randn(8, 16, generator=gen(2032)))


def live_rows(ctx: ReproContext) -> Inputs:
    """8 x 16 pre-activations, each row's positive part of magnitude 1e-3 to 1e3 (no row all
    negative), randn peers: cosines where an eps on the norms would show only below 1e-8."""
    z = torch.randn(8, 16, generator=gen(2033)).abs() * torch.logspace(-3, 3, 8)[:, None]
    return put(ctx, z=z, peer_z=torch.randn(8, 16, generator=gen(2034)))


REPRO = Repro(
    "TNL203",
    "NF",
    "agreement",
    DTYPES,
    adversarial=dead_row,
    benign=live_rows,
    grad=("z", "peer_z"),
    reference=relu_cosine,
    shapes=lifted(live_rows) + rescaled(live_rows, 1e-3, 1e3),
    thresholds={"*": "8 x 16 randn, row 0 of z all negative (relu gives a zero row: 0/0)"},
)
