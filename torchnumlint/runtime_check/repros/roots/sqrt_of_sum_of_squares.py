"""TNL204 sqrt-of-sum-of-squares: the gradient of sqrt(sum(x**2)) is NaN at an all-zero row, and in
float16 the squares overflow; torch.linalg.vector_norm has neither problem.

Examples 2 (`distance_loss`: three norms, of centred rows, of masked rows and of relu(a) as a
whole) and 3 (`pairwise_loss`: the distance between every two rows) are reproduced too. Example 3
has no benign inputs: its diagonal, the distance of a row to itself, is 0 on every input, so the
original's gradient is NaN everywhere whatever the rows; its adversarial rows span scales 1e-3
.. 1 instead, where the SAFE fix must equal the mathematics to 1e-9 norm-wise: an eps of 1e-12
under the root (1e-6 on the diagonal) fails that (measured), which a span up to 1e3 would hide.
"""

from __future__ import annotations

from typing import Optional

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import constant_row, gen, lifted, put, rows_spanning

DTYPES = ("float32", "float16")
# The largest row scale of the benign inputs: float16's squares overflow past 255.9, so its rows
# stay at scale 30 (16 entries: sum of squares ~ 14400 < 65504).
LARGEST = {"float32": 1e3, "float16": 30.0}


SUBGRADIENT = (
    "the norm of a zero vector has no derivative: its subgradient of least norm, 0, is taken "
    "(torch.linalg.vector_norm's convention, which the fix shares)"
)


def euclidean_norm(v: torch.Tensor, dim: Optional[int] = None, keepdim: bool = False) -> torch.Tensor:
    """||v||_2 = sqrt(sum v^2) over `dim` (all of v when None), from its definition. At v = 0 the
    norm has no derivative; its subgradient of least norm, 0, is taken (vector_norm's convention):
    the square root is never taken of 0, so no 0 * inf reaches the gradient."""
    squares = (v * v).sum(dim, keepdim=keepdim) if dim is not None else (v * v).sum()
    nonzero = squares > 0
    return torch.where(nonzero, torch.sqrt(torch.where(nonzero, squares, torch.ones_like(squares))), 0.0)


def centred_norm(x: torch.Tensor) -> torch.Tensor:
    """||x - mean(x)||_2 per row: the spread of each embedding about its own mean."""
    return euclidean_norm(x - x.mean(-1, keepdim=True), -1)


def distance_sum(a: torch.Tensor, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """||a_i - mean_k a_k|| + ||h_i * mask_i|| + ||relu(a)|| (the last over all of a), per row i."""
    return euclidean_norm(a - a.mean(0), 1) + euclidean_norm(h * mask, 1) + euclidean_norm(torch.relu(a))


def pairwise_distances(a: torch.Tensor) -> torch.Tensor:
    """D_ij = ||a_i - a_j||_2, the Euclidean distance between every two rows (0 on the diagonal)."""
    return euclidean_norm(a[:, None] - a[None], -1)


def zero_and_overflowing(ctx: ReproContext) -> Inputs:
    x = constant_row(204, 0.0)
    if ctx.dtype_name == "float16":
        x[2, ::2], x[2, 1::2] = 300.0, -300.0  # centred +-300: (+-300) ** 2 = 90000 overflows float16 (max 65504)
    return put(ctx, x=x)


def spanning_rows(ctx: ReproContext) -> Inputs:
    """8 rows of scale 1e-3 .. LARGEST: a guard on the norm (an eps, a clamp) above 1e-3 changes them."""
    return put(ctx, x=rows_spanning(8, 16, 1e-3, LARGEST[ctx.dtype_name], 2041))


def degenerate_distances(ctx: ReproContext) -> Inputs:
    """a: rows v, v, v + u, v - u, multiples of 1/64 (so their mean v is exact), all <= 0: rows 0
    and 1 centre to exactly 0 and relu(a) is 0 everywhere; mask: row 2 all False (h * mask = 0)."""
    g = gen(2042)
    v = -(torch.randn(16, generator=g).abs() * 64).round() / 64 - 2
    u = (torch.randn(16, generator=g).clamp(-1.9, 1.9) * 64).round() / 64
    a = torch.stack([v, v, v + u, v - u])
    mask = torch.ones(4, 16, dtype=torch.bool)
    mask[2] = False
    return put(ctx, a=a, h=torch.randn(4, 16, generator=g), mask=mask)


def generic_distances(ctx: ReproContext) -> Inputs:
    """a, h: 8 rows of scale 1e-3 .. LARGEST (centred rows, relu(a) and masked rows all nonzero);
    mask: random, every row keeping at least its first entry."""
    mask = torch.rand(8, 16, generator=gen(2043)) < 0.5
    mask[:, 0] = True
    top = LARGEST[ctx.dtype_name]
    return put(ctx, a=rows_spanning(8, 16, 1e-3, top, 2044), h=rows_spanning(8, 16, 1e-3, top, 2045), mask=mask)


def spread_points(ctx: ReproContext) -> Inputs:
    """8 points in 4 dimensions at scales 1e-3 .. 1."""
    return put(ctx, a=rows_spanning(8, 4, 1e-3, 1.0, 2046))


REPRO = Repro(
    "TNL204",
    "NF",
    "embedding_norm_loss",
    DTYPES,
    adversarial=zero_and_overflowing,
    benign=spanning_rows,
    grad=("x",),
    reference=centred_norm,
    convention=SUBGRADIENT,
    shapes=lifted(spanning_rows),  # (x 1e-3 is not benign: float16's squares underflow, the hazard itself)
    thresholds={
        "float32": "4 x 16, row 1 all zeros (gradient of sqrt at 0), other rows randn",
        "float16": "4 x 16, row 1 all zeros, row 2 +-300 (x**2 overflows float16 above 255.9)",
    },
)

FURTHER = (
    Repro(
        "TNL204",
        "NF",
        "distance_loss",
        DTYPES,
        example=1,
        adversarial=degenerate_distances,
        benign=generic_distances,
        grad=("a", "h"),
        reference=distance_sum,
        convention=SUBGRADIENT,
        shapes=lifted(generic_distances, 3),  # 4-D: the rows of a - a.mean(0) coincide
        thresholds={
            "*": "a 4 x 16 <= 0 with rows v, v, v + u, v - u (rows 0, 1 centre to 0; relu(a) = 0), "
            "h 4 x 16 randn, mask row 2 all False: three square roots of 0"
        },
    ),
    Repro(
        "TNL204",
        "NF",
        "pairwise_loss",
        DTYPES,
        example=2,
        adversarial=spread_points,
        grad=("a",),
        reference=pairwise_distances,
        convention=SUBGRADIENT,
        thresholds={"*": "a 8 x 4, rows at scales 1e-3 .. 1: the diagonal distances are 0"},
    ),
)
