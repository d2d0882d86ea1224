"""TNL303 eps-below-fp16: `h / (h.abs().amax(-1, keepdim=True) + 1e-8)` with float16 `h`.

Run under CUDA's autocast policy (cuda_policy.py, on the CPU): `x @ w` is a matmul, float16 on
CUDA; `abs`, `amax`, `+` and `/` keep float16, where 1e-8 rounds to 0.0 (below 2.98e-8): a row
of `h` that is all 0 gives 0 / 0 = NaN. The fix's eps, float16's smallest normal 6.1e-5, holds:
0 / 6.1e-5 = 0, and the gradient there, 1/eps, is 16384 (with 1e-8 in float32 it would be 1e8,
Inf once it flows back into the float16 `h`: measured, grad x and grad w NaN).

The reference is the definition in float64: h / (max_j |h_j| + 1e-8), h = x w. The gradient
checked is the weight's (x is the batch: data, no gradient); at the zero row the fix's gradient
with respect to `h` is 1/eps = 16384 times the upstream one, which x's gradient, were it asked
for, could still take past 65504 (measured: 8 of 128 entries Inf).

Further: 3-D and 4-D (leading batch dims on x and w, a batched matmul; the example's `dim=-1`
fixes the reduced dim last) and x times 8 (a power of two: x stays on float16's grid; peaks of h
up to 1.6e4, within float16's 65504). No other scale applies: times 1e3 the float16 matmul
overflows (a hazard of its own), and below about 0.56 the smallest peak (227, measured) falls
under 127, where the fix's eps moves the quotient by more than float32 resolves (6.1e-5 / 127 =
4.8e-7): the change the UNSAFE fix makes by design, not a benign input.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, rows_spanning


def peak_normalized(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """h / (max_j |h_j| + 1e-8) per row, h = x w: each row scaled to peak magnitude 1."""
    h = x @ w
    return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-8)


def zero_row(ctx: ReproContext) -> Inputs:
    """x 8 x 16 randn with row 3 all 0 (a dead input, a padded position): that row of h is 0."""
    g = gen(303)
    x = torch.randn(8, 16, generator=g)
    x[3] = 0
    return put(ctx, x=x.half().float(), w=torch.randn(16, 16, generator=g).half().float())


def spanning_rows(ctx: ReproContext) -> Inputs:
    """Rows of x of scale 30 .. 300: peaks of h from ~100 to a few thousand (float16 holds them),
    where the fix's eps 6.1e-5 moves the quotient by less than float64's tolerance of the check
    (6.1e-5 / 127 = 4.8e-7): away from small peaks the fix is the original."""
    return put(ctx, x=rows_spanning(8, 16, 30.0, 300.0, 3031).half().float(), w=torch.randn(16, 16, generator=gen(3032)).half().float())


REPRO = Repro(
    "TNL303",
    "NF",
    "peak_normalize",
    ("autocast",),
    adversarial=zero_row,
    benign=spanning_rows,
    grad=("w",),
    reference=peak_normalized,
    shapes=lifted(spanning_rows) + rescaled(spanning_rows, 8.0, only=("x",)),
    bound=Bound(
        "the eps 6.1e-5 replaces 1e-8: a quotient h / (p + eps) moves by at most 6.1e-5 / p relative; "
        "at the all-zero row the gradient 1/eps is 1.6e4 instead of 1e8",
        rel=1.0,
    ),
    thresholds={"*": "h = x @ w in float16 with one all-zero row: its peak 0 + 1e-8 is 0 in float16 (1e-8 < 2.98e-8)"},
)
