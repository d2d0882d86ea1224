"""TNL301 fp16-autocast-custom-op: a custom autograd.Function without custom_fwd(cast_inputs=
torch.float32) runs its forward in float16 under autocast, where gram * gram overflows.

Run under CUDA's autocast policy (cuda_policy.py, on the CPU): `x @ w` and `scores @ scores.T`
are matmuls, float16 on CUDA; `gram * gram` keeps its inputs' float16 and is Inf once a Gram entry
passes 255.9, and energy / (1 + energy) is Inf / Inf = NaN there. The fix's forward gets float32
inputs and runs with autocast off. Examples 2 and 3 pin no fix: nothing to run.

x and w are on float16's grid, so the float64 reference sees the very values CUDA autocast feeds
the float16 `x @ w`: what remains of the run's error is the rounding of the scores to float16
(shared by the original and the fix, outside the custom op) and of the op itself. On inputs off
the grid the exact mathematics of the float16-rounded x and w is already 1.5 % off in the
forward and 2.9 % in the gradient of x (measured, torch 2.13 CPU): A = G^2 / (1 + G^2) is
ill-conditioned in G where |G| is small beside |S|^2.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rows_spanning


def pair_affinity(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A_ij = G_ij^2 / (1 + G_ij^2) with G = S S^T, S = x w: the affinity of every two rows of the
    scores, G^2 / (1 + G^2) written as 1 - 1 / (1 + G^2) (in (0, 1), no Inf / Inf for large G),
    differentiated by autograd (the example's hand-written backward is that derivative)."""
    scores = x @ w
    gram = scores @ scores.transpose(-1, -2)
    return 1 - 1 / (1 + gram * gram)


def on_half_grid(ctx: ReproContext, x: torch.Tensor, w: torch.Tensor) -> Inputs:
    """x and w rounded to float16's grid (then float32, autocast's input dtype)."""
    return put(ctx, x=x.half().float(), w=w.half().float())


def overflowing(ctx: ReproContext) -> Inputs:
    """x 32 x 16, w 16 x 16 randn: |G| up to 486, 12 entries past 255.9 (measured)."""
    g = gen(301)
    return on_half_grid(ctx, torch.randn(32, 16, generator=g), torch.randn(16, 16, generator=g))


def in_range(ctx: ReproContext) -> Inputs:
    """x: 32 rows of scale 1e-2 .. 1, w: 16 x 16 randn * 0.5: |G| from 4.7e-5 to 87 (measured),
    affinities from ~0 to ~1, all below float16's overflow of G^2 at 255.9."""
    return on_half_grid(ctx, rows_spanning(32, 16, 1e-2, 1.0, 3012), torch.randn(16, 16, generator=gen(3013)) * 0.5)


REPRO = Repro(
    "TNL301",
    "NF",
    "step",
    ("autocast",),
    adversarial=overflowing,
    benign=in_range,
    grad=("x", "w"),
    reference=pair_affinity,
    shapes=lifted(in_range),
    thresholds={
        "*": "scores = x @ w, x 32 x 16, w 16 x 16 randn on float16's grid: gram = scores @ scores.T (|gram| up to "
        "486); gram * gram overflows float16 once a Gram entry passes 255.9"
    },
)
