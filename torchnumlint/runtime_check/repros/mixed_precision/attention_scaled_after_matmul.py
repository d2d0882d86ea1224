"""TNL308 attention-scaled-after-matmul: `(q @ k.transpose(-2, -1)) * scale` under CUDA autocast
computes the unscaled dot products in float16, which leave its range before the scale applies.

Run under CUDA's autocast policy (cuda_policy.py, on the CPU): the matmul gets float16 inputs and
gives float16 scores; `softmax` runs in float32, but an Inf score is already there, and the softmax
of a row holding Inf is NaN. The fix scales q first: the same scores up to rounding, at most
4096 here, finite.

Measured (torch 2.13 CPU, CUDA policy): q = k with 256 channels ~N(0, 16^2), 64 tokens: 32 of 64
self-scores |q|^2 pass 65504 (Inf), those 32 rows of the softmax NaN (8192 of 16384 outputs); with q scaled first none.
q, k and v are on float16's grid, so the float64 reference sees the values the float16 matmul
gets.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v, the scaled dot-product attention of the definition."""
    d = q.shape[-1]
    return torch.softmax(q @ k.transpose(-2, -1) / d ** 0.5, dim=-1) @ v


def on_half_grid(ctx: ReproContext, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Inputs:
    """The tensors rounded to float16's grid (then float32, autocast's input dtype)."""
    return put(ctx, q=q.half().float(), k=k.half().float(), v=v.half().float())


def overflowing(ctx: ReproContext) -> Inputs:
    """Self-attention scores of 64 tokens x 256 channels ~N(0, 16^2), q = k: 32 of the 64 self-scores
    |q_i|^2 pass 65504 in the float16 product (measured)."""
    g = gen(308)
    x = torch.randn(1, 64, 256, generator=g) * 16
    return on_half_grid(ctx, x, x.clone(), torch.randn(1, 64, 256, generator=g))


def in_range(ctx: ReproContext) -> Inputs:
    """64 tokens x 256 channels, token i of scale 1e-2 .. 1 (log-spaced): every unscaled score below
    300, the softmax from nearly uniform to peaked."""
    g = gen(3081)
    scales = (1e-2 * (1e2 ** torch.linspace(0, 1, 64)))[None, :, None]
    q = torch.randn(1, 64, 256, generator=g) * scales
    k = torch.randn(1, 64, 256, generator=g) * scales
    return on_half_grid(ctx, q, k, torch.randn(1, 64, 256, generator=g))


REPRO = Repro(
    "TNL308", "NF", "attend", ("autocast",),
    adversarial=overflowing, benign=in_range, grad=("q", "k", "v"), reference=attention,
    thresholds={"*": "q = k: 64 tokens x 256 channels ~N(0, 16^2) on float16's grid: the self-scores |q|^2 "
                     "pass 65504 in the float16 matmul (32 of 64 Inf) before the scale 1/16 applies"},
)
